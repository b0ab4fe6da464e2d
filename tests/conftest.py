"""Shared fixtures: the real-data mirror (skipped with a reason when absent) and the repo root."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def mirror_path() -> Path | None:
    """``$RECREPRO_MIRROR`` or ``../shared/datasets`` beside the checkout, if present."""
    env = os.environ.get("RECREPRO_MIRROR")
    candidates = [Path(env)] if env else []
    candidates.append(REPO.parent / "shared" / "datasets")
    for c in candidates:
        if c.is_dir():
            return c.resolve()
    return None


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO


@pytest.fixture(scope="session")
def mirror() -> Path:
    path = mirror_path()
    if path is None:
        pytest.skip("real-data mirror not found: set RECREPRO_MIRROR or place ../shared/datasets beside the checkout")
    return path
