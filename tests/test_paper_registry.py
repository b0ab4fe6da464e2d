"""The one registry of papers (recrepro.paperlist): nothing else lists them, and it lists what is there.

- No ``.py`` or ``.smk`` file under ``src/``, ``workflow/`` or ``tests/``, nor the ``Snakefile``, types
  a list, tuple, set or dict of two or more paper keys, nor a ``"a|b"`` pattern of them: they read
  :mod:`recrepro.paperlist` (``paper_keys()``, ``summary_keys()``, ...). The registry module and this
  file (its samples) are the exceptions.
- The registry's keys are the packages under ``src/recrepro/papers/``, and the files a paper needs (its
  rule files, its expected numbers, its ``config.yaml`` block, its place in pyproject.toml's independence
  contract) exist for every key: docs/adding-a-paper.md lists them.
"""

from __future__ import annotations

import importlib.util
import re
import tomllib
from pathlib import Path

import pytest
import yaml

from recrepro import paperlist
from recrepro.paperlist import PAPERS, data_protocol_keys, get_paper, paper_keys, summary_keys

REPO = Path(__file__).resolve().parents[1]
#: what the scan reads (relative to the repository); benchmarks/ names its groups, some after a paper
SCANNED = ("src", "workflow", "tests", "Snakefile")
#: the files that may list the papers: the registry, and this file's samples
EXEMPT = {"src/recrepro/paperlist.py", "tests/test_paper_registry.py"}
#: a list kept for now, each with its reason; only that exact text is allowed in that file (an entry
#: whose text is gone fails, so the list shrinks as they move to the registry)
KNOWN: dict[tuple[str, str], str] = {}


def _pattern(keys) -> tuple[re.Pattern, re.Pattern]:
    """Two regexes: a run of two or more quoted keys, separated by commas (line breaks and comments
    allowed), each optionally a dict entry's key (``"key": value``); and a quoted ``key|key`` pattern."""
    alternatives = "|".join(map(re.escape, keys))
    quoted = rf"""(?:"(?:{alternatives})"|'(?:{alternatives})')"""
    value = r"""(?:\s*:\s*(?:"[^"\n]*"|'[^'\n]*'|[^,()\[\]{}"'\n]+))?"""
    gap = r"""\s*,\s*(?:#[^\n]*\n\s*)*"""
    run = re.compile(rf"{quoted}{value}(?:{gap}{quoted}{value})+")
    alternation = re.compile(rf"""["'][^"'\n]*(?<![\w-])(?:{alternatives})\|(?:{alternatives})(?![\w-])[^"'\n]*["']""")
    return run, alternation


def literal_lists(text: str, keys=None) -> list[tuple[int, str]]:
    """``(line, text)`` of every literal that lists two or more distinct paper keys in ``text``."""
    keys = tuple(keys or paper_keys())
    word = re.compile(rf"(?<![\w-])(?:{'|'.join(map(re.escape, keys))})(?![\w-])")
    found = []
    for regex in _pattern(keys):
        for match in regex.finditer(text):
            if len(set(word.findall(match.group(0)))) >= 2:
                found.append((text.count("\n", 0, match.start()) + 1, match.group(0)))
    return sorted(found)


def _scanned_files() -> list[Path]:
    files = []
    for top in SCANNED:
        path = REPO / top
        if path.is_file():
            files.append(path)
        elif path.is_dir():
            files += [p for p in path.rglob("*") if p.suffix in (".py", ".smk") and "__pycache__" not in p.parts]
    return sorted(files)


@pytest.mark.parametrize("text", [
    'PAPERS = ("exadmm", "prism", "lambdaopt", "fedrap", "lrs")',
    "SUMMARY = ['prism', 'lrs']",
    '{"baselines", "exadmm", "prism"}',
    'for paper in (\n    "prism",  # PRISM first\n    "fedrap",\n):',
    'TITLES = {\n    "exadmm": "exADMM",\n    "prism": "PRISM",\n}',
    'TOLERANCE = {"prism": 1e-3, "exadmm": 1e-6}',
    'wildcard_constraints:\n        paper="exadmm|prism|lambdaopt|fedrap",',
    'choices=["exadmm", "fedrap"]',
])
def test_the_scan_finds_a_typed_list_of_papers(text):
    assert literal_lists(text)


@pytest.mark.parametrize("text", [
    'FAMILIES = ("ials", "exadmm", "fairrec")',
    'for paper, served in (("prism", True), ("fedrap", False)):',
    'papers=["exadmm"]',
    '["exadmm", "exadmm_sw5", "exadmm_code"]',
    '"results/paper/prism/runs/ml-1m/prism/random_ratio"',
    'r"exadmm_scalability|lambdaopt_sensitivity"',
    '("ials", 0.01), ("exadmm", 0.008), ("fairrec", 0.5)',
])
def test_the_scan_leaves_other_lists_alone(text):
    assert not literal_lists(text)


def test_no_file_but_the_registry_lists_the_papers():
    typed, known_seen = [], set()
    for path in _scanned_files():
        name = path.relative_to(REPO).as_posix()
        if name in EXEMPT:
            continue
        for line, text in literal_lists(path.read_text(encoding="utf-8")):
            if (name, text) in KNOWN:
                known_seen.add((name, text))
            else:
                typed.append(f"{name}:{line}: {text[:120]!r}")
    assert not typed, ("these list the papers by hand: read recrepro.paperlist instead (paper_keys(), "
                       "summary_keys(), data_protocol_keys(), PAPERS):\n" + "\n".join(typed))
    gone = set(KNOWN) - known_seen
    assert not gone, f"no longer found, drop them from KNOWN: {sorted(gone)}"


