"""Verified fetching of a dataset's member files into ``data/raw/<name>/``.

Sources are tried in this order, per member file:

1. a copy already in ``raw_dir`` that matches a published digest (an interrupted run);
2. the mirror ``<mirror>/<name>/``: the member file itself, else the release archive;
3. the canonical URLs (when ``urls_allowed``): the archive, or the member itself;
4. a copy placed in ``raw_dir`` by hand, for members with no published digest.

Every file is written through :func:`recrepro.io.atomic_path` and verified *before* it
is renamed into place, so ``raw_dir`` never holds a partial or unverified member. A
digest mismatch stops the fetch at once with :class:`ChecksumError` (a corrupt mirror
or a changed upstream file must be looked at, not silently routed around).
``fetch.json`` is written last; its presence with matching sha256 makes the next call
a no-op.

A member with no published digest of its own is verified through the archive it is
extracted from when the archive has one (``"verified": "archive md5"``). Otherwise it is
*trusted on first use*: accepted with a WARNING naming the file, its sha256 recorded in
``fetch.json`` (``"verified": "none"``, listed under ``"unverified"``) and checked from
then on (a later fetch refuses a copy that differs, :func:`verify_raw_files` checks it
before every preprocessing). ``strict=True`` (``data.strict_checksums``) refuses such files.
The WARNING goes to stderr, which the workflow's fetch rule echoes to the console.

An archive nothing verifies (no published digest: the Million Song Dataset's) is extracted
under a cap: at most ``size_factor`` times the size the registry expects for the dataset
(:meth:`DatasetSpec.expected_bytes`) and at most ``max_ratio`` times the archive's own size
(text data compresses 5-20 fold; a decompression bomb thousands of times). Past either, the
extraction stops with :class:`ArchiveTooLargeError` naming the archive, the cap and the
setting that raises it (``data.unverified_archive`` in config.yaml), and nothing is kept.

When the canonical files cannot be had, a mirror's **reconstructed form** of the dataset
(:class:`recrepro.datasets.registry.ReconstructedForm`, pinned by its own sha256) is taken
instead, with a WARNING naming what it lacks; ``fetch.json`` names it (``"form"``).

Published digests and the checks of a file against them (:mod:`recrepro.datasets.digests`) and the
download of one URL (:mod:`recrepro.datasets.url_download`) are modules of their own; their public
names are importable from here too.
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path

from recrepro import __version__
from recrepro.datasets.archives import archive_member_names, find_member, safe_extract
# where a dataset's files are to be had (re-exported: the CLI and the scorecard summary use them)
from recrepro.datasets.availability import dataset_availability, mirror_form, mirror_holds, reachable
from recrepro.datasets.digests import Expected, copy_verified, verify_file
from recrepro.datasets.errors import ArchiveTooLargeError, ChecksumError, DatasetUnavailableError
from recrepro.datasets.registry import DatasetSpec, ReconstructedForm, get_dataset, raw_members
from recrepro.datasets.url_download import download_url
from recrepro.io import sha256_file, write_json

__all__ = ["FETCH_RECORD", "ExpansionCap", "dataset_availability", "download_url", "fetch_dataset", "mirror_form",
           "mirror_holds", "reachable", "verify_file", "verify_raw_files"]

log = logging.getLogger("recrepro.datasets")
# ``verified`` of a member nothing published vouches for: taken now, or checked against an earlier fetch
_NONE = "none"
_FIRST_USE = "sha256 recorded on first use"

FETCH_RECORD = "fetch.json"


# --------------------------------------------------------------------------- caps
@dataclass(frozen=True)
class ExpansionCap:
    """How far an archive nothing verifies may expand (config ``data.unverified_archive``).

    ``size_factor`` times the registry's expected size of the dataset's files, and
    ``max_ratio`` times the archive's own size; either None switches that bound off.
    """

    size_factor: float | None = 4.0
    max_ratio: float | None = 100.0

    def limit(self, spec: DatasetSpec, archive: Path) -> tuple[int | None, str]:
        """The byte cap for ``archive`` of ``spec`` and a phrase saying where it comes from."""
        bounds = []
        expected = spec.expected_bytes()
        if self.size_factor is not None and expected is not None:
            bounds.append((int(self.size_factor * expected),
                           f"{self.size_factor:g} x the {_size(expected)} the registry expects for {spec.name} "
                           "(data.unverified_archive.size_factor)"))
        if self.max_ratio is not None:
            size = archive.stat().st_size
            bounds.append((int(self.max_ratio * size),
                           f"{self.max_ratio:g} x the archive's {_size(size)} (data.unverified_archive.max_ratio)"))
        if not bounds:
            return None, "no cap"
        return min(bounds)


def _size(n: float) -> str:
    for unit in ("bytes", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:,.0f} {unit}" if unit == "bytes" else f"{n:,.1f} {unit}"
        n /= 1000
    return f"{n} GB"  # pragma: no cover


# --------------------------------------------------------------------------- fetch
@dataclass
class _Fetch:
    """State of one fetch: what was obtained and what was tried.

    ``first_use`` holds the sha256 an earlier ``fetch.json`` recorded for members with no
    published digest: a new copy of such a member must match it (trust on first use).
    ``refused`` lists the files left alone because nothing could verify them and
    ``strict`` is set.
    """

    spec: DatasetSpec
    raw_dir: Path
    strict: bool = False
    cap: ExpansionCap = field(default_factory=ExpansionCap)
    first_use: dict[str, str] = field(default_factory=dict)
    members: dict[str, dict] = field(default_factory=dict)
    archive: dict | None = None
    tried: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    network_error: BaseException | None = None

    def missing(self) -> list[str]:
        return [m for m in self.spec.members if m not in self.members]

    def expected(self, member: str) -> Expected:
        published = Expected(self.spec.members[member], self.spec.member_md5.get(member))
        if not published.known and member in self.first_use:
            return Expected(sha256=self.first_use[member])
        return published

    def label(self, member: str) -> str:
        """The ``verified`` field of a member's entry: what its digest check was."""
        published = Expected(self.spec.members[member], self.spec.member_md5.get(member))
        if published.known:
            return published.method
        return _FIRST_USE if member in self.first_use else _NONE

    def archive_expected(self) -> Expected:
        return Expected(self.spec.archive_sha256, self.spec.archive_md5)

    def may_take_unverified(self, what: str) -> bool:
        """Whether a file nothing can verify may be taken (noted as refused when not)."""
        if self.strict:
            self.refused.append(what)
            return False
        return True

    def trust_on_first_use(self, member: str, source: str) -> None:
        """Mark ``member`` (already in raw_dir) as accepted without verification and say so."""
        entry = self.members[member]
        log.warning(
            "%s/%s was NOT verified: no published digest (from %s); accepted on first use with "
            "sha256 %s, recorded in fetch.json and checked from now on. data.strict_checksums: true "
            "refuses such files.", self.spec.name, member, source, entry["sha256"])


