"""Reliability II (issue 22): bad inputs and faults, each with the behaviour it must show.

``docs/reliability.md`` lists every case, the expected behaviour and the test here (or
elsewhere) that checks it. The tests that run Snakemake are marked ``workflow``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import logging
import os
import re
import signal
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path
from types import MappingProxyType

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from test_workflow import REPO, snakemake

from recrepro.cli.main import main as cli_main
from recrepro.config import ConfigError, coerce_config_strings, load_config, load_schema
from recrepro.datasets import DATASETS, ChecksumError, DataFormatError, fetch_dataset, get_dataset, load_raw
from recrepro.datasets.download import verify_raw_files

# A small Tenrec-like QB-article.csv: the registry has no digest for it (trust on first use).
QB_HEADER = "user_id,item_id,click,gender,age\n"


def qb_article_csv(users: int = 40, per_user: int = 12, items: int = 60) -> bytes:
    rng = np.random.default_rng(0)
    rows = [f"{u},{i},1,1,3" for u in range(users) for i in sorted(rng.choice(items, per_user, replace=False))]
    return (QB_HEADER + "\n".join(rows) + "\n").encode()


def make_mirror(root: Path, name: str = "qb-article", member: str = "QB-article.csv",
                data: bytes | None = None) -> Path:
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / member).write_bytes(qb_article_csv() if data is None else data)
    return root


def flip_byte(path: Path, offset: int = -5) -> tuple[str, str]:
    """Flip one bit of ``path`` in place; return its sha256 before and after."""
    blob = bytearray(path.read_bytes())
    before = hashlib.sha256(blob).hexdigest()
    blob[offset] ^= 0x01
    path.chmod(0o644)
    path.write_bytes(bytes(blob))
    return before, hashlib.sha256(blob).hexdigest()


def _zip_bytes(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buffer.getvalue()


# ==================================================================== 1. files without a digest
def test_unpinned_mirror_file_is_trusted_on_first_use_with_a_warning(tmp_path, caplog):
    mirror = make_mirror(tmp_path / "mirror")
    raw = tmp_path / "raw"
    with caplog.at_level(logging.WARNING, logger="recrepro.datasets"):
        record = json.loads(fetch_dataset("qb-article", raw, mirror=mirror, urls_allowed=False).read_text())
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "qb-article/QB-article.csv" in warnings[0] and "NOT verified" in warnings[0]
    entry = record["members"]["QB-article.csv"]
    assert entry["verified"] == "none"
    assert entry["sha256"] == hashlib.sha256((raw / "QB-article.csv").read_bytes()).hexdigest()
    assert entry["sha256"] in warnings[0]
    assert record["unverified"] == ["QB-article.csv"]


def test_pinned_file_gives_no_warning(tmp_path, caplog):
    data = b"A1,B1,5.0,1000\r\nA2,B1,4.0,1001\r\n"
    spec = dataclasses.replace(get_dataset("amazon-video"),
                               members=MappingProxyType({"ratings.dat": hashlib.sha256(data).hexdigest()}),
                               member_md5=MappingProxyType({}))
    make_mirror(tmp_path / "mirror", "amazon-video", "ratings.dat", data)
    with caplog.at_level(logging.WARNING, logger="recrepro.datasets"):
        record = json.loads(fetch_dataset(spec, tmp_path / "raw", mirror=tmp_path / "mirror",
                                       urls_allowed=False).read_text())
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert record["members"]["ratings.dat"]["verified"] == "sha256" and record["unverified"] == []


@pytest.mark.parametrize("placed", ["mirror", "by hand"])
def test_strict_checksums_refuses_what_nothing_can_verify(tmp_path, placed):
    raw = tmp_path / "raw"
    mirror = None
    if placed == "mirror":
        mirror = make_mirror(tmp_path / "mirror")
    else:
        raw.mkdir()
        (raw / "QB-article.csv").write_bytes(qb_article_csv())
    with pytest.raises(ChecksumError) as info:
        fetch_dataset("qb-article", raw, mirror=mirror, urls_allowed=False, strict=True)
    message = str(info.value)
    assert "QB-article.csv" in message and "strict_checksums" in message
    assert not (raw / "fetch.json").exists()
    if placed == "mirror":
        assert list(raw.iterdir()) == []  # nothing unverified was copied


def test_strict_checksums_takes_the_verified_archive_instead_of_the_bare_member(tmp_path):
    # ml-20m: the bare ratings.csv has no digest, the release archive has one (md5)
    ratings = b"userId,movieId,rating,timestamp\n1,2,3.5,1112486027\n1,29,0.5,1112484676\n"
    archive = _zip_bytes({"ml-20m/ratings.csv": ratings})
    spec = dataclasses.replace(get_dataset("ml-20m"), archive_md5=hashlib.md5(archive).hexdigest())
    folder = tmp_path / "mirror" / "ml-20m"
    folder.mkdir(parents=True)
    (folder / "ratings.csv").write_bytes(ratings)
    (folder / "ml-20m.zip").write_bytes(archive)
    record = json.loads(fetch_dataset(spec, tmp_path / "raw", mirror=tmp_path / "mirror", urls_allowed=False,
                                   strict=True).read_text())
    entry = record["members"]["ratings.csv"]
    assert entry["verified"] == "archive md5" and entry["archive_member"] == "ml-20m/ratings.csv"
    assert record["unverified"] == []


def test_archive_member_without_digest_is_verified_through_the_archive(tmp_path, caplog):
    ratings = b"1::1::4.5::978300760\n2::1::0.5::978300761\n"
    archive = _zip_bytes({"ml-10M100K/ratings.dat": ratings})
    spec = dataclasses.replace(get_dataset("ml-10m"), archive_md5=hashlib.md5(archive).hexdigest())
    make_mirror(tmp_path / "mirror", "ml-10m", "ml-10m.zip", archive)
    with caplog.at_level(logging.WARNING, logger="recrepro.datasets"):
        record = json.loads(fetch_dataset(spec, tmp_path / "raw", mirror=tmp_path / "mirror",
                                       urls_allowed=False).read_text())
    assert record["members"]["ratings.dat"]["verified"] == "archive md5"
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_a_refetch_checks_the_first_use_digest_and_still_lists_the_file_unverified(tmp_path, caplog):
    mirror = make_mirror(tmp_path / "mirror")
    raw = tmp_path / "raw"
    first = json.loads(fetch_dataset("qb-article", raw, mirror=mirror, urls_allowed=False).read_text())
    (raw / "QB-article.csv").unlink()
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="recrepro.datasets"):
        again = json.loads(fetch_dataset("qb-article", raw, mirror=mirror, urls_allowed=False).read_text())
    entry = again["members"]["QB-article.csv"]
    assert entry["verified"] == "sha256 recorded on first use"
    assert entry["sha256"] == first["members"]["QB-article.csv"]["sha256"]
    assert again["unverified"] == ["QB-article.csv"] and not caplog.records


def test_copy_differing_from_the_first_use_is_refused(tmp_path):
    mirror = make_mirror(tmp_path / "mirror")
    raw = tmp_path / "raw"
    first = json.loads(fetch_dataset("qb-article", raw, mirror=mirror, urls_allowed=False).read_text())
    (raw / "QB-article.csv").unlink()  # the next fetch copies it again ...
    _, changed = flip_byte(mirror / "qb-article" / "QB-article.csv")  # ... from a mirror that changed
    with pytest.raises(ChecksumError) as info:
        fetch_dataset("qb-article", raw, mirror=mirror, urls_allowed=False)
    message = str(info.value)
    assert first["members"]["QB-article.csv"]["sha256"] in message and changed in message
    assert not (raw / "QB-article.csv").exists()


def test_every_unpinned_registry_file_is_named_in_the_readme():
    # Files with neither a sha256 nor an md5 of their own; README "Data" says what happens to each.
    unpinned = {(name, member) for name, spec in DATASETS.items() if not spec.generated
                for member, sha in spec.members.items() if not (sha or spec.member_md5.get(member))}
    assert unpinned == {("ml-10m", "ratings.dat"), ("ml-20m", "ratings.csv"), ("msd", "train_triplets.txt"),
                        ("amazon-fine-food", "finefoods.txt.gz"), ("qb-article", "QB-article.csv")}
    readme = (REPO / "README.md").read_text()
    data = readme[readme.index("## Data"):readme.index("## When a run fails")]
    for name, member in unpinned:
        assert f"`{name}`" in data and member in data, (name, member)


# ==================================================================== 2. raw files re-checked
def _fetched_qb(tmp_path: Path) -> Path:
    raw = tmp_path / "data" / "raw" / "qb-article"
    fetch_dataset("qb-article", raw, mirror=make_mirror(tmp_path / "mirror"), urls_allowed=False)
    return raw


def _preprocess(tmp_path: Path, raw: Path) -> int:
    return cli_main(["data", "preprocess", "qb-article", "--protocol", "fedrap", "--config",
                     str(REPO / "config.yaml"), "--raw-dir", str(raw), "--out-dir", str(tmp_path / "out")])


def test_preprocess_refuses_a_raw_file_changed_after_the_fetch(tmp_path, capsys):
    raw = _fetched_qb(tmp_path)
    assert _preprocess(tmp_path, raw) == 0
    before, after = flip_byte(raw / "QB-article.csv")  # same size: only the sha256 can tell
    assert _preprocess(tmp_path / "again", raw) == 1
    err = capsys.readouterr().err
    assert "QB-article.csv" in err and "changed since it was fetched" in err
    assert before in err and after in err
    assert not (tmp_path / "again" / "out").exists()


def test_preprocess_refuses_a_truncated_raw_file_by_its_size(tmp_path, capsys):
    raw = _fetched_qb(tmp_path)
    size = (raw / "QB-article.csv").stat().st_size
    with open(raw / "QB-article.csv", "r+b") as fh:
        fh.truncate(size - 10)
    assert _preprocess(tmp_path, raw) == 1
    err = capsys.readouterr().err
    assert f"{size - 10} bytes, fetch.json says {size}" in err


def test_the_lrs_ml100k_figure_checks_u_data_before_reading_it(tmp_path, capsys):
    (tmp_path / "u.data").write_text("1\t2\t3\t881250949\n")  # no fetch.json vouches for it
    assert cli_main(["lrs", "train", "--mode", "ml100k", "--raw-dir", str(tmp_path), "--seeds", "0", "--settings", "{}",
                     "--tier", "paper", "--out", str(tmp_path / "o.parquet"), "--out-pdf", str(tmp_path / "o.pdf"),
                     "--out-png", str(tmp_path / "o.png")]) == 1
    err = capsys.readouterr().err
    assert "ChecksumError" in err and "fetch.json: not found" in err
    assert not (tmp_path / "o.parquet").exists()


def test_raw_files_without_fetch_record_are_refused(tmp_path):
    (tmp_path / "QB-article.csv").write_bytes(qb_article_csv())
    with pytest.raises(ChecksumError, match="fetch.json: not found"):
        verify_raw_files(get_dataset("qb-article"), tmp_path)


# ==================================================================== 4. config errors
def test_config_error_names_key_allowed_values_and_close_name():
    with pytest.raises(ConfigError) as info:
        load_config(REPO / "config.yaml", {"data": {"mirorr": "x"}})
    message = str(info.value)
    assert "'data/mirorr'" in message and "allowed keys: root, mirror" in message
    assert "did you mean 'mirror'?" in message
    assert len(message.splitlines()) <= 6


@pytest.mark.parametrize(("override", "needle"), [
    ({"fedrap": {"tiers": {"smoke": {"settings": {"lr_network": 0}}}}}, "fedrap/tiers/smoke/settings/lr_network"),
    ({"prism": {"tiers": {"smoke": {"lr": 0.0}}}}, "prism/tiers/smoke/lr"),
    ({"lambdaopt": {"tiers": {"smoke": {"settings": {"dim": 0}}}}}, "lambdaopt/tiers/smoke/settings/dim"),
    ({"fedrap": {"memory_budget_mb": -1}}, "fedrap/memory_budget_mb"),
    ({"fedrap": {"memory_budget_mb_by_dataset": {"ml-100k": 0}}}, "fedrap/memory_budget_mb_by_dataset/ml-100k"),
])
def test_learning_rates_dimensions_and_budgets_are_bounded(override, needle):
    with pytest.raises(ConfigError, match=re.escape(needle)):
        load_config(REPO / "config.yaml", override)


def test_command_line_strings_are_typed_by_the_schema():
    schema = load_schema()
    given = {"from_records": "true", "threads": "3",
             "data": {"allow_download": "false", "mirror": "null", "root": "123"},
             "fedrap": {"tiers": {"smoke": {"settings": {"lr_network": "1e-3", "dim": "8"}}}},
             "prism": {"tiers": {"smoke": {"record_cosine": "true"}}}}
    typed = coerce_config_strings(given, schema)
    assert typed["from_records"] is True and typed["threads"] == 3
    assert typed["data"] == {"allow_download": False, "mirror": None, "root": "123"}  # root stays a string
    assert typed["fedrap"]["tiers"]["smoke"]["settings"] == {"lr_network": 0.001, "dim": 8}
    assert typed["prism"]["tiers"]["smoke"]["record_cosine"] is True
    assert coerce_config_strings({"threads": "many"}, schema) == {"threads": "many"}  # left for the schema


@pytest.mark.parametrize(("override", "bad", "close"), [
    ({"tiers": {"smoke": {"data": [{"dataset": "ml-100", "protocol": "fedrap", "split": "leave_one_out"}]}}},
     "'ml-100'", "did you mean 'ml-100k'?"),
    ({"tiers": {"smoke": {"data": [{"dataset": "synthetic", "protocol": "fedrap", "split": "leave_one_out"}],
                          "baselines": ["mostpopular"]}}}, "'mostpopular'", "did you mean 'mostpop'?"),
])
def test_unknown_dataset_and_method_are_named_with_what_is_allowed(override, bad, close):
    with pytest.raises(ConfigError) as info:
        load_config(REPO / "config.yaml", override)
    message = str(info.value)
    assert bad in message and "allowed values:" in message and close in message


@pytest.mark.workflow
def test_unknown_key_on_the_command_line_prints_a_short_error(tmp_path):
    proc = snakemake("-n", "--directory", str(tmp_path), "--configfile", str(REPO / "config.yaml"),
                     "--config", "datta=1", check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert len(out.splitlines()) <= 20, out
    assert "'datta'" in out and "allowed keys:" in out and "did you mean 'data'?" in out


@pytest.mark.workflow
def test_nested_config_on_the_command_line_works(tmp_path):
    proc = snakemake("-n", "-p", "data/raw/ml-100k/fetch.json", "--directory", str(tmp_path),
                     "--configfile", str(REPO / "config.yaml"), "--config", "tier=paper",
                     "data={allow_download: false, strict_checksums: true, mirror: /srv/my mirror}")
    fetch = next(line for line in proc.stdout.splitlines() if "recrepro data fetch" in line)
    assert "--no-download" in fetch and "--strict-checksums" in fetch
    assert "--mirror '/srv/my mirror'" in fetch


# ==================================================================== 5. README: when a run fails
def test_readme_says_what_to_do_when_a_run_fails():
    readme = (REPO / "README.md").read_text()
    section = readme[readme.index("## When a run fails"):]
    section = section[:section.index("\n## ", 1)]
    for needle in ("logs/", "--unlock", "--rerun-incomplete", "--forcerun", "checkpoint", "RECREPRO_TRACEBACK"):
        assert needle in section, needle
    assert readme.index("## Data") < readme.index("## When a run fails")
    assert (REPO / "profiles" / "default" / "config.yaml").read_text().count("show-failed-logs: true") == 1


def test_entry_points_end_a_known_failure_with_one_error_line(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    env.pop("RECREPRO_TRACEBACK", None)
    proc = subprocess.run([sys.executable, "-m", "recrepro", "fedrap", "stats", "--out-csv",
                           str(tmp_path / "s.csv"), str(tmp_path / "no-such-split")],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert "Traceback" not in proc.stderr
    assert lines[-2].startswith("recrepro: error: ")
    assert "no-such-split" in lines[-2]


# ==================================================================== held before: no unsafe loaders
UNSAFE = [
    (r"\bpickle\b", "pickle"),
    (r"yaml\.load\((?!.*Loader=\w)", "yaml.load without a Loader"),
    (r"torch\.load\((?!.*weights_only=True)", "torch.load without weights_only=True"),
    (r"allow_pickle\s*=\s*True", "np.load(allow_pickle=True)"),
    (r"(?<![.\w])(eval|exec)\(", "eval/exec"),
    (r"shell\s*=\s*True|os\.system\(", "a shell from Python"),
]


def test_no_unsafe_loader_in_the_package():
    found = [f"{path.relative_to(REPO)}:{n}: {what}"
             for path in sorted((REPO / "src" / "recrepro").rglob("*.py"))
             for n, line in enumerate(path.read_text().splitlines(), start=1)
             for pattern, what in UNSAFE if re.search(pattern, line.split("#")[0])]
    assert found == []


def test_every_yaml_loader_is_a_safe_loader():
    import importlib

    import yaml

    for path in sorted((REPO / "src" / "recrepro").rglob("*.py")):
        for loader in re.findall(r"yaml\.load\(.*Loader=(\w+)", path.read_text()):
            module = importlib.import_module(".".join(path.relative_to(REPO / "src").with_suffix("").parts))
            assert issubclass(getattr(module, loader), yaml.SafeLoader), (path, loader)


def test_a_pickled_object_as_checkpoint_runs_no_code(tmp_path, caplog):
    import pickle

    from recrepro.runtime.checkpoints import load_checkpoint

    marker = tmp_path / "executed"

    class Payload:
        def __reduce__(self):
            return (Path.touch, (marker,))

    (tmp_path / "run.ckpt").write_bytes(pickle.dumps(Payload()))
    with caplog.at_level(logging.WARNING):
        assert load_checkpoint(tmp_path / "run.ckpt", key="k") is None
    assert not marker.exists()
    assert "unreadable" in caplog.text


# ==================================================================== 7. exADMM: NaN before the solve
def _exadmm_matrix() -> sp.csr_matrix:
    rng = np.random.default_rng(0)
    return sp.csr_matrix((rng.random((30, 20)) < 0.3).astype(np.float32))


@pytest.mark.parametrize("name", ["alpha0", "l2", "exposure_reg", "admm_penalty", "learning_rate", "stdev"])
def test_exadmm_refuses_a_non_finite_hyperparameter_before_any_solve(name):
    from recrepro.papers.exadmm.exadmm import ExADMM
    from recrepro.records import NonFiniteError

    with pytest.raises(NonFiniteError, match=rf"exADMM hyperparameter {name} at fit \(before epoch 1\)"):
        ExADMM(dim=4, epochs=2, **{name: float("nan")}).fit(_exadmm_matrix())


def test_exadmm_refuses_a_nan_in_the_input_matrix():
    from recrepro.papers.exadmm.exadmm import ExADMM
    from recrepro.records import NonFiniteError

    matrix = _exadmm_matrix()
    matrix.data[3] = np.nan
    with pytest.raises(NonFiniteError, match="input matrix values at fit"):
        ExADMM(dim=4, epochs=2).fit(matrix)


def _poison(real, when=lambda n: True):
    """``real`` with a NaN written into its result (on the calls for which ``when(call number)``)."""
    calls = {"n": 0}

    def poisoned(*args, **kwargs):
        calls["n"] += 1
        result = real(*args, **kwargs)
        if when(calls["n"]):
            result.view(-1)[0] = float("nan")
        return result

    return poisoned


@pytest.mark.parametrize(("step", "quantity", "where"), [
    ("U", "item factors V", "epoch 1"),  # the V-step's solve wrote a NaN
    ("s", "user factors U", "epoch 1"),  # the U-step made one
    ("w", "s", "epoch 1"),  # the s-step made one
    ("V", "α0·UᵀU + Λ·ssᵀ", "epoch 2"),  # a step size that overflows UᵀU in the next epoch
])
def test_exadmm_names_epoch_step_and_quantity_of_a_bad_operand(monkeypatch, step, quantity, where):
    import recrepro.papers.exadmm.exadmm as E
    from recrepro.records import NonFiniteError

    settings = {"dim": 4, "epochs": 3}
    if step == "U":
        monkeypatch.setattr(E, "solve_rows", _poison(E.solve_rows))
    elif step == "s":
        monkeypatch.setattr(E, "u_step", _poison(E.u_step))
    elif step == "w":
        monkeypatch.setattr(E, "s_step", _poison(E.s_step))
    else:  # the official fixed step (the default caps η at 1/L̂_u, so it cannot overflow)
        settings.update(learning_rate=1e30, u_step_size="fixed")
    with pytest.raises(NonFiniteError) as info:
        E.ExADMM(**settings).fit(_exadmm_matrix())
    message = str(info.value)
    assert f"exADMM {step}-step operand {quantity} at {where}" in message, message


def test_exadmm_fold_in_refuses_non_finite_item_factors():
    from recrepro.papers.exadmm.exadmm import ExADMM
    from recrepro.records import NonFiniteError

    model = ExADMM(dim=4, epochs=1, pred_iterations=2).fit(_exadmm_matrix())
    model.V[0, 0] = float("inf")
    with pytest.raises(NonFiniteError, match="item factors V at fold-in"):
        model.fold_in(_exadmm_matrix())


# ==================================================================== 8. value ranges
@pytest.mark.parametrize(("dataset", "member", "text", "line"), [
    ("ml-100k", "u.data", "1\t2\t3\t881250949\n1\t3\t-1e30\t881250949\n", 2),
    ("ml-100k", "u.data", "1\t2\t6\t881250949\n", 1),
    ("ml-1m", "ratings.dat", "1::2::4::978300760\n1::3::0.5::978300761\n", 2),
    ("ml-10m", "ratings.dat", "1::2::4.5::978300760\n1::3::0.25::978300761\n", 2),
    ("ml-20m", "ratings.csv", "userId,movieId,rating,timestamp\n1,2,3.5,1\n1,3,5.5,2\n", 3),
    ("hetrec2011-lastfm-2k", "user_artists.dat", "userID\tartistID\tweight\r\n2\t51\t13883\r\n2\t52\t0\r\n", 3),
    ("amazon-video", "ratings.dat", "A1,B1,5.0,1000\r\nA2,B1,6.0,1001\r\n", 2),
    ("msd", "train_triplets.txt", "u1\ts1\t3\nu1\ts2\t0\n", 2),
    ("qb-article", "QB-article.csv", "user_id,item_id,click\n1,10,1\n1,11,2\n", 3),
])
def test_values_outside_the_dataset_range_name_file_and_line(tmp_path, dataset, member, text, line):
    (tmp_path / member).write_text(text)
    with pytest.raises(DataFormatError) as info:
        load_raw(dataset, tmp_path)
    message = str(info.value)
    assert member in message and f"line {line}:" in message and "outside the range" in message


def test_half_stars_are_valid_for_ml10m_only(tmp_path):
    (tmp_path / "ratings.dat").write_text("1::2::0.5::978300760\n1::3::5::978300761\n")
    assert load_raw("ml-10m", tmp_path).frame["rating"].tolist() == [0.5, 5.0]
    with pytest.raises(DataFormatError, match="line 1: field 'rating': 0.5 is outside the range 1-5"):
        load_raw("ml-1m", tmp_path)


def test_finefoods_score_and_synthetic_rating_ranges(tmp_path):
    import gzip

    record = ("product/productId: B001\nreview/userId: A1\nreview/score: {}\nreview/time: 1303862400\n"
              "review/summary: ok\nreview/text: fine\n\n")
    with gzip.open(tmp_path / "finefoods.txt.gz", "wt") as fh:
        fh.write(record.format("5.0") + record.format("7.0"))
    with pytest.raises(DataFormatError, match=r"finefoods.txt.gz: line 10: review/score: 7 is outside the range 1-5"):
        load_raw("amazon-fine-food", tmp_path)
    frame = pd.DataFrame({"user": [0, 1], "item": [0, 1], "rating": np.array([3.0, np.nan], np.float32),
                          "timestamp": [0, 1]})
    frame.to_parquet(tmp_path / "interactions.parquet")
    with pytest.raises(DataFormatError, match="row 1: rating nan"):
        load_raw("synthetic", tmp_path)


# ==================================================================== 9. atomic outputs
# Each writer runs in a child process that SIGKILLs itself either while it writes (a watchdog
# started when a file named like the output — the output or a temporary sibling — is opened
# for writing kills the process once that file holds bytes) or at the rename onto the output.
# An older version of the output exists beforehand: afterwards it must be there, byte for byte.
KILL_HARNESS = textwrap.dedent('''
    import os, signal, sys, threading, time
    from pathlib import Path
    target = Path(sys.argv[1]); mode = sys.argv[2]
    {setup}

    def _kill():
        os.kill(os.getpid(), signal.SIGKILL)

    def _state(path):
        try:
            st = os.stat(path)
            return st.st_size, st.st_mtime_ns
        except OSError:
            return None

    def _watch(path, before):
        while True:  # kill once the file holds new bytes (the open itself comes after the audit event)
            now = _state(path)
            if now is not None and now != before and now[0] > 0:
                _kill()
            time.sleep(0.0001)

    def _writes(args):
        how, flags = args[1], args[2]
        if isinstance(how, str):
            return any(c in how for c in "wax+")
        return bool(flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT))

    watching = []

    def _hook(event, args):
        if mode == "midwrite" and event == "open" and not watching and isinstance(args[0], (str, bytes)):
            path = os.fsdecode(args[0])
            if target.name in os.path.basename(path) and _writes(args):
                watching.append(path)
                threading.Thread(target=_watch, args=(path, _state(path)), daemon=True).start()
        if event == "os.rename" and os.fsdecode(args[1]) == str(target):
            _kill()  # the last moment before the output changes (and a backstop for fast writes)

    sys.addaudithook(_hook)
    {write}
    print("finished without being killed")
''')

WRITERS = {
    "json (records, fetch.json, manifests)": ("out.json", "from recrepro.io import write_json",
                                              "write_json(target, {'a': list(range(100000))})"),
    "text (tables, scorecards)": ("table.md", "from recrepro.io import write_text",
                                  "write_text(target, 'x' * 1000000)"),
    "report page (HTML)": ("table.html", "from recrepro.reporting.html import table_html\n"
                           "src = target.with_name('table.md'); src.write_text('| a |\\n|---|\\n' + '| x |\\n' * 20000)",
                           "table_html(src, target)"),
    "parquet (per-user, histories, splits)": ("part.parquet",
                                              "import pandas as pd; from recrepro.io import write_parquet",
                                              "write_parquet(target, pd.DataFrame({'a': range(100000)}))"),
    "copy (tuned-λ run records)": ("copy.json", "from recrepro.io import copy_file\n"
                                   "src = target.with_name('src.bin'); src.write_bytes(b'y' * 1000000)",
                                   "copy_file(src, target)"),
    "run record (metrics.json last)": (
        "metrics.json", "import pandas as pd; from recrepro.records import write_run_record",
        "write_run_record(target.parent, overall={'ndcg@20': 0.5}, strata={}, "
        "per_user=pd.DataFrame({'user': [0], 'ndcg@20': [0.5]}), counts={'n_users_evaluated': 1}, "
        "meta={'paper': 'x', 'tier': 'smoke', 'dataset': 'd', 'split': 's', 'method': 'm'}, "
        "config_slice={}, split_manifest=None, seed=0, device='cpu', verify_split=False)"),
    "history": ("history.json", "from recrepro.records import write_history",
                "write_history(target.parent, {'loss': list(range(1000)), 'epoch_seconds': [1.0] * 1000})"),
    "checkpoint": ("run.ckpt", "import numpy as np; from recrepro.runtime.checkpoints import save_checkpoint",
                   "save_checkpoint(target, {'epoch': 3}, key='k', arrays={'U': np.zeros((500, 500))})"),
    "figure (PDF + PNG)": (
        "fig.pdf", "import matplotlib; matplotlib.use('Agg'); import matplotlib.pyplot as plt\n"
        "from recrepro.reporting.plotting import save_figure",
        "fig = plt.figure(); fig.gca().plot(range(10)); "
        "save_figure(fig, target, target.with_suffix('.png'), tier='smoke', dataset='d')"),
    "fetched member and fetch.json": (
        "fetch.json", "from recrepro.datasets import fetch_dataset\n"
        "mirror = target.parent.parent / 'mirror' / 'qb-article'; mirror.mkdir(parents=True)\n"
        "(mirror / 'QB-article.csv').write_text('user_id,item_id,click\\n1,2,1\\n')",
        "fetch_dataset('qb-article', target.parent, mirror=mirror.parent, urls_allowed=False)"),
    # the control: a plain write in chunks is caught half-way, so the harness can fail
    "CONTROL: open(output, 'w') (not atomic)": (
        "plain.txt", "",
        "with open(target, 'w') as fh:\n    for _ in range(2000):\n        fh.write('x' * 1000); fh.flush(); "
        "time.sleep(0.001)"),
}


#: Writers that remove their output before writing anything (metrics.json of a run record,
#: a stale fetch.json): after a kill the output is absent, never partial.
REMOVE_FIRST = {"run record (metrics.json last)", "fetched member and fetch.json"}


def _kill_mid_write(tmp_path: Path, writer: str, mode: str) -> tuple[Path, bytes, subprocess.CompletedProcess]:
    name, setup, write = WRITERS[writer]
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    target = out_dir / name
    old = b"the previous, complete version\n"
    target.write_bytes(old)
    script = KILL_HARNESS.format(setup=setup, write=write)
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "MPLBACKEND": "Agg", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-c", script, str(target), mode], capture_output=True, text=True,
                          env=env, timeout=300)
    return target, old, proc


@pytest.mark.parametrize("mode", ["midwrite", "rename"])
@pytest.mark.parametrize("writer", [w for w in WRITERS if not w.startswith("CONTROL")])
def test_a_writer_killed_mid_write_leaves_the_previous_file(tmp_path, writer, mode):
    target, old, proc = _kill_mid_write(tmp_path, writer, mode)
    assert proc.returncode == -signal.SIGKILL, proc.stdout + proc.stderr
    if writer in REMOVE_FIRST:
        # a record is taken down before it is rewritten: the old one must not vouch for new companions
        assert not target.exists() or target.read_bytes() == old
    else:
        assert target.read_bytes() == old


def test_the_kill_harness_catches_a_plain_write(tmp_path):
    target, old, proc = _kill_mid_write(tmp_path, "CONTROL: open(output, 'w') (not atomic)", "midwrite")
    assert proc.returncode == -signal.SIGKILL
    # half written under its final name: what the writers above must never leave
    assert 0 < target.stat().st_size < 2_000_000 and target.read_bytes() != old


# ==================================================================== workflow: 3, 5, issue 26/3
HOSTILE = "my data $(touch pwned); echo owned"


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory):
    """The smoke tier's data stage (and a fetch from a mirror) under a folder named like a shell attack."""
    base = tmp_path_factory.mktemp("quoting")
    root = base / HOSTILE
    make_mirror(root / "mirror")
    config = base / "hostile.yaml"
    config.write_text(json.dumps({"data": {"root": str(root / "data"), "mirror": str(root / "mirror"),
                                           "allow_download": False}}))
    work = base / "work"
    work.mkdir()
    targets = [f"{root}/data/splits/synthetic/fedrap/leave_one_out/seed0/manifest.json",
               f"{root}/data/processed/qb-article/fedrap/stats.json", "results/smoke/datasets.json"]
    proc = snakemake(*targets, "--cores", "2", "--directory", str(work),
                     "--configfile", str(REPO / "config.yaml"), str(config), timeout=900)
    return base, root, work, config, proc


