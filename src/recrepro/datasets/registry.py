"""The dataset registry: where each dataset comes from, how it is verified and parsed.

Each :class:`DatasetSpec` is the single place that knows a dataset: its canonical
URLs, the archive (if the release is one) and its published digest, the *member*
files the parser reads with their sha256 (None where none is published), and the
parser. Digests come from ``shared/datasets/<name>/PROVENANCE.md`` (sha256 computed on
copies whose identity with the release was verified) and from the md5 lists published
in public code (``shared/datasets/README.md``).

The specs are data: ``catalogue.yaml`` beside this module holds one entry per dataset (its
header says what an entry holds). This module reads it once, at import, checks it (an unknown
key, a missing field, a value of the wrong kind, a name given twice, an unknown reader: a
ValueError naming the entry) and builds the frozen specs of :data:`DATASETS`, in file order.

A member with neither a sha256 nor an md5 (``null`` in the catalogue, no ``member_md5``) is verified
through its release archive where that has a digest (ML-10M, ML-20M); otherwise, or when a
mirror holds the bare file, it is trusted on first use (:mod:`recrepro.datasets.download`).
README.md, "Data", lists which datasets are pinned how; a test keeps the two in step.

A dataset may also have **reconstructed forms** (:class:`ReconstructedForm`): real copies of
its data that are not the canonical files (ML-1M as (user, movie) pairs only; Yelp2018's
training set rebuilt with each user's items sorted). A form is pinned by its own sha256, is
taken only from a mirror and only when the canonical files cannot be had, is named in
``fetch.json``, and lists what it lacks; a protocol that needs a lacking column refuses it
(:func:`recrepro.datasets.preprocessing.preprocess`). docs/deviations.md has one entry per form.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pandas as pd
import yaml

from recrepro.datasets import parsers
from recrepro.datasets.container import RawInteractions

__all__ = ["DATASETS", "DatasetSpec", "ReconstructedForm", "get_dataset", "load_raw"]

#: Column names a form may lack (see :class:`ReconstructedForm`); ``order`` is the file order
#: of the canonical release (which row comes before which), not a column of the parsed frame.
LACKABLE = ("rating", "timestamp", "order")


@dataclass(frozen=True)
class ReconstructedForm:
    """A real copy of a dataset that is not its canonical file form.

    Attributes
    ----------
    name:
        Short name (``pairs``, ``rebuilt-sorted``), written to ``fetch.json``.
    folder:
        The mirror's subfolder that holds it (``<mirror>/<folder>/<members>``).
    members:
        File name -> sha256 (every form member is pinned: computed on the mirror's copy,
        whose provenance its PROVENANCE.md gives).
    read:
        Reader called with the member paths in the order of ``members``.
    lacks:
        What the canonical release has and this form has not (:data:`LACKABLE`).
    papers:
        The papers whose published cells this form can serve (for the reach counts of
        :func:`recrepro.datasets.download.reachable`); a protocol that needs a lacking column
        still refuses it.
    deviation:
        Its anchor in docs/deviations.md.
    description:
        One line: what it is and where it comes from.
    implicit, has_timestamps:
        As :class:`DatasetSpec`'s, for the form's parsed frame.
    """

    name: str
    folder: str
    members: Mapping[str, str] = field(hash=False)
    read: Callable[..., pd.DataFrame] = field(hash=False, repr=False)
    lacks: tuple[str, ...]
    papers: tuple[str, ...]
    deviation: str
    description: str
    implicit: bool = True
    has_timestamps: bool = False

    def parser(self, dataset: str) -> parsers.RawParser:
        """``parser(raw_dir) -> RawInteractions`` reading this form's members."""
        return parsers.RawParser(dataset, self.read, tuple(self.members), implicit=self.implicit,
                                 has_timestamps=self.has_timestamps, form=self.name, lacks=self.lacks)