def fetch_dataset(
    name: str | DatasetSpec,
    raw_dir: str | Path,
    mirror: str | Path | None = None,
    urls_allowed: bool = True,
    progress: bool | None = None,
    strict: bool = False,
    cap: ExpansionCap | None = None,
) -> Path:
    """Make ``raw_dir`` hold the verified member files of dataset ``name``.

    Parameters
    ----------
    name:
        Registry name, or a :class:`DatasetSpec` itself (tests use specs with local URLs).
    raw_dir:
        Target folder (``data/raw/<name>/``), created if needed.
    mirror:
        Folder whose ``<name>/`` subfolder may hold the release archive or the member
        files themselves.
    urls_allowed:
        Whether the canonical URLs may be downloaded.
    progress:
        Progress bars for downloads; None shows them when stderr is a terminal.
    strict:
        Refuse a file that nothing can verify (no published digest, no verified archive,
        no digest recorded on first use) instead of accepting it with a WARNING.
    cap:
        How far an archive nothing verifies may expand (default :class:`ExpansionCap`).

    Returns
    -------
    Path
        ``raw_dir / "fetch.json"``, written last, listing each member with its sha256,
        size, where it came from and how it was verified (``unverified`` lists the
        members trusted on first use). When it already exists and every member still
        matches its sha256, nothing is done.

    Raises
    ------
    ValueError
        For ``synthetic`` (generated by ``recrepro data synth``) or an unknown name.
    ChecksumError
        A file does not match its published digest (nothing unverified is left), or, with
        ``strict``, a file could not be verified at all.
    DatasetUnavailableError
        Some member could be obtained from no source; the message says which, what was
        tried, the URLs and any instructions for placing it by hand.
    UnsafeArchiveError
        The archive tries to write outside its folder; :class:`ArchiveTooLargeError` (a
        subclass) when an unverified archive expands past ``cap``.
    """
    spec = get_dataset(name) if isinstance(name, str) else name
    if spec.generated:
        raise ValueError(f"{spec.name}: synthetic data is generated by `recrepro data synth`, not fetched")
    raw_dir = Path(raw_dir)
    raw_dir.mkdir(parents=True, exist_ok=True)
    record_path = raw_dir / FETCH_RECORD
    if _record_is_current(spec, raw_dir, record_path) and not _canonical_now_in_mirror(spec, record_path, mirror):
        return record_path
    first_use = _first_use_digests(spec, record_path)
    # A stale record must never vouch for files again, even if this fetch fails.
    record_path.unlink(missing_ok=True)

    state = _Fetch(spec, raw_dir, strict=strict, first_use=first_use, cap=cap or ExpansionCap())
    _take_verified_existing(state)
    if mirror is not None and state.missing():
        _take_from_mirror(state, Path(mirror) / spec.name)
    if state.missing():
        if urls_allowed:
            _take_from_urls(state, progress)
        elif spec.urls:
            state.tried.append("canonical URLs not tried (downloads not allowed)")
    if state.missing():
        _take_hand_placed(state)
    if state.missing() and mirror is not None:
        form = _take_form(state, Path(mirror))
        if form is not None:
            return _write_form_record(state, form, record_path)
    if state.missing() and state.refused:
        raise _refused(state)
    if state.missing():
        raise _unavailable(state, mirror)

    record = {
        "dataset": spec.name,
        "recrepro_version": __version__,
        "archive": state.archive,
        "members": {m: state.members[m] for m in spec.members},
        # trusted on first use (now or by an earlier fetch): no publisher vouches for these
        "unverified": [m for m in spec.members if state.members[m]["verified"] in (_NONE, _FIRST_USE)],
    }
    write_json(record_path, record)
    return record_path


