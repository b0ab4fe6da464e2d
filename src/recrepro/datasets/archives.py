"""Safe extraction of zip and tar archives.

Every member to be extracted is checked *before* anything is written: a member whose
path is absolute, contains a ``..`` component, or is a link whose target lies outside
the destination raises :class:`UnsafeArchiveError`, so a hostile archive never writes
a single byte outside ``dest``.
"""

from __future__ import annotations

import os
import posixpath
import stat
import tarfile
import zipfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from recrepro.datasets.errors import ArchiveTooLargeError, UnsafeArchiveError

__all__ = ["archive_member_names", "find_member", "safe_extract"]


def archive_member_names(archive: str | Path) -> list[str]:
    """Names of the regular-file members of a zip or tar archive, in archive order."""
    archive = Path(archive)
    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as zf:
            return [info.filename for info in zf.infolist() if not info.is_dir()]
    if tarfile.is_tarfile(archive):
        with tarfile.open(archive) as tf:
            return [m.name for m in tf.getmembers() if m.isfile()]
    raise ValueError(f"{archive}: neither a zip nor a tar archive")


def find_member(names: Iterable[str], filename: str) -> str | None:
    """The archive member whose base name is ``filename`` (shortest path wins), or None.

    Release archives put their files under a top folder whose name varies
    (``ml-100k/u.data``, ``ml-10M100K/ratings.dat``), so members are matched by base name.
    macOS resource forks (``__MACOSX/``) are ignored.
    """
    candidates = [
        n for n in names if posixpath.basename(n.replace("\\", "/")) == filename and not n.startswith("__MACOSX/")
    ]
    return min(candidates, key=lambda n: (len(n), n)) if candidates else None


def safe_extract(archive: str | Path, dest: str | Path, members: Iterable[str] | None = None,
                 max_bytes: int | None = None) -> dict[str, Path]:
    """Extract ``members`` (all when None) of a zip or tar archive into ``dest``, safely.

    Parameters
    ----------
    archive:
        A zip file or a tar file (any compression ``tarfile`` reads).
    dest:
        Target folder (created if needed).
    members:
        Archive member names to extract; None extracts every member.
    max_bytes:
        Cap on the bytes written in all (None: no cap). A tar's declared sizes are checked
        before anything is written; a zip's bytes are counted as they are written (its
        declared sizes may lie). Past the cap: :class:`ArchiveTooLargeError`.

    Returns
    -------
    dict
        Archive member name -> extracted path (directories included).

    Raises
    ------
    UnsafeArchiveError
        A member has an absolute path or a ``..`` component, is a link whose target is
        absolute or escapes ``dest``, or is a device/FIFO; the message names the member.
        Raised before anything is written.
    KeyError
        A requested member is not in the archive.
    ValueError
        ``archive`` is neither a zip nor a tar archive.
    ArchiveTooLargeError
        More than ``max_bytes`` would be written (what was written of the member is removed).
    """
    archive, dest = Path(archive), Path(dest)
    wanted = None if members is None else list(members)
    if zipfile.is_zipfile(archive):
        return _extract_zip(archive, dest, wanted, max_bytes)
    if tarfile.is_tarfile(archive):
        return _extract_tar(archive, dest, wanted, max_bytes)
    raise ValueError(f"{archive}: neither a zip nor a tar archive")


def _check_member_path(archive: Path, name: str) -> str:
    """Return the member path normalised to ``/`` separators, refusing unsafe ones."""
    # Backslashes are path separators for archives written on Windows.
    normalised = name.replace("\\", "/")
    if normalised.startswith("/") or (len(normalised) > 1 and normalised[1] == ":"):
        raise UnsafeArchiveError(f"{archive}: member {name!r} has an absolute path")
    if ".." in normalised.split("/"):
        raise UnsafeArchiveError(f"{archive}: member {name!r} has a '..' path component")
    if not normalised.strip("/"):
        raise UnsafeArchiveError(f"{archive}: member {name!r} has an empty path")
    return normalised


def _check_link_target(archive: Path, name: str, link_path: str, target: str, *, relative_to_member: bool) -> None:
    """Refuse a link whose target is absolute or leaves the extraction root.

    Symlink targets are relative to the link's folder; tar hard-link targets are
    relative to the archive root (``relative_to_member=False``).
    """
    target_norm = target.replace("\\", "/")
    if target_norm.startswith("/") or (len(target_norm) > 1 and target_norm[1] == ":"):
        raise UnsafeArchiveError(f"{archive}: link member {name!r} points to absolute path {target!r}")
    base = posixpath.dirname(link_path) if relative_to_member else ""
    resolved = posixpath.normpath(posixpath.join(base, target_norm))
    if resolved == ".." or resolved.startswith("../"):
        raise UnsafeArchiveError(f"{archive}: link member {name!r} points outside the target folder ({target!r})")


def _check_inside(archive: Path, name: str, root: str, real_path: str) -> None:
    if real_path != root and not real_path.startswith(root + os.sep):
        raise UnsafeArchiveError(f"{archive}: member {name!r} would be written outside the target folder ({real_path})")


