"""The Snakemake workflow: a full smoke-tier run, lint, dry runs of both tiers and config errors.

The smoke run is ``smoke_run`` (tests/conftest.py): one per test session, whichever worker asks first, so
every test here that reads it shares it; the tests that use it come first in this file, as the run is the
suite's longest step (tests/test_ci_order.py)."""

from __future__ import annotations

import importlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from conftest import made_once, snakemake  # noqa: F401  (snakemake: other test files import it from here)

from recrepro.paperlist import paper_keys

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.workflow


# ---------------------------------------------------------------- the smoke run (first: it is the long one)

def test_smoke_tier_builds_every_split_and_the_scorecard(smoke_run):
    splits = sorted(p.relative_to(smoke_run).as_posix() for p in smoke_run.glob("data/splits/**/manifest.json"))
    assert splits == sorted([
        "data/splits/synthetic/exadmm/strong_generalization/seed98765/manifest.json",
        "data/splits/synthetic/fedrap/leave_one_out/seed0/manifest.json",
        "data/splits/synthetic/lambdaopt/temporal_user_ratio/seed0/manifest.json",
        "data/splits/synthetic/prism/random_ratio/seed123/manifest.json",
        "data/splits/synthetic/prism/random_ratio/seed246/manifest.json",
        "data/splits/synthetic/prism/random_ratio/seed492/manifest.json",
    ])
    stats = json.loads((smoke_run / "data/processed/synthetic/fedrap/stats.json").read_text())
    assert {"users", "items", "interactions", "density"} <= set(stats)
    card = pd.read_csv(smoke_run / "results/smoke/baselines/scorecard.csv")
    assert list(card.columns) == ["paper", "source", "dataset", "method", "metric", "published", "tolerance",
                                  "ours_mean", "ours_sd", "n_seeds", "seeds_required", "budget", "diff", "verdict",
                                  "note", "alt_method", "alt_label", "alt_mean", "alt_sd", "alt_n_seeds"]
    md = (smoke_run / "results/smoke/baselines/scorecard.md").read_text()
    assert "not comparable" in md.lower()
    assert (smoke_run / "results/smoke/baselines/figures/baselines.pdf").read_bytes()[:4] == b"%PDF"


def test_smoke_mostpop_beats_random_on_every_split(smoke_run):
    # On the synthetic data popularity carries signal by construction (a Zipf prior),
    # so MostPopular must beat Random on the first metric of every split.
    runs = smoke_run / "results/smoke/baselines/runs"
    for mostpop in runs.glob("**/mostpop/seed*/metrics.json"):
        random = Path(str(mostpop).replace("/mostpop/", "/random/"))
        a = json.loads(mostpop.read_text())["overall"]
        b = json.loads(random.read_text())["overall"]
        key = next(k for k in a if k.startswith(("ndcg@", "hr@")))
        assert a[key] > b[key], (mostpop, key, a[key], b[key])


def test_smoke_run_records_provenance(smoke_run):
    prov = next((smoke_run / "results/smoke/baselines/runs").glob("**/provenance.json"))
    record = json.loads(prov.read_text())
    for key in ("config_sha256", "seed", "device", "versions", "split", "git", "peak_rss_mb", "wall_seconds"):
        assert key in record, key
    assert record["split"]["verified"] is True


def test_smoke_prism_runs_keep_their_magnitudes_rank_correlation(smoke_run):
    # what claim P2 reads where the committed reproduction keeps no magnitudes table: the same ρ
    from scipy import stats

    from recrepro.io import frame_digest

    runs = sorted((smoke_run / "results/smoke/prism/runs").glob("**/magnitudes.parquet"))
    assert runs
    for table in runs:
        entry = json.loads((table.parent / "metrics.json").read_text())["rank_correlations"]["magnitudes.parquet"]
        frame = pd.read_parquet(table)
        assert entry["rows"] == len(frame)
        assert entry["spearman"]["norm~train_degree"] == stats.spearmanr(frame["train_degree"], frame["norm"]).statistic
        assert entry["content_sha256"] == frame_digest(frame)  # computed in memory, the same as the file's
    assert "rank_correlations" not in (runs[0].parent / "provenance.json").read_text()