def _canonical_now_in_mirror(spec: DatasetSpec, record_path: Path, mirror: str | Path | None) -> bool:
    """A form was taken before, and the mirror now holds the canonical files: fetch again."""
    try:
        form = json.loads(record_path.read_text()).get("form")
    except (OSError, ValueError, AttributeError):
        return False
    return bool(form) and mirror_holds(spec, mirror)


def _take_form(state: _Fetch, mirror: Path) -> ReconstructedForm | None:
    """Copy the first reconstructed form the mirror holds in full into raw_dir, verified."""
    for form in state.spec.forms:
        folder = mirror / form.folder
        if not all((folder / member).is_file() for member in form.members):
            state.tried.append(f"mirror {folder}: no {state.spec.name} form {form.name!r} "
                               f"({', '.join(form.members)})")
            continue
        for member, sha256 in form.members.items():
            src = folder / member
            with open(src, "rb") as fh:
                sha = copy_verified(fh, state.raw_dir / member, Expected(sha256=sha256), str(src))
            state.members[member] = _member_entry(state.raw_dir / member, sha, str(src), "sha256 (form)")
        log.warning(
            "%s: the canonical %s could not be had (%s); took the mirror's reconstructed form %r from %s "
            "(%s; pinned by sha256). It lacks: %s. Protocols that need it refuse this form "
            "(docs/deviations.md#%s).", state.spec.name, ", ".join(state.missing()), "; ".join(state.tried)
            or "see fetch.json", form.name, folder, form.description, ", ".join(form.lacks), form.deviation)
        return form
    return None