@pytest.mark.workflow
def test_paths_with_spaces_and_shell_syntax_are_quoted(hostile_run):
    base, root, work, _, _ = hostile_run
    assert (root / "data/splits/synthetic/fedrap/leave_one_out/seed0/manifest.json").is_file()
    assert (root / "data/processed/qb-article/fedrap/stats.json").is_file()
    assert json.loads((work / "results/smoke/datasets.json").read_text())["datasets"]["qb-article"] == "mirror"
    executed = [p for where in (base, REPO, Path.cwd()) for p in where.rglob("pwned")]
    assert executed == []
    logs = " ".join(p.read_text() for p in (work / "logs").rglob("*.log"))
    assert "owned" not in logs.replace(HOSTILE, "")


@pytest.mark.workflow
def test_a_failing_job_shows_its_error_on_the_console(hostile_run):
    base, root, work, config, _ = hostile_run
    raw = root / "data/raw/qb-article/QB-article.csv"
    before, after = flip_byte(raw)
    try:
        proc = snakemake(f"{root}/data/processed/qb-article/lambdaopt/stats.json", "--cores", "1",
                         "--directory", str(work), "--configfile", str(REPO / "config.yaml"), str(config),
                         check=False)
    finally:
        flip_byte(raw)  # back as it was, for any test after this one
    console = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "changed since it was fetched" in console and before in console and after in console
    assert "recrepro: error: ChecksumError" in console


