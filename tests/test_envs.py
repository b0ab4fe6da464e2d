"""envs/*.yaml (for ``--sdm conda``) pin the versions pyproject.toml resolves to in this environment.

Every runtime dependency of pyproject.toml must be pinned in each env, the pin must match the version
pip installed here (``pip install -e .`` resolves pyproject's ranges), and that version must satisfy
the range. When a new release is resolved, this fails and names the env line to update.
"""

from __future__ import annotations

import fnmatch
import importlib.metadata as metadata
import re
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.version import Version

REPO = Path(__file__).resolve().parents[1]
ENVS = sorted((REPO / "envs").glob("*.yaml"))
CONDA_NAME = {"torch": "pytorch", "matplotlib": "matplotlib-base"}  # pip name -> conda-forge name


def _pins(env: Path) -> dict[str, tuple[str, str | None]]:
    pins = {}
    for dep in yaml.safe_load(env.read_text())["dependencies"]:
        assert isinstance(dep, str), f"{env.name}: unexpected entry {dep!r}"
        name, _, rest = dep.partition("=")
        version, _, build = rest.partition("=")
        pins[name.strip()] = (version.strip(), build.strip() or None)
    return pins


def _requirements() -> list[Requirement]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    return [Requirement(r) for r in project["dependencies"]]


def test_envs_exist():
    assert {e.name for e in ENVS} >= {"cpu.yaml", "gpu.yaml"}


@pytest.mark.parametrize("env", ENVS, ids=lambda p: p.name)
def test_env_pins_every_dependency_at_the_resolved_version(env):
    pins = _pins(env)
    assert pins.get("python", ("",))[0] == f"{sys.version_info.major}.{sys.version_info.minor}", \
        f"{env.name}: python pin {pins.get('python')} vs this interpreter {sys.version.split()[0]}"
    for req in _requirements():
        conda = CONDA_NAME.get(req.name, req.name)
        assert conda in pins, f"{env.name} does not pin {conda} (pyproject: {req})"
        installed = Version(metadata.version(req.name)).base_version  # 2.13.0+cpu -> 2.13.0
        assert req.specifier.contains(installed, prereleases=True), f"{req.name} {installed} outside {req}"
        pinned, _ = pins[conda]
        assert fnmatch.fnmatch(installed, pinned) or installed == pinned, \
            f"{env.name}: {conda}={pinned} but pip resolved {req.name} {installed}; update the pin"


def test_torch_builds_match_the_env_purpose():
    builds = {e.name: _pins(e)["pytorch"][1] for e in ENVS if "pytorch" in _pins(e)}
    assert re.fullmatch(r"cpu\*?", builds["cpu.yaml"] or ""), builds
    assert re.fullmatch(r"cuda\*?", builds["gpu.yaml"] or ""), builds


def test_pin_matching_is_not_vacuous():
    # a pin for another minor release must not match
    assert not fnmatch.fnmatch("2.4.6", "2.5.*")
    assert fnmatch.fnmatch("2.4.6", "2.4.*")