def _write_form_record(state: _Fetch, form: ReconstructedForm, record_path: Path) -> Path:
    spec = state.spec
    record = {
        "dataset": spec.name,
        "recrepro_version": __version__,
        "form": {"name": form.name, "lacks": list(form.lacks), "deviation": form.deviation,
                 "description": form.description, "instead_of": [m for m in spec.members if m not in form.members]},
        "archive": None,
        "members": {m: state.members[m] for m in form.members},
        "unverified": [],
        "canonical_tried": list(state.tried),
    }
    write_json(record_path, record)
    return record_path


def _first_use_digests(spec: DatasetSpec, record_path: Path) -> dict[str, str]:
    """sha256 an earlier ``fetch.json`` recorded for members with no published digest."""
    try:
        listed = json.loads(record_path.read_text())["members"]
        return {m: str(listed[m]["sha256"]) for m in spec.members
                if m in listed and not (spec.members[m] or spec.member_md5.get(m))}
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def _refused(state: _Fetch) -> ChecksumError:
    spec = state.spec
    lines = [f"dataset {spec.name!r}: {', '.join(state.missing())} not taken: nothing can verify it "
             "and data.strict_checksums is true"]
    lines += [f"  refused: {r}" for r in state.refused]
    if spec.archive and state.archive_expected().known:
        lines.append(f"  the release archive {spec.archive} has a published digest: put it in the mirror "
                     "or allow the download")
    lines.append("  or set data.strict_checksums: false to accept it on first use (with a WARNING)")
    return ChecksumError("\n".join(lines))


def verify_raw_files(spec: DatasetSpec, raw_dir: str | Path) -> dict[str, dict]:
    """Check the member files in ``raw_dir`` against ``fetch.json`` before they are used.

    Each member's size is compared first (cheap: a truncated or appended file is caught
    without reading it), then its sha256. A file changed after the fetch (a flipped byte,
    an edit, a copy from elsewhere) stops here instead of flowing into the processed data.

    Returns
    -------
    dict
        The ``members`` section of ``fetch.json``.

    Raises
    ------
    ChecksumError
        ``fetch.json`` is missing or unreadable, lacks a member, or a member's size or
        sha256 differs from it; the message names the file and both values.
    """
    raw_dir = Path(raw_dir)
    record_path = raw_dir / FETCH_RECORD
    fix = f"remove {raw_dir} and run the fetch again (`recrepro data fetch {spec.name}`)"
    try:
        members = raw_members(spec, raw_dir)
    except ValueError as exc:  # fetch.json names a form the registry no longer has
        raise ChecksumError(f"{record_path}: {exc}: {fix}") from None
    try:
        listed = json.loads(record_path.read_text())["members"]
    except FileNotFoundError:
        raise ChecksumError(f"{record_path}: not found; raw files are checked against it: {fix}") from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ChecksumError(f"{record_path}: unreadable ({exc}): {fix}") from None
    for member in members:
        path = raw_dir / member
        entry = listed.get(member) if isinstance(listed, dict) else None
        if not isinstance(entry, dict) or "sha256" not in entry or "bytes" not in entry:
            raise ChecksumError(f"{record_path}: no sha256 and size for {member}: {fix}")
        if not path.is_file():
            raise ChecksumError(f"{path}: missing (fetch.json lists it): {fix}")
        size = path.stat().st_size
        if size != entry["bytes"]:
            raise ChecksumError(f"{path}: changed since it was fetched: {size} bytes, fetch.json says "
                                f"{entry['bytes']}: {fix}")
        sha = sha256_file(path)
        if sha != entry["sha256"]:
            raise ChecksumError(f"{path}: changed since it was fetched: sha256 {sha}, fetch.json says "
                                f"{entry['sha256']}: {fix}")
    return listed