def _jobs_of(*config_args: str, workdir: Path) -> list[dict]:
    """Every job of a dry run's DAG with its params, inputs and the rule's shell command (JSON)."""
    script = textwrap.dedent(f'''
        import json, sys
        from pathlib import Path
        from snakemake.api import SnakemakeApi
        from snakemake.settings.types import ConfigSettings, DAGSettings, OutputSettings, Quietness, ResourceSettings
        config = dict(a.split("=", 1) for a in sys.argv[1:])
        with SnakemakeApi(OutputSettings(quiet={{Quietness.ALL}})) as api:
            wf_api = api.workflow(resource_settings=ResourceSettings(cores=1),
                                  config_settings=ConfigSettings(configfiles=[Path({str(REPO / "config.yaml")!r})],
                                                                 config=config),
                                  snakefile=Path({str(REPO / "Snakefile")!r}), workdir=Path({str(workdir)!r}))
            wf = wf_api.dag(dag_settings=DAGSettings()).workflow_api._workflow
            wf._prepare_dag(forceall=False, ignore_incomplete=True, lock_warn_only=True)
            wf._build_dag()
            print(json.dumps([{{"rule": j.rule.name, "params": {{k: v for k, v in j.params.items()}},
                                "input": [str(f) for f in j.input], "shell": j.rule.shellcmd or ""}}
                               for j in wf.dag.jobs], default=str))
    ''')
    proc = subprocess.run([sys.executable, "-c", script, *config_args], capture_output=True, text=True,
                          cwd=workdir, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.workflow
@pytest.mark.parametrize("config", [("tier=smoke",), ("tier=paper",), ("tier=paper", "from_records=true")])
def test_job_params_carry_no_local_path_or_interpreter(tmp_path, config):
    # a redraw's DAG is made of the committed records: plan it in the checkout (nothing runs)
    jobs = _jobs_of(*config, workdir=REPO if "from_records=true" in config else tmp_path)
    assert len(jobs) > 5
    local = [str(REPO), str(Path(sys.executable).parent.parent), os.path.realpath(sys.executable)]
    for job in jobs:
        shown = json.dumps(job["params"]) + json.dumps(job["input"]) + job["shell"]
        assert not any(path in shown for path in local), (job["rule"], shown[:500])


# ==================================================================== 6. byte-identical reruns
# tests/test_workflow.py::test_a_second_run_of_every_papers_smallest_jobs_gives_byte_identical_files
# (it reruns a few jobs against the smoke run that file makes anyway)