# Byte-identical reruns: each paper's smallest jobs once more, in a fresh directory, against the smoke run.
#: the smallest smoke jobs: the reference baselines' and each paper's (its rules module names them)
SMALLEST_RUNS = ["results/smoke/baselines/runs/synthetic/fedrap/leave_one_out/mostpop/seed0/metrics.json"] + [
    run for paper in paper_keys()
    for run in importlib.import_module(f"recrepro.papers.{paper}.rules").SMALLEST_SMOKE_RUNS]
TIMING_FILES = {"provenance.json"}  # with the timings


@pytest.mark.workflow
def test_a_second_run_of_every_papers_smallest_jobs_gives_byte_identical_files(smoke_run, tmp_path):
    second = tmp_path / "second"
    second.mkdir()
    snakemake(*SMALLEST_RUNS, "--cores", "2", "--directory", str(second), "--configfile", str(REPO / "config.yaml"),
              timeout=1200)
    run_dirs = sorted(p.parent.relative_to(second) for p in (second / "results").rglob("metrics.json"))
    papers = {d.parts[2] for d in run_dirs}
    assert papers == {"baselines", *paper_keys()}
    compared = []
    for run_dir in run_dirs:
        names = sorted(p.name for p in (second / run_dir).iterdir())
        assert names == sorted(p.name for p in (smoke_run / run_dir).iterdir()), run_dir
        for name in names:
            if name not in TIMING_FILES:
                assert (smoke_run / run_dir / name).read_bytes() == (second / run_dir / name).read_bytes(), \
                    run_dir / name
                compared.append(name)
    assert {"metrics.json", "history.json", "history.parquet"} <= set(compared)
    # the two runs were separate runs: their wall-clock records differ (so a timing left in a
    # metrics file would have been caught above)
    provenance = next(d for d in run_dirs if (second / d / "provenance.json").exists()) / "provenance.json"
    assert (smoke_run / provenance).read_bytes() != (second / provenance).read_bytes()


def _git(repo: Path, *args: str) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env)


@pytest.mark.workflow
def test_a_failed_redraw_names_the_bad_record_and_leaves_committed_files(smoke_run, tmp_path):
    # the smoke run's baselines records and scorecard, committed in a fresh checkout of results
    work = tmp_path / "work"
    shutil.copytree(smoke_run / "results" / "smoke" / "baselines", work / "results" / "smoke" / "baselines")
    _git(work, "init", "-q")
    _git(work, "add", "-A")
    _git(work, "commit", "-q", "-m", "records and their scorecard")
    target = "results/smoke/baselines/scorecard.md"
    args = ("--cores", "1", "--directory", str(work), "--configfile", str(REPO / "config.yaml"))
    drawn = {p: p.read_bytes() for p in (work / "results/smoke/baselines").glob("scorecard.*")}
    assert drawn
    records = sorted((work / "results/smoke/baselines/runs").rglob("metrics.json"))
    bad = records[0]
    text = bad.read_text()
    bad.write_text(text[:120] + "}" + text[120:])  # invalid JSON
    proc = snakemake(target, *args, "--config", "from_records=true", check=False)
    console = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "invalid JSON" in console and str(bad.relative_to(work)) in console
    assert {p: p.read_bytes() for p in drawn} == drawn  # the committed scorecard is as it was
    bad.write_text(text)
    bad.unlink()  # deleted by accident: refused, not a silent not_run
    proc = snakemake(target, *args, "--config", "from_records=true", check=False)
    console = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "git checkout --" in console and str(bad.relative_to(work)) in console
    assert {p: p.read_bytes() for p in drawn} == drawn


@pytest.fixture(scope="session")
def smoke_report(smoke_run, tmp_path_factory):
    """``snakemake --report`` of the smoke run (once, like the run): (page text, results, categories) as
    the page embeds them."""
    def make(folder: Path) -> None:  # (a folder of its own, beside the run's results, not among them)
        snakemake("--report", str(folder / "smoke-report.html"), "--directory", str(smoke_run),
                  "--configfile", str(REPO / "config.yaml"), timeout=600)

    page = (made_once(tmp_path_factory, "smoke-report", make) / "smoke-report.html").read_text()
    return (page, *report_data(page))