@dataclass(frozen=True)
class DatasetSpec:
    """Everything the pipeline knows about one dataset.

    Attributes
    ----------
    name:
        Registry name (also the folder name under ``data/raw/`` and in the mirror).
    description:
        One line: what the data is and who uses it.
    urls:
        Canonical download URLs. With ``archive`` set they are alternatives for the
        archive; without, each URL provides the member whose name is the URL's last
        path component (several URLs for one member are tried in order).
    archive:
        File name of the release archive the members are extracted from, or None.
    archive_md5, archive_sha256:
        Published digests of the archive (None when none is published).
    members:
        Member file name -> sha256 (None when unknown). These are the files the parser
        reads; ``fetch_dataset`` puts exactly these into ``raw_dir``.
    licence:
        Short licence/terms note.
    manual_instructions:
        For files with no reachable public URL: where to get them and where to put them.
    parser:
        ``parser(raw_dir) -> RawInteractions``.
    implicit, has_timestamps, given_split:
        ``implicit``: no explicit rating (binary, clicks or play counts);
        ``has_timestamps``: False when ``timestamp`` is the file order;
        ``given_split``: published already split into train/test (``part`` column).
    member_md5:
        Published md5 of members, where known (verified in addition to sha256).
    generated:
        True for data made by ``recrepro data synth`` rather than fetched.
    n_interactions, n_users, n_items:
        The size of the raw release as ``description`` states it (None where it states none):
        interactions (ratings, pairs, clicks or rows, whichever the description counts; for a
        published split, train + test), users and items. :mod:`recrepro.reporting.compute_page` scales cost
        estimates by ``n_interactions``; they describe the release, not what a paper's
        preprocessing keeps of it.
    raw_bytes:
        About how many bytes the members take once extracted (None: ``n_interactions`` times
        :data:`ROW_BYTES`); caps what an unverified archive may expand to
        (:func:`recrepro.datasets.download.fetch_dataset`).
    forms:
        Reconstructed forms a mirror may hold instead of the canonical files.
    """

    name: str
    description: str
    urls: tuple[str, ...]
    archive: str | None
    archive_md5: str | None
    archive_sha256: str | None
    members: Mapping[str, str | None] = field(hash=False)
    licence: str
    manual_instructions: str | None
    parser: Callable[[Path], RawInteractions] = field(hash=False, repr=False)
    implicit: bool
    has_timestamps: bool
    given_split: bool = False
    member_md5: Mapping[str, str] = field(default_factory=dict, hash=False)
    generated: bool = False
    n_interactions: int | None = None
    n_users: int | None = None
    n_items: int | None = None
    raw_bytes: int | None = None
    forms: tuple[ReconstructedForm, ...] = field(default=(), hash=False)

    def form(self, name: str) -> ReconstructedForm:
        """The reconstructed form called ``name`` (ValueError naming the known ones)."""
        for form in self.forms:
            if form.name == name:
                return form
        raise ValueError(f"{self.name}: no reconstructed form {name!r}; known: {[f.name for f in self.forms]}")

    def expected_bytes(self) -> int | None:
        """About how many bytes the extracted members take (None when nothing says)."""
        if self.raw_bytes is not None:
            return self.raw_bytes
        return None if self.n_interactions is None else self.n_interactions * ROW_BYTES


#: Bytes per interaction row assumed where a spec gives no ``raw_bytes`` (generous: the
#: releases here take 20-70 bytes a row as text).
ROW_BYTES = 128


#: The catalogue of datasets: package data beside this module (its header says what an entry holds).
CATALOGUE = "catalogue.yaml"

_GROUPLENS_TERMS = "GroupLens: research use only, no redistribution, no commercial use; cite Harper & Konstan 2015"

#: What an entry's ``source`` fills in that the entry may override (the URLs it sets cannot be).
_SOURCE_DEFAULTS: dict[str, dict[str, Any]] = {
    "grouplens": {"licence": _GROUPLENS_TERMS, "implicit": False, "has_timestamps": True},
    "lightgcn": {"reader": "lightgcn_split", "implicit": True, "has_timestamps": False, "given_split": True},
}

#: The keys of a dataset entry: DatasetSpec's fields, less those built here (``parser`` from
#: ``reader``), plus the template's ``source`` and ``folder``; and which must be there once the
#: template is applied.
_DATASET_KEYS = {f.name for f in fields(DatasetSpec)} - {"parser"} | {"reader", "source", "folder"}
_DATASET_REQUIRED = ("name", "description", "members", "reader", "licence", "implicit", "has_timestamps")
#: DatasetSpec fields without a default that an entry may leave out.
_DATASET_OPTIONAL = {"urls": (), "archive": None, "archive_md5": None, "archive_sha256": None,
                     "manual_instructions": None}
_FORM_KEYS = {f.name for f in fields(ReconstructedForm)} - {"read"} | {"reader"}
_FORM_REQUIRED = ("name", "folder", "members", "reader", "lacks", "papers", "deviation", "description")

#: What each key's value must be: check and the words for the error. Checked because YAML reads
#: ``no`` as false and a digest of digits only as a number; keys not named here take text.
_KINDS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "text": (lambda v: isinstance(v, str), "text"),
    "flag": (lambda v: isinstance(v, bool), "true or false"),
    "count": (lambda v: type(v) is int and v >= 0, "a non-negative integer"),
    "texts": (lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v), "a list of text"),
    "digests": (lambda v: isinstance(v, dict) and bool(v)
                and all(isinstance(k, str) and (d is None or isinstance(d, str)) for k, d in v.items()),
                "a mapping file name -> digest (or null)"),
    "entries": (lambda v: isinstance(v, list) and all(isinstance(x, dict) for x in v), "a list of mappings"),
}
_KIND_OF = {
    **dict.fromkeys(("implicit", "has_timestamps", "given_split", "generated"), "flag"),
    **dict.fromkeys(("n_interactions", "n_users", "n_items", "raw_bytes"), "count"),
    **dict.fromkeys(("urls", "lacks", "papers"), "texts"),
    **dict.fromkeys(("members", "member_md5"), "digests"),
    "forms": "entries",
}


