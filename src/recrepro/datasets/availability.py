"""Which datasets a mirror can provide, and which published cells that puts within reach.

Names only are looked at (nothing is read or verified: :mod:`recrepro.datasets.download` does
that when it fetches). ``results/<tier>/datasets.json`` keeps :func:`dataset_availability`;
the scorecard summary asks :func:`reachable` per cell.
"""

from __future__ import annotations

from pathlib import Path

from recrepro.datasets.registry import DatasetSpec, ReconstructedForm

__all__ = ["dataset_availability", "mirror_form", "mirror_holds", "reachable"]


def mirror_holds(spec: DatasetSpec, mirror: str | Path | None) -> bool:
    """Whether ``mirror/<name>/`` holds every member of ``spec`` (or its release archive).

    Looks at file names only (nothing is read or verified: the fetch does that); used to
    say which published cells a reproduction could reach with the data it had.
    """
    return _canonical_in_mirror(spec, mirror)


def mirror_form(spec: DatasetSpec, mirror: str | Path | None) -> ReconstructedForm | None:
    """The first reconstructed form of ``spec`` whose files ``mirror`` holds (names only)."""
    if mirror is None:
        return None
    for form in spec.forms:
        if all((Path(mirror) / form.folder / member).is_file() for member in form.members):
            return form
    return None


def _canonical_in_mirror(spec: DatasetSpec, mirror: str | Path | None) -> bool:
    if mirror is None:
        return False
    folder = Path(mirror) / spec.name
    if not folder.is_dir():
        return False
    if spec.archive and (folder / spec.archive).is_file():
        return True
    return bool(spec.members) and all((folder / member).is_file() for member in spec.members)


def dataset_availability(mirror: str | Path | None) -> dict[str, str]:
    """Registry name -> ``generated`` | ``mirror`` | ``form:<name>`` | ``missing``.

    ``mirror``: the canonical files (see :func:`mirror_holds`); ``form:<name>``: only a
    reconstructed form (:func:`mirror_form`), which serves the papers its registry entry
    names (:func:`reachable`).
    """
    from recrepro.datasets.registry import DATASETS

    out = {}
    for name, spec in sorted(DATASETS.items()):
        form = None if spec.generated or mirror_holds(spec, mirror) else mirror_form(spec, mirror)
        out[name] = ("generated" if spec.generated else "mirror" if mirror_holds(spec, mirror)
                     else f"form:{form.name}" if form is not None else "missing")
    return out


def reachable(availability: str, dataset: str, paper: str) -> bool:
    """Whether a published cell of ``paper`` on ``dataset`` has its data, given the dataset's
    :func:`dataset_availability` value: generated or canonical in the mirror, or a
    reconstructed form whose registry entry serves ``paper``."""
    if availability in ("generated", "mirror"):
        return True
    if availability.startswith("form:"):
        from recrepro.datasets.registry import DATASETS

        spec = DATASETS.get(dataset)
        try:
            return spec is not None and paper in spec.form(availability.removeprefix("form:")).papers
        except ValueError:
            return False
    return False