def test_the_registry_lists_the_packages_under_papers():
    packages = {p.name for p in (REPO / "src" / "recrepro" / "papers").iterdir()
                if p.is_dir() and (p / "__init__.py").is_file()}
    assert set(paper_keys()) == packages, "src/recrepro/papers/<key>/ and recrepro.paperlist.PAPERS differ"
    assert len(paper_keys()) == len(PAPERS)


def test_every_paper_has_its_files():
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    for paper in PAPERS:
        assert re.fullmatch(r"[a-z][a-z0-9]*", paper.key), paper.key
        assert paper.title and paper.short_title and paper.cli_help, paper.key
        assert paper.cli_module == f"{paper.package}.cli"
        assert importlib.util.find_spec(paper.cli_module) is not None, paper.cli_module
        assert (REPO / "src" / "recrepro" / "expected" / paper.expected_file).is_file(), paper.key
        assert all((REPO / f).is_file() for f in paper.rule_files), paper.rule_files
        assert paper.key in config, f"config.yaml: no {paper.key}: block"
        assert paper.gpu_tolerance > 0
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    contracts = {c["id"]: c for c in pyproject["tool"]["importlinter"]["contracts"]}
    assert contracts["papers-independent"]["modules"] == [p.package for p in PAPERS]
    assert any("recrepro.paperlist" in layer for layer in contracts["layers"]["layers"])


def test_the_schema_names_the_papers_with_a_protocol_of_their_own():
    schema = yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text())
    enums = []

    def walk(node):
        if isinstance(node, dict):
            if isinstance(node.get("paper"), dict) and "enum" in node["paper"]:
                enums.append(node["paper"]["enum"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(schema)
    assert enums and all(enum == list(data_protocol_keys()) for enum in enums), enums


def test_the_helpers_and_the_readers_agree():
    from recrepro.cli.main import PAPERS as cli_papers
    from recrepro.reporting.front_page import PAPER_TITLES
    from recrepro.scorecard import SUMMARY_PAPERS

    assert paper_keys() == tuple(p.key for p in PAPERS)
    assert summary_keys() == SUMMARY_PAPERS == tuple(p.key for p in PAPERS if p.in_summary)
    assert set(data_protocol_keys()) <= set(paper_keys())
    assert cli_papers == {p.key: (p.cli_help, p.cli_module) for p in PAPERS}
    assert list(PAPER_TITLES) == list(paper_keys())
    assert get_paper("prism").short_title == "PRISM"
    with pytest.raises(KeyError, match="known: exadmm"):
        get_paper("nope")
    with pytest.raises(AttributeError):
        PAPERS[0].key = "other"  # frozen
    assert paperlist.__all__ and all(hasattr(paperlist, name) for name in paperlist.__all__)


#: what every paper's rules module defines for the shared workflow and tests (docs/adding-a-paper.md, item 1)
RULES_HOOKS = ("run_records", "seeds_required", "training_pools", "smoke_methods", "SMALLEST_SMOKE_RUNS", "GPU_RULES")


def test_adding_a_paper_touches_at_most_twelve_places():
    """The checklist a sixth paper follows stays at 12 places or fewer, and names the registry's files."""
    text = (REPO / "docs" / "adding-a-paper.md").read_text()
    section = text.split("## Checklist: the places a sixth paper touches", 1)[1].split("\n## ", 1)[0]
    items = re.findall(r"^\d+\. \[ \] ", section, flags=re.MULTILINE)
    assert 0 < len(items) <= 12, f"{len(items)} places in the checklist (at most 12)"
    assert re.search(rf"^{len(items)} places:", section.strip(), flags=re.MULTILINE), "the count it states"
    for name in ("src/recrepro/paperlist.yaml", "config.yaml", "pyproject.toml", "tests/gpu_runs/<paper>.py",
                 *RULES_HOOKS):
        assert f"`{name}" in section, name


@pytest.mark.parametrize("paper", paper_keys())
def test_every_paper_defines_the_hooks_the_shared_code_reads(paper):
    """The shared workflow, the leak audit and the tests reach a paper only through these."""
    import importlib

    rules = importlib.import_module(f"recrepro.papers.{paper}.rules")
    missing = [hook for hook in RULES_HOOKS if not hasattr(rules, hook)]
    assert not missing, f"{paper}: rules.py lacks {missing}"
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    assert rules.smoke_methods(config), paper
    assert all(r.startswith(f"results/smoke/{paper}/") for r in rules.run_records(config, "smoke")), paper
    assert (REPO / "tests" / "gpu_runs" / f"{paper}.py").is_file(), paper


@pytest.mark.parametrize("entry, message", [
    ("- {key: x, title: t, short_title: s, cli_help: h, colour: red}", r"paper 1 \(x\): unknown field\(s\) \['colour'\]"),
    ("- {key: x, title: t, short_title: s}", r"paper 1 \(x\): missing field\(s\) \['cli_help'\]"),
    ("- {key: x, title: t, short_title: s, cli_help: h, gpu_tolerance: 1e-6}", r"gpu_tolerance must be float or int"),
    ("- {key: x, title: t, short_title: s, cli_help: h, time_ordered: 1}", r"time_ordered must be bool"),
    ("- just a string", r"paper 1: expected a mapping"),
    ("key: x", r"expected a non-empty list"),
])
def test_a_bad_paper_list_gets_a_short_error_naming_the_entry(tmp_path, entry, message):
    path = tmp_path / "paperlist.yaml"
    path.write_text(entry + "\n")
    with pytest.raises(ValueError, match=message):
        paperlist._load(path)


def test_the_paper_list_file_loads_to_the_registry():
    assert paperlist._load(paperlist._LIST_FILE) == PAPERS
    assert [p.cli_module for p in PAPERS] == [f"recrepro.papers.{p.key}.cli" for p in PAPERS]