def _select_members(archive: Path, members: list[Any], wanted: list[str] | None,
                    name: Callable[[Any], str]) -> list[Any]:
    """The ``wanted`` members of ``archive`` in that order (all of ``members`` for ``None``).

    ``name(member)`` is a member's name in the archive.  Raises ``KeyError`` naming the
    wanted members the archive lacks.
    """
    if wanted is None:
        return members
    by_name = {name(member): member for member in members}
    missing = [n for n in wanted if n not in by_name]
    if missing:
        raise KeyError(f"{archive}: no member(s) {missing}")
    return [by_name[n] for n in wanted]


def _copy_capped(src, out, budget: list[int], archive: Path, name: str, max_bytes: int | None) -> None:
    """Copy ``src`` to ``out`` in 1 MiB blocks, stopping once ``budget[0]`` bytes are spent."""
    for block in iter(lambda: src.read(1 << 20), b""):
        budget[0] -= len(block)
        if max_bytes is not None and budget[0] < 0:
            raise ArchiveTooLargeError(f"{archive}: member {name!r} takes the extraction past {max_bytes:,} bytes")
        out.write(block)


def _extract_zip(archive: Path, dest: Path, wanted: list[str] | None, max_bytes: int | None = None) -> dict[str, Path]:
    with zipfile.ZipFile(archive) as zf:
        infos = _select_members(archive, zf.infolist(), wanted, lambda info: info.filename)
        plan: list[tuple[zipfile.ZipInfo, str, str | None]] = []
        for info in infos:
            rel = _check_member_path(archive, info.filename)
            link_target = None
            # Zip stores the Unix mode in the high 16 bits of external_attr; a symlink's
            # data is its target.
            if stat.S_ISLNK(info.external_attr >> 16):
                link_target = zf.read(info).decode("utf-8", "replace")
                _check_link_target(archive, info.filename, rel, link_target, relative_to_member=True)
            plan.append((info, rel, link_target))

        declared = sum(info.file_size for info, _, _ in plan)
        if max_bytes is not None and declared > max_bytes:
            raise ArchiveTooLargeError(f"{archive}: its members declare {declared:,} bytes, over {max_bytes:,}")
        budget = [max_bytes if max_bytes is not None else 0]
        dest.mkdir(parents=True, exist_ok=True)
        root = os.path.realpath(dest)
        extracted: dict[str, Path] = {}
        for info, rel, link_target in plan:
            target = dest.joinpath(*[p for p in rel.split("/") if p])
            # The textual checks above cannot see through links written by earlier
            # members (e.g. ``x -> .`` then ``y -> x/..``); resolve the real paths now.
            _check_inside(archive, info.filename, root, os.path.realpath(target.parent))
            if link_target is not None:
                _check_inside(archive, info.filename, root, os.path.realpath(os.path.join(target.parent, link_target)))
            if info.is_dir():
                target.mkdir(parents=True, exist_ok=True)
            elif link_target is not None:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.unlink(missing_ok=True)
                os.symlink(link_target, target)
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                try:
                    with zf.open(info) as src, open(target, "wb") as out:
                        _copy_capped(src, out, budget, archive, info.filename, max_bytes)
                except ArchiveTooLargeError:
                    target.unlink(missing_ok=True)
                    raise
            extracted[info.filename] = target
    return extracted


def _extract_tar(archive: Path, dest: Path, wanted: list[str] | None, max_bytes: int | None = None) -> dict[str, Path]:
    with tarfile.open(archive) as tf:
        tar_members = _select_members(archive, tf.getmembers(), wanted, lambda member: member.name)
        for member in tar_members:
            rel = _check_member_path(archive, member.name)
            if member.issym():
                _check_link_target(archive, member.name, rel, member.linkname, relative_to_member=True)
            elif member.islnk():
                _check_link_target(archive, member.name, rel, member.linkname, relative_to_member=False)
            elif not (member.isfile() or member.isdir()):
                raise UnsafeArchiveError(f"{archive}: member {member.name!r} is a device or FIFO")
        # a tar's sizes are those of the bytes it holds: checked before anything is written
        declared = sum(member.size for member in tar_members if member.isfile())
        if max_bytes is not None and declared > max_bytes:
            raise ArchiveTooLargeError(f"{archive}: its members hold {declared:,} bytes, over {max_bytes:,}")

        dest.mkdir(parents=True, exist_ok=True)
        extracted: dict[str, Path] = {}
        for member in tar_members:
            # The 'data' filter (Python >= 3.11.4) re-checks everything above and also
            # drops set-uid bits; older interpreters rely on our own checks alone.
            kwargs = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
            try:
                tf.extract(member, dest, **kwargs)
            except tarfile.FilterError as exc:  # pragma: no cover - our checks come first
                raise UnsafeArchiveError(f"{archive}: member {member.name!r}: {exc}") from exc
            extracted[member.name] = dest.joinpath(*[p for p in member.name.replace("\\", "/").split("/") if p])
    return extracted