def _record_is_current(spec: DatasetSpec, raw_dir: Path, record_path: Path) -> bool:
    """True when ``fetch.json`` lists every member and each file still has its sha256."""
    if not record_path.is_file():
        return False
    try:
        record = json.loads(record_path.read_text())
        listed = record["members"]
        if record.get("dataset") != spec.name:
            return False
        form = record.get("form")
        members = spec.form(form["name"]).members if form else spec.members
        for member, published in members.items():
            sha = listed[member]["sha256"]
            if published and sha != published:
                return False
            path = raw_dir / member
            if not path.is_file() or sha256_file(path) != sha:
                return False
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return True


def _take_verified_existing(state: _Fetch) -> None:
    """Reuse members already in raw_dir that match a published digest."""
    for member in state.missing():
        path = state.raw_dir / member
        expected = state.expected(member)
        if not (expected.known and path.is_file()):
            continue
        try:
            sha = verify_file(path, expected)
        except ChecksumError:
            continue  # replaced by a verified copy below, or reported at the end
        state.members[member] = _member_entry(path, sha, f"{path} (already present)", state.label(member))


def _member_entry(path: Path, sha: str, source: str, verified: str, archive_member: str | None = None) -> dict:
    entry = {"sha256": sha, "bytes": path.stat().st_size, "source": source, "verified": verified}
    if archive_member is not None:
        entry["archive_member"] = archive_member
    return entry


def _take_from_mirror(state: _Fetch, folder: Path) -> None:
    if not folder.is_dir():
        state.tried.append(f"mirror {folder}: no such folder")
        return
    for member in state.missing():
        src = folder / member
        if src.is_file():
            expected = state.expected(member)
            if not expected.known and not state.may_take_unverified(f"{src} (no published digest)"):
                continue  # strict: the release archive (verified) may still be in the mirror
            with open(src, "rb") as fh:
                sha = copy_verified(fh, state.raw_dir / member, expected, str(src))
            state.members[member] = _member_entry(state.raw_dir / member, sha, str(src), state.label(member))
            if not expected.known:
                state.trust_on_first_use(member, str(src))
    spec = state.spec
    if state.missing() and spec.archive:
        archive = folder / spec.archive
        if archive.is_file():
            if not state.archive_expected().known and not state.may_take_unverified(
                    f"{archive} (no published digest)"):
                return
            digests = _verify_archive(state, archive, str(archive))
            _extract_members(state, archive, str(archive), digests)
            return
    if state.missing():
        wanted = ", ".join(state.missing()) + (f" or {spec.archive}" if spec.archive else "")
        state.tried.append(f"mirror {folder}: no {wanted}")


def _verify_archive(state: _Fetch, archive: Path, source: str) -> dict:
    expected = state.archive_expected()
    sha = verify_file(archive, expected, source)
    return {"name": archive.name, "source": source, "sha256": sha, "verified": expected.method}