class _CatalogueLoader(yaml.SafeLoader):
    """A safe YAML loader that refuses a key given twice in one mapping (PyYAML keeps the last)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        mapping = super().construct_mapping(node, deep=deep)
        seen: set[Any] = set()
        for key, _ in node.value:
            if key.value in seen:
                raise ValueError(f"{CATALOGUE}, line {key.start_mark.line + 1}: {key.value} given twice")
            seen.add(key.value)
        return mapping


def _check_entry(where: str, entry: Mapping[str, Any], allowed: set[str]) -> None:
    """ValueError naming ``where`` and the key when ``entry`` has an unknown key or a value of the wrong kind."""
    unknown = [key for key in entry if key not in allowed]
    if unknown:
        raise ValueError(f"{where}: unknown field(s) {', '.join(unknown)}")
    for key, value in entry.items():
        check, kind = _KINDS[_KIND_OF.get(key, "text")]
        if not check(value):
            raise ValueError(f"{where}: {key} must be {kind}, not {value!r}")


def _check_required(where: str, entry: Mapping[str, Any], required: tuple[str, ...]) -> None:
    """ValueError naming ``where`` and the required fields ``entry`` lacks."""
    missing = [key for key in required if key not in entry]
    if missing:
        raise ValueError(f"{where}: missing field(s) {', '.join(missing)}")


def _reader(where: str, name: str) -> Callable[..., pd.DataFrame]:
    """The parser function ``read_<name>`` of :mod:`recrepro.datasets.parsers`."""
    read = getattr(parsers, f"read_{name}", None)
    if not callable(read):
        raise ValueError(f"{where}: reader: recrepro.datasets.parsers has no function read_{name} "
                         "(a reader is named without its read_ prefix)")
    return read


def _urls(where: str, urls: Sequence[str], prefixes: Mapping[str, str]) -> tuple[str, ...]:
    """``urls`` with each ``{prefix}`` replaced by its ``url_prefixes`` entry."""
    try:
        return tuple(url.format_map(prefixes) for url in urls)
    except (KeyError, ValueError, IndexError, AttributeError):
        raise ValueError(f"{where}: urls: a {{prefix}} that is not one of url_prefixes "
                         f"({', '.join(prefixes)}) in {urls}") from None


def _apply_source(where: str, entry: Mapping[str, Any]) -> dict[str, Any]:
    """``entry`` completed by its ``source`` template (without ``source`` and ``folder``).

    ``grouplens``: the archive ``<name>.zip`` under ``<folder>/`` of files.grouplens.org;
    ``lightgcn``: one URL per member in the dataset's folder of the LightGCN repository. Each
    also gives the defaults of :data:`_SOURCE_DEFAULTS`.
    """
    completed = dict(entry)
    source, folder = completed.pop("source", None), completed.pop("folder", None)
    if source is not None and source not in _SOURCE_DEFAULTS:
        raise ValueError(f"{where}: source: unknown {source!r}; known: {', '.join(_SOURCE_DEFAULTS)}")
    if (source == "grouplens") != (folder is not None):
        raise ValueError(f"{where}: folder: a grouplens entry needs one, and only a grouplens entry has one")
    if source is None:
        return completed
    name = completed.get("name")
    if source == "grouplens":
        derived = {"urls": [f"{{grouplens}}/{folder}/{name}.zip"], "archive": f"{name}.zip"}
    else:  # the reader takes train.txt, then test.txt: the members' order
        derived = {"urls": [f"{{lightgcn}}/{name}/{member}" for member in completed.get("members", {})]}
    clash = sorted(set(derived) & set(completed))
    if clash:
        raise ValueError(f"{where}: {', '.join(clash)}: set by source {source}; leave it out")
    return {**_SOURCE_DEFAULTS[source], **completed, **derived}


def _reconstructed_form(where: str, entry: Mapping[str, Any]) -> ReconstructedForm:
    """A :class:`ReconstructedForm` from its catalogue entry (nested under its dataset's ``forms``)."""
    _check_entry(where, entry, _FORM_KEYS)
    _check_required(where, entry, _FORM_REQUIRED)
    if None in entry["members"].values():
        raise ValueError(f"{where}: members: every member of a form is pinned by its sha256")
    unknown_lacks = [column for column in entry["lacks"] if column not in LACKABLE]
    if unknown_lacks:
        raise ValueError(f"{where}: lacks: {', '.join(unknown_lacks)} not among {', '.join(LACKABLE)}")
    form_fields = {key: value for key, value in entry.items() if key != "reader"}
    return ReconstructedForm(**{**form_fields, "members": MappingProxyType(dict(entry["members"])),
                                "read": _reader(where, entry["reader"]), "lacks": tuple(entry["lacks"]),
                                "papers": tuple(entry["papers"])})


def _dataset_spec(where: str, entry: Mapping[str, Any], prefixes: Mapping[str, str]) -> DatasetSpec:
    """A :class:`DatasetSpec` from its catalogue entry; its parser reads ``members`` in the order given."""
    _check_entry(where, entry, _DATASET_KEYS)
    completed = _apply_source(where, entry)
    _check_required(where, completed, _DATASET_REQUIRED)
    spec_fields = {**_DATASET_OPTIONAL, **completed}
    name, members = spec_fields["name"], spec_fields["members"]
    read = _reader(where, spec_fields.pop("reader"))
    forms = tuple(_reconstructed_form(f"{where}, form {form.get('name', index + 1)!r}", form)
                  for index, form in enumerate(spec_fields.pop("forms", [])))
    form_names = [form.name for form in forms]
    if len(set(form_names)) != len(form_names):
        raise ValueError(f"{where}: forms: a name given twice in {form_names}")
    parser = parsers.RawParser(name, read, tuple(members), implicit=spec_fields["implicit"],
                               has_timestamps=spec_fields["has_timestamps"])
    return DatasetSpec(**{**spec_fields, "urls": _urls(where, spec_fields["urls"], prefixes),
                          "members": MappingProxyType(dict(members)),
                          "member_md5": MappingProxyType(dict(spec_fields.get("member_md5", {}))),
                          "parser": parser, "forms": forms})


def _load_catalogue() -> dict[str, DatasetSpec]:
    """The datasets of :data:`CATALOGUE` by name, in file order (ValueError naming a faulty entry)."""
    text = resources.files("recrepro.datasets").joinpath(CATALOGUE).read_text()
    catalogue = yaml.load(text, Loader=_CatalogueLoader)
    if not isinstance(catalogue, dict) or set(catalogue) != {"url_prefixes", "datasets"}:
        raise ValueError(f"{CATALOGUE}: needs the keys url_prefixes and datasets, and no other")
    prefixes, entries = catalogue["url_prefixes"], catalogue["datasets"]
    if not isinstance(prefixes, dict) or not isinstance(entries, list) or \
            not all(isinstance(entry, dict) for entry in entries):
        raise ValueError(f"{CATALOGUE}: url_prefixes must be a mapping and datasets a list of mappings")
    specs: dict[str, DatasetSpec] = {}
    for index, entry in enumerate(entries):
        where = f"{CATALOGUE}, dataset {entry.get('name', index + 1)!r}"
        spec = _dataset_spec(where, entry, prefixes)
        if spec.name in specs:
            raise ValueError(f"{where}: the name is given twice")
        specs[spec.name] = spec
    return specs


DATASETS: Mapping[str, DatasetSpec] = MappingProxyType(_load_catalogue())


def get_dataset(name: str) -> DatasetSpec:
    """The registry entry for ``name``.

    Raises
    ------
    ValueError
        For an unknown name; the message lists the known names.
    """
    try:
        return DATASETS[name]
    except KeyError:
        raise ValueError(f"unknown dataset {name!r}; known datasets: {', '.join(DATASETS)}") from None


def raw_form(raw_dir: str | Path) -> str | None:
    """The reconstructed form ``raw_dir/fetch.json`` names (None: the canonical files)."""
    import json

    try:
        form = json.loads((Path(raw_dir) / "fetch.json").read_text()).get("form")
    except (OSError, ValueError, AttributeError):
        return None
    return form.get("name") if isinstance(form, dict) else None


def raw_members(spec: DatasetSpec, raw_dir: str | Path) -> Mapping[str, str | None]:
    """The member files ``raw_dir`` holds for ``spec``: the canonical ones, or its form's."""
    form = raw_form(raw_dir)
    return spec.members if form is None else spec.form(form).members


def load_raw(name: str, raw_dir: str | Path) -> RawInteractions:
    """Parse the member files of dataset ``name`` found in ``raw_dir``.

    When ``raw_dir/fetch.json`` names a reconstructed form, that form's files are read and
    the result's ``extras`` carry the form's name and what it lacks.
    """
    spec = get_dataset(name)
    form = raw_form(raw_dir) if not spec.generated else None
    parser = spec.parser if form is None else spec.form(form).parser(spec.name)
    return parser(Path(raw_dir))