def report_data(page: str) -> tuple[dict, dict]:
    """The ``results`` (path -> mime type, labels, caption, ...) and ``categories`` (category ->
    subcategory -> paths) objects a Snakemake HTML report embeds as JavaScript."""
    results = json.loads(re.search(r"var results = (\{.*?\});\n", page, re.S).group(1))
    categories = json.loads(re.search(r"var categories = (\{.*?\});\n", page, re.S).group(1))
    return results, categories


def test_smoke_report_bundles_every_figure_scorecard_and_table(smoke_run, smoke_report):
    # issue 9, acceptance 3: one HTML file with every figure and scorecard of the run
    page, results, _ = smoke_report
    figures = sorted(p.relative_to(smoke_run).as_posix() for p in smoke_run.glob("results/smoke/*/figures/**/*.png"))
    cards = sorted(p.relative_to(smoke_run).as_posix() for p in smoke_run.glob("results/smoke/*/scorecard.md"))
    assert figures and len(cards) >= 6
    for path in figures + [c.removesuffix(".md") + ".html" for c in cards]:
        assert path in results, path
    for table in smoke_run.glob("results/smoke/*/**/*.md"):  # every table as its HTML page (issue 26)
        rel = table.relative_to(smoke_run).as_posix()
        assert rel.removesuffix(".md") + ".html" in results, rel


def test_smoke_report_reads_in_a_browser(smoke_run, smoke_report):
    """Issue 26: what a user sees. Figures are images (not PDFs a browser may not show), no caption
    turns a metric name into a mailto: link, no local path leaks into a report made to be shared,
    items are filed in subcategories with labels in the paper's order, tables are HTML."""
    page, results, categories = smoke_report
    figures = {path: r for path, r in results.items() if "/figures/" in path}
    assert len(figures) >= 20
    assert {r["mime_type"] for r in figures.values()} <= {"image/png", "image/svg+xml"}, \
        sorted(path for path, r in figures.items() if not r["mime_type"].startswith("image/"))
    assert "mailto:" not in page
    # house style: at most MAX_WIDTH_IN wide at PNG_DPI (>= 150 dpi), so text stays readable at 100 %
    from PIL import Image

    from recrepro.reporting.plotting import MAX_WIDTH_IN, PNG_DPI

    assert PNG_DPI >= 150
    for path in figures:
        width_px = Image.open(smoke_run / path).size[0]
        assert width_px <= (MAX_WIDTH_IN + 0.3) * PNG_DPI, (path, width_px)
    # the user's file system stays out (job parameters included: the interpreter is not a param)
    for local in {str(REPO), str(smoke_run), str(Path(sys.executable).parent.parent)}:
        assert local not in page, local
    subcategories = {sub for subs in categories.values() for sub in subs}
    assert {"Figures", "Tables", "Scorecard"} <= subcategories and "Other" not in subcategories
    assert not [path for path in results if path.endswith(".md")]  # Markdown is never a download
    tables = [path for subs in categories.values() for path in subs.get("Tables", [])]
    assert tables and all(results[path]["mime_type"] == "text/html" for path in tables)
    # every item has labels; PRISM's figures sort (as text, like the report) in the paper's order
    assert all(r["labels"] for r in results.values())
    prism = sorted(results[path]["labels"]["figure"] for path in categories["PRISM"]["Figures"])
    numbers = [int(re.match(r"Fig\. (\d+)", label).group(1)) for label in prism]
    assert numbers == sorted(numbers) and numbers[0] == 1 and numbers[-1] == 11
    # the smoke scorecards show smoke checks, and they pass
    for paper in ("baselines", *paper_keys()):
        card = pd.read_csv(smoke_run / f"results/smoke/{paper}/scorecard.csv")
        checks = card[card["source"].str.startswith("smoke check")]
        assert len(checks) >= 2 and set(checks["verdict"]) == {"pass"}, (paper, checks[["method", "note"]])