def _extract_members(state: _Fetch, archive: Path, source: str, archive_record: dict) -> None:
    """Extract the still-missing members from a verified archive into raw_dir, verified."""
    names = archive_member_names(archive)
    located = {m: find_member(names, m) for m in state.missing()}
    absent = [m for m, inner in located.items() if inner is None]
    if absent:
        state.tried.append(f"{source}: archive has no {', '.join(absent)}")
    wanted = {m: inner for m, inner in located.items() if inner is not None}
    if not wanted:
        return
    max_bytes, why = (None, "") if archive_record["verified"] != _NONE else state.cap.limit(state.spec, archive)
    work = Path(tempfile.mkdtemp(prefix=".extract-", dir=state.raw_dir))
    try:
        try:
            extracted = safe_extract(archive, work, wanted.values(), max_bytes=max_bytes)
        except ArchiveTooLargeError as exc:
            raise ArchiveTooLargeError(
                f"{state.spec.name}: {source} (no published digest) expands past {_size(max_bytes or 0)} "
                f"({why}): stopped, nothing kept ({exc}). If the archive is genuine, raise that setting in "
                "config.yaml (null switches the bound off)") from None
        for member, inner in wanted.items():
            expected = state.expected(member)
            with open(extracted[inner], "rb") as fh:
                sha = copy_verified(fh, state.raw_dir / member, expected, f"{member} (in {source})")
            # A member without a digest of its own is as verified as the archive it came from.
            label = state.label(member)
            if label in (_NONE, _FIRST_USE) and archive_record["verified"] != _NONE:
                label = f"archive {archive_record['verified']}"
            state.members[member] = _member_entry(state.raw_dir / member, sha, source, label, archive_member=inner)
            if label == _NONE:
                state.trust_on_first_use(member, f"{inner} in {source}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    state.archive = archive_record


def _url_filename(url: str) -> str:
    return urllib.parse.unquote(urllib.parse.urlsplit(url).path.rsplit("/", 1)[-1])


def _take_from_urls(state: _Fetch, progress: bool | None) -> None:
    spec = state.spec
    if not spec.urls:
        state.tried.append("no public URL")
        return
    if spec.archive:
        if not state.archive_expected().known and not state.may_take_unverified(
                f"{spec.archive} from {', '.join(spec.urls)} (no published digest; not downloaded)"):
            return
        work = Path(tempfile.mkdtemp(prefix=".download-", dir=state.raw_dir))
        try:
            for url in spec.urls:
                archive = work / spec.archive
                if not _try_download(state, url, archive, state.archive_expected(), progress):
                    continue
                record = {
                    "name": spec.archive,
                    "source": url,
                    "sha256": sha256_file(archive),
                    "verified": state.archive_expected().method,
                }
                _extract_members(state, archive, url, record)
                if not state.missing():
                    break
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return
    for member in state.missing():
        urls = [u for u in spec.urls if _url_filename(u) == member]
        if not urls:
            state.tried.append(f"no URL for {member}")
        if urls and not state.expected(member).known and not state.may_take_unverified(
                f"{member} from {', '.join(urls)} (no published digest; not downloaded)"):
            continue
        for url in urls:
            dest = state.raw_dir / member
            if _try_download(state, url, dest, state.expected(member), progress):
                state.members[member] = _member_entry(dest, sha256_file(dest), url, state.label(member))
                if not state.expected(member).known:
                    state.trust_on_first_use(member, url)
                break


def _try_download(state: _Fetch, url: str, dest: Path, expected: Expected, progress: bool | None) -> bool:
    """Download one URL; network failures are noted (and reported later), not raised."""
    try:
        download_url(url, dest, expected, progress=progress)
        return True
    except ChecksumError:
        raise
    except (OSError, ValueError) as exc:  # URLError/HTTPError are OSErrors; ValueError: bad URL
        state.tried.append(f"{url}: {exc}")
        state.network_error = exc
        return False


def _take_hand_placed(state: _Fetch) -> None:
    """Accept members put into raw_dir by hand; those with a published digest must match it."""
    for member in state.missing():
        path = state.raw_dir / member
        if not path.is_file():
            continue
        expected = state.expected(member)
        if not expected.known and not state.may_take_unverified(f"{path} (placed by hand, no published digest)"):
            continue
        # Raises ChecksumError for a copy that does not match its published digest.
        sha = verify_file(path, expected)
        state.members[member] = _member_entry(path, sha, f"{path} (placed by hand)", state.label(member))
        if not expected.known:
            state.trust_on_first_use(member, f"{path} (placed by hand)")


def _unavailable(state: _Fetch, mirror: str | Path | None) -> DatasetUnavailableError:
    spec = state.spec
    lines = [f"dataset {spec.name!r}: cannot obtain {', '.join(state.missing())}"]
    if mirror is None:
        lines.append("  tried: no mirror given")
    lines += [f"  tried: {t}" for t in state.tried]
    lines.append(f"  canonical URLs: {', '.join(spec.urls) if spec.urls else '(none)'}")
    if spec.archive:
        lines.append(f"  (the URL serves the archive {spec.archive}; the files are extracted from it)")
    if spec.manual_instructions:
        lines.append(f"  by hand: {spec.manual_instructions}")
    error = DatasetUnavailableError("\n".join(lines))
    if state.network_error is not None:
        error.__cause__ = state.network_error
    return error