# ---------------------------------------------------------------- lint, dry runs, config errors, the README

def test_readme_starts_with_the_ci_command():
    lines = [l for l in (REPO / "README.md").read_text().splitlines() if l.strip()]
    fence = lines.index("```bash")
    setup_and_smoke, setup_and_test = lines[fence + 1], lines[fence + 2]
    assert lines[fence + 3] == "```"
    assert setup_and_smoke.endswith("snakemake --cores 2")
    ci = [l for l in (REPO / ".ci" / "run").read_text().splitlines() if l and not l.startswith("#")]
    assert setup_and_test in ci


def test_lint_is_clean():
    proc = snakemake("--lint", cwd=REPO)
    assert "Lints for" not in proc.stdout + proc.stderr


def test_dry_run_paper_tier_with_mirror(tmp_path):
    proc = snakemake("-n", "-p", "--cores", "8", "--directory", str(tmp_path), "--configfile",
                     str(REPO / "config.yaml"), "--config", "tier=paper", "data={mirror: ../shared/datasets}")
    out = proc.stdout + proc.stderr
    for rule in ("fetch_dataset", "preprocess_dataset", "split_dataset", "evaluate_baseline", "baselines_scorecard"):
        assert rule in out
    # the paper tier sets no threads of its own: its jobs take the top-level 2
    assert set(re.findall(THREADED_JOB, proc.stdout)) == {"2"}
    assert "data/splits/epinions/exadmm/strong_generalization/seed98765/manifest.json" in out


THREADED_JOB = r"OMP_NUM_THREADS=(\d+) recrepro (?:fedrap train|strong tune|baseline)"


def test_smoke_tier_jobs_take_one_thread(tmp_path):
    # tiers.smoke.threads (1) over the top-level threads (2): a 2-thread job on 2 cores runs alone
    proc = snakemake("-n", "-p", "--cores", "8", "--directory", str(tmp_path), "--configfile", str(REPO / "config.yaml"))
    assert set(re.findall(THREADED_JOB, proc.stdout)) == {"1"}


def test_unknown_config_key_is_a_schema_error_naming_it(tmp_path):
    proc = snakemake("-n", "--directory", str(tmp_path), "--configfile", str(REPO / "config.yaml"),
                     "--config", "tier=smoke", "datta=1", check=False)
    assert proc.returncode != 0
    assert "datta" in proc.stdout + proc.stderr


def test_unknown_dataset_is_a_schema_error_naming_it(tmp_path):
    import yaml

    cfg = yaml.safe_load((REPO / "config.yaml").read_text())
    cfg["tiers"]["smoke"]["data"][0]["dataset"] = "movielens-99"
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(cfg))
    proc = snakemake("-n", "--directory", str(tmp_path), "--configfile", str(path), check=False)
    assert proc.returncode != 0
    assert "movielens-99" in proc.stdout + proc.stderr


@pytest.mark.realdata
def test_fetch_rule_refuses_a_corrupted_mirror_and_leaves_nothing(mirror, tmp_path):
    bad_mirror = tmp_path / "mirror"
    shutil.copytree(mirror / "ml-100k", bad_mirror / "ml-100k")
    target = bad_mirror / "ml-100k" / "u.data"
    target.chmod(0o644)
    blob = bytearray(target.read_bytes())
    blob[1000] ^= 0x01  # one flipped bit in one byte
    target.write_bytes(bytes(blob))
    work = tmp_path / "work"
    work.mkdir()
    import yaml

    cfg = yaml.safe_load((REPO / "config.yaml").read_text())
    cfg["data"].update(mirror=str(bad_mirror), allow_download=False)
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg))
    proc = snakemake("data/raw/ml-100k/fetch.json", "--cores", "1", "--directory", str(work),
                     "--configfile", str(tmp_path / "config.yaml"), check=False)
    assert proc.returncode != 0
    log = (work / "logs/data/fetch/ml-100k.log").read_text()
    assert "u.data" in log and "06416e59" in log  # names the file and the expected sha256
    raw = work / "data/raw/ml-100k"
    assert not (raw / "fetch.json").exists()
    assert not (raw / "u.data").exists()
