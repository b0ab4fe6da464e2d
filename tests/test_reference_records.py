"""The committed reference reproduction (results/paper/): what it may hold, and its redraw from records.

``snakemake --config tier=paper from_records=true`` on a copy of the checkout with no data, no
mirror and no network must rebuild every committed table and scorecard byte for byte and redraw
every committed figure, with no training, fetching or splitting job.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from recrepro.paperlist import paper_keys

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "results" / "paper"

MAX_TOTAL_BYTES = 30 * 1024 * 1024
MAX_FILE_BYTES = 2 * 1024 * 1024
BLOCK_BYTES = 4096
#: What a record may be made of: small JSON/CSV/Markdown/parquet, figures. Anything else (model
#: weights, arrays, archives, split parts) is refused.
#: .jsonl: the released FedRAP and λOpt codes' curves (<paper>/official/, benchmarks/official_<paper>.py)
ALLOWED_SUFFIXES = {".json", ".jsonl", ".csv", ".md", ".parquet", ".png", ".pdf", ".html", ".tsv"}
#: Compressed forms allowed (λOpt's released-code curves are committed gzipped: a third of the room);
#: any other archive is refused.
ALLOWED_COMPRESSED = {".jsonl.gz"}
#: File names that are data, splits or per-user recommendation lists, whatever their suffix.
FORBIDDEN_NAMES = re.compile(
    r"^(train|test|validation|test_tr|test_te|validation_tr|validation_te|interactions|item_index|"
    r"user_map|item_map|ratings?)\.(parquet|csv|txt)$|^(recommendations?|topk|.*_lists?)\.(parquet|csv|json|txt)$"
)
#: Rules that make records: none of them may run in a redraw.
RECORD_RULES = re.compile(r"\b(\w+_train\w*|fetch_dataset|preprocess_dataset|split_dataset|synthesize_data|"
                          r"evaluate_baseline|exadmm_scalability|lambdaopt_sensitivity|fedrap_stats|"
                          r"lrs_sweep|lrs_acceptance|lrs_ml100k)\b")
#: Redraw outputs compared byte for byte (figures are compared by being rewritten).
EXACT_SUFFIXES = {".md", ".csv"}


def _load_bench_redraw():
    """benchmarks/bench_redraw.py, which times the redraw these tests check; its checkout and Snakemake helpers."""
    spec = importlib.util.spec_from_file_location("bench_redraw", REPO / "benchmarks" / "bench_redraw.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


bench_redraw = _load_bench_redraw()


def tracked_files() -> list[Path]:
    """Files of this checkout as a clean clone would have them (tracked, plus new files not ignored)."""
    return bench_redraw.checkout_files(REPO)


def committed_results() -> list[Path]:
    return [p for p in tracked_files() if p.parts[:2] == ("results", "paper")]


def test_results_paper_is_small_and_holds_no_forbidden_files():
    files = committed_results()
    sizes = [(REPO / p).stat().st_size for p in files]
    total = sum(sizes)  # the files' bytes (`du --apparent-size`)
    assert total <= MAX_TOTAL_BYTES, f"results/paper holds {total / 2**20:.1f} MB (limit 30 MB)"
    # and on disk: each file takes whole 4 KiB blocks (`du` of the files), which the many small
    # files of the records make the larger measure
    blocks = sum(-(-size // BLOCK_BYTES) * BLOCK_BYTES for size in sizes)
    assert blocks <= MAX_TOTAL_BYTES, f"results/paper's files take {blocks / 2**20:.1f} MB of 4 KiB blocks (limit 30 MB)"
    # a record keeps its timings in provenance.json (`recrepro records normalise` folds an old timings.json in)
    assert not [p for p in files if p.name == "timings.json"], "timings.json left in records: run `recrepro records normalise`"
    big = [f"{p} ({(REPO / p).stat().st_size / 2**20:.2f} MB)" for p in files if (REPO / p).stat().st_size > MAX_FILE_BYTES]
    assert not big, f"files over 2 MB: {big[:5]}"
    bad_kind = [str(p) for p in files
                if p.suffix not in ALLOWED_SUFFIXES and "".join(p.suffixes[-2:]) not in ALLOWED_COMPRESSED]
    assert not bad_kind, f"not a record, table or figure (weights, arrays, archives?): {bad_kind[:5]}"
    bad_name = [str(p) for p in files if FORBIDDEN_NAMES.match(p.name)]
    assert not bad_name, f"data, splits or recommendation lists must not be committed: {bad_name[:5]}"


def test_committed_records_name_no_local_paths():
    """Records are shared: provenance names the split below the data root, never this machine's folders."""
    leaks = []
    for p in committed_results():
        if p.suffix in {".json", ".md", ".csv", ".html"}:
            text = (REPO / p).read_text(errors="replace")
            if re.search(r"(/work/|/home/|/Users/|/tmp/|\.venv/bin)", text):
                leaks.append(str(p))
    assert not leaks, f"local paths in {leaks[:5]}"


def test_no_local_paths_check_can_fail(tmp_path):
    assert re.search(r"(/work/|/home/)", '{"manifest": "/home/me/data/splits/x/manifest.json"}')


def _snakemake(cwd: Path, *args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "snakemake", "--cores", "2", *args]
    return subprocess.run(cmd, cwd=cwd, env=bench_redraw.offline_env(), capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def redraw(tmp_path_factory):
    """A copy of the checkout with no data, redrawn from its records; (copy, the redraw's console, mtimes before).

    The console names every job the redraw ran (``rule <name>:``), so no dry run comes first: the jobs
    checked are the ones that ran. How long the redraw takes is measured in ``benchmarks/bench_redraw.py``,
    not here."""
    if not any(p.name == "metrics.json" for p in committed_results()):
        pytest.skip("results/paper holds no run records yet")
    copy = tmp_path_factory.mktemp("clone")
    bench_redraw.copy_checkout(copy, REPO)
    assert not (copy / "data").exists()
    before = {p: (copy / p).stat().st_mtime for p in committed_results()}
    time.sleep(1.1)  # the redrawn files' times must be visibly newer
    # (about 100 s on the idle 2-core machine; the limit leaves room for a loaded one)
    proc = _snakemake(copy, "--config", "tier=paper", "from_records=true", timeout=1800)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    return copy, proc.stdout + proc.stderr, before


def test_redraw_runs_no_record_making_job(redraw):
    _, console, _ = redraw
    # each job's header: `rule x:`, `localrule x:`, or `(local)checkpoint x:` for a checkpoint rule
    jobs = re.findall(r"^(?:local)?(?:rule|checkpoint) (\w+):", console, flags=re.MULTILINE)
    assert jobs, console[-2000:]
    assert not [j for j in jobs if RECORD_RULES.search(j)], f"record-making jobs in a redraw: {jobs}"
    # every job the redraw planned ran and finished: the list above is the whole redraw
    done = re.findall(r"^(\d+) of (\d+) steps \(100%\) done", console, flags=re.MULTILINE)
    assert done and len(jobs) == int(done[-1][1]), (len(jobs), done[-1:], console[-2000:])


@pytest.mark.parametrize("paper", ["baselines", *paper_keys()])
def test_redraw_rebuilds_tables_and_scorecards_byte_identical(redraw, paper):
    copy, _, _ = redraw
    outputs = [p for p in committed_results() if p.parts[2] == paper and p.suffix in EXACT_SUFFIXES
               and "runs" not in p.parts and "sweeps" not in p.parts]
    if not outputs:
        pytest.skip(f"no committed {paper} tables or scorecards")
    differ = [str(p) for p in outputs if (copy / p).read_bytes() != (REPO / p).read_bytes()]
    assert not differ, f"redraw differs from the committed file: {differ}"


@pytest.mark.parametrize("page", ["results/paper/README.md", "docs/compute.md"])
def test_redraw_rebuilds_the_generated_pages_byte_identical(redraw, page):
    """The report and the compute page are generated: a committed page that differs is stale."""
    copy, _, _ = redraw
    assert (copy / page).read_bytes() == (REPO / page).read_bytes(), \
        f"{page} differs from its redraw: redraw it (snakemake --cores 2 {page} --config tier=paper from_records=true)"


@pytest.mark.parametrize("paper", ["baselines", *paper_keys()])
def test_redraw_redraws_every_figure(redraw, paper):
    copy, _, before = redraw
    figures = [p for p in committed_results() if p.parts[2] == paper and "figures" in p.parts
               and p.suffix in {".png", ".pdf"}]
    if not figures:
        pytest.skip(f"no committed {paper} figures")
    stale = [str(p) for p in figures if (copy / p).stat().st_mtime <= before[p]]
    assert not stale, f"figures not redrawn: {stale}"


def test_redraw_one_file_redraws_only_that_file(redraw):
    copy, _, _ = redraw
    figures = sorted(p for p in committed_results() if "figures" in p.parts and p.suffix == ".png")
    if not figures:
        pytest.skip("no committed figures")
    target = figures[0].with_suffix(".pdf")
    proc = _snakemake(copy, "-n", str(target), "--config", "tier=paper", "from_records=true")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    jobs = re.findall(r"^(?:local)?rule (\w+):", proc.stdout + proc.stderr, flags=re.MULTILINE)
    assert len(jobs) == 1, (jobs, proc.stdout[-1500:], proc.stderr[-1500:])


def test_readme_is_written_after_every_figure_and_table_it_shows(redraw):
    """results/paper/README.md lists the figures on disk: its job must follow every figure job."""
    copy, _, _ = redraw
    proc = _snakemake(copy, "-n", "results/paper/README.md", "--config", "tier=paper", "from_records=true")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    jobs = set(re.findall(r"^(?:local)?rule (\w+):", proc.stdout + proc.stderr, flags=re.MULTILINE))
    shown = [p for p in committed_results() if p.parts[-2] in {"figures", "tables"} and p.suffix in {".png", ".md"}]
    if not shown:
        pytest.skip("no committed figures or tables")
    assert "reference_readme" in jobs
    figure_jobs = {j for j in jobs if "figure" in j or "table" in j or j in {"exadmm_tradeoff", "exadmm_convergence"}}
    assert figure_jobs, f"the README's job asks for no figure or table job: {sorted(jobs)}"


# ---------------------------------------------------------------- units behind the records

def test_write_history_splits_timings_and_read_history_merges_them(tmp_path):
    import json

    import pandas as pd

    from recrepro.records import read_history, read_timings, write_history

    history = {"train": [{"epoch": 1, "loss": 0.5, "seconds": 1.25}, {"epoch": 2, "loss": 0.25, "seconds": 1.5}],
               "best_epoch": 2, "seconds_per_epoch": 1.375, "epoch_seconds": [1.25, 1.5], "val_ndcg": [0.1, 0.2]}
    write_history(tmp_path, history)
    stored = (tmp_path / "history.json").read_text()
    assert "seconds" not in stored and '"loss": 0.25' in stored
    assert read_timings(tmp_path)["history.json"]["seconds_per_epoch"] == 1.375
    assert read_history(tmp_path) == history
    # the timings sit in provenance.json, no file of their own (a record is as few disk blocks as it can be)
    assert not (tmp_path / "timings.json").exists()
    assert json.loads((tmp_path / "provenance.json").read_text())["timings"]["history.json"]["epoch_seconds"] == [1.25, 1.5]
    # the same run with other timings: history.json byte-identical, only provenance's timings differ
    before = (tmp_path / "history.json").read_bytes()
    write_history(tmp_path, {**history, "seconds_per_epoch": 9.0, "epoch_seconds": [9.0, 9.0]})
    assert (tmp_path / "history.json").read_bytes() == before
    frame = pd.DataFrame({"round": [1, 2], "hr@10": [0.1, 0.2], "seconds": [3.0, 4.0]})
    write_history(tmp_path, frame, "history.parquet")
    assert list(pd.read_parquet(tmp_path / "history.parquet").columns) == ["round", "hr@10"]
    assert read_history(tmp_path, "history.parquet")["seconds"].tolist() == [3.0, 4.0]


def test_run_record_keeps_timing_meta_out_of_metrics(tmp_path):
    import pandas as pd

    from recrepro.records import read_metrics, read_timings, write_history, write_run_record

    write_history(tmp_path, {"best_epoch": 3, "epoch_seconds": [1.5, 2.5]})  # histories are written first
    write_run_record(tmp_path, overall={"ndcg@20": 0.5}, strata={}, per_user=pd.DataFrame({"user": [0], "ndcg@20": [0.5]}),
                     counts={"n_users_evaluated": 1}, meta={"dataset": "d", "split": "s", "method": "m", "tier": "smoke",
                                                             "seconds_per_epoch": 2.5, "best_epoch": 3},
                     config_slice={}, split_manifest=None, seed=0, device="cpu")
    assert "seconds" not in (tmp_path / "metrics.json").read_text()
    assert read_metrics(tmp_path)["seconds_per_epoch"] == 2.5 and read_metrics(tmp_path)["best_epoch"] == 3
    # the record's provenance keeps the history's timings beside its own
    assert read_timings(tmp_path) == {"history.json": {"epoch_seconds": [1.5, 2.5]}, "meta": {"seconds_per_epoch": 2.5}}


def test_normalise_moves_old_timings_and_local_paths(tmp_path):
    import json

    from recrepro.records import normalise_run_dir, read_history

    (tmp_path / "metrics.json").write_text(json.dumps({"method": "m", "seconds_per_round": 1.0, "overall": {}}))
    (tmp_path / "history.json").write_text(json.dumps({"train": [{"epoch": 1, "seconds": 2.0}]}))
    (tmp_path / "provenance.json").write_text(json.dumps(
        {"split": {"manifest": "/home/me/data/splits/ml-100k/fedrap/leave_one_out/seed0/manifest.json"}}))
    changed = normalise_run_dir(tmp_path)
    assert len(changed) == 3
    assert "seconds" not in (tmp_path / "metrics.json").read_text()
    assert json.loads((tmp_path / "provenance.json").read_text())["split"]["manifest"] == \
        "splits/ml-100k/fedrap/leave_one_out/seed0/manifest.json"
    assert read_history(tmp_path)["train"][0]["seconds"] == 2.0
    assert normalise_run_dir(tmp_path) == []  # idempotent


def test_timings_live_in_a_compact_provenance_and_old_timings_files_are_folded_in(tmp_path):
    import json

    from recrepro.records import normalise_run_dir, provenance_text, read_timings

    # by hand: keys sorted, an object or list holding no other on one line, seconds to the millisecond, NaN kept
    assert provenance_text({"seed": 0, "run": {"method": "m", "dataset": "d"},
                            "timings": {"meta": {"wall_seconds": 12.3456789},
                                        "history.parquet": {"seconds": [0.1234567, float("nan")]}}}) == (
        '{\n  "run": {"dataset": "d", "method": "m"},\n  "seed": 0,\n  "timings": {\n'
        '    "history.parquet": {\n      "seconds": [0.123, NaN]\n    },\n    "meta": {"wall_seconds": 12.346}\n'
        '  }\n}\n')
    # an earlier record: its own timings.json (one number per line) beside an indented provenance
    old = {"history.parquet": {"seconds": [0.2074103439990722, 0.1950751449985546]}, "meta": {"wall_seconds": 3.25}}
    (tmp_path / "timings.json").write_text(json.dumps(old, indent=2))
    assert read_timings(tmp_path) == old  # read where it is until normalised
    (tmp_path / "provenance.json").write_text(json.dumps({"seed": 0, "git": {"commit": "abc", "dirty": False}}, indent=2))
    assert normalise_run_dir(tmp_path) == ["timings.json -> provenance.json (timings)"]
    assert not (tmp_path / "timings.json").exists()
    assert read_timings(tmp_path) == {"history.parquet": {"seconds": [0.207, 0.195]}, "meta": {"wall_seconds": 3.25}}
    assert json.loads((tmp_path / "provenance.json").read_text())["git"] == {"commit": "abc", "dirty": False}
    assert normalise_run_dir(tmp_path) == []  # idempotent
    # a provenance in the earlier indented layout alone is rewritten, its content unchanged
    content = {"seed": 1, "split": {"files": {"a.parquet": {"rows": 3, "sha256": "x"}}}}
    (tmp_path / "provenance.json").write_text(json.dumps(content, indent=2))
    assert normalise_run_dir(tmp_path) == ["provenance.json: one line per object that holds no other, timings to the "
                                          "millisecond"]
    assert json.loads((tmp_path / "provenance.json").read_text()) == content
    assert (tmp_path / "provenance.json").read_text().count("\n") == 8


def test_histories_are_written_one_epoch_per_line_and_old_ones_normalised_to_it(tmp_path):
    import json

    from recrepro.records import history_text, normalise_run_dir, read_history, write_history

    history = {"train": [{"loss": 0.5, "epoch": 1}, {"loss": 0.25, "epoch": 2}], "best": {"epoch": 2, "at": {"ndcg": 0.1}}}
    # by hand: keys sorted, an object or list holding no other on one line, the rest at two-space indent
    assert history_text(history) == ('{\n  "best": {\n    "at": {"ndcg": 0.1},\n    "epoch": 2\n  },\n'
                                     '  "train": [\n    {"epoch": 1, "loss": 0.5},\n    {"epoch": 2, "loss": 0.25}\n  ]\n}\n')
    assert history_text([]) == "[]\n" and history_text({"a": [1, 2]}) == '{\n  "a": [1, 2]\n}\n'
    write_history(tmp_path, history)
    assert (tmp_path / "history.json").read_text() == history_text(history)
    (tmp_path / "history.json").write_text(json.dumps(history, indent=2))  # the earlier layout
    assert normalise_run_dir(tmp_path) == ["history.json: one line per epoch's or iteration's values"]
    assert read_history(tmp_path) == history
    assert normalise_run_dir(tmp_path) == []  # idempotent


def _card(path, rows):
    import pandas as pd

    from recrepro.scorecard import SCORECARD_COLUMNS

    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows, columns=list(SCORECARD_COLUMNS)).to_csv(path, index=False)


def test_summary_counts_by_hand(tmp_path):
    """exadmm's expected file, a hand-made scorecard: 2 rows run (one short of seeds), Epinions missing."""
    from recrepro.scorecard import expected_path, load_expected, summarise_scorecards

    entries = load_expected(expected_path("exadmm")).entries
    rows = []
    for i, e in enumerate(entries):
        n = 3 if i == 0 else (1 if i == 1 else 0)
        rows.append({"paper": "exadmm", "source": e.source, "dataset": e.dataset, "method": e.method, "metric": e.metric,
                     "published": e.published, "n_seeds": n, "seeds_required": 3, "budget": "",
                     "verdict": "within" if n else "not_run"})
    _card(tmp_path / "exadmm" / "scorecard.csv", rows)
    published = sum(e.published is not None for e in entries)
    fixture = sum(e.published is not None and e.dataset == "ml-1m-exadmm-split" for e in entries)
    counts = summarise_scorecards(tmp_path, {"ml-1m-exadmm-split": "mirror"}, papers=["exadmm"])
    # every exadmm number is an official-code measurement: counted apart from the printed ones
    assert counts == {"published": published, "reachable": fixture, "run": 2, "full_budget_all_seeds": 1,
                      "within_tolerance": 2, "capped": 1, "printed": 0, "printed_reachable": 0, "printed_run": 0,
                      "printed_within_tolerance": 0, "other_targets": published,
                      "claims": {"supported": 0, "contradicted": 0, "mixed": 0, "inconclusive": 0,
                                 "not_testable_here": 0, "provisional": 0}}


def test_reference_readme_and_compute_page(tmp_path):
    import json

    from recrepro.reporting.compute_page import compute_markdown, compute_table
    from recrepro.reporting.front_page import reference_readme

    run = tmp_path / "results/paper/exadmm/runs/epinions/strong_generalization/ials/seed0"
    run.mkdir(parents=True)
    (run / "metrics.json").write_text("{}")
    (run / "provenance.json").write_text(json.dumps({"wall_seconds": 7200.0, "threads": {"torch_num_threads": 2},
                                                     "peak_rss_mb": 512.0, "device": "cpu"}))
    expected = [str(run.relative_to(tmp_path) / "metrics.json"),
                "results/paper/exadmm/runs/epinions/strong_generalization/ials/seed1/metrics.json",
                "results/paper/exadmm/runs/msd/strong_generalization/ials/seed0/metrics.json"]
    frame = compute_table(expected, results_root=tmp_path)
    assert frame["recorded"].tolist() == [True, False, False]
    page = compute_markdown(frame, {"epinions": "mirror"})
    assert "| exadmm | epinions | 1 | 4.00 | 2.00 | 4.00 | 512 | cpu |" in page  # 2 h x 2 threads
    assert "| exadmm | epinions | yes | 1 | 1 | 4.00 |" in page  # priced at the recorded job's mean
    assert "| exadmm | msd | no | 1 | 0 | not measured |" in page
    results = tmp_path / "results/paper"
    (results / "datasets.json").write_text(json.dumps({"datasets": {"epinions": "mirror"}}))
    text = reference_readme(results, results / "README.md")
    assert '"published":' in text and "## exADMM" in text and "/work/" not in text


def test_reference_rows_name_their_cap_and_explain_an_unlinked_deviation():
    from recrepro.reporting.front_page import _note

    capped = {"n_seeds": 1, "seeds_required": 3, "budget": float("nan"), "verdict": "within",
              "note": "Table 1; 1 of 3 seeds; deviation: docs/deviations.md#prism-nlmf-relu"}
    assert _note(capped, "d.md") == "1 of 3 seeds; [deviation: prism-nlmf-relu](d.md#prism-nlmf-relu)"
    stated = {"n_seeds": 1, "seeds_required": 3, "budget": "120 of 200 epochs; 1 of 3 seeds", "verdict": "within"}
    assert _note(stated, "d.md") == "120 of 200 epochs; 1 of 3 seeds"
    unlinked = {"n_seeds": 3, "seeds_required": 3, "verdict": "deviates", "note": "official binary: 1 of 10 collapsed"}
    assert _note(unlinked, "d.md") == "official binary: 1 of 10 collapsed"
    assert _note({**unlinked, "verdict": "within"}, "d.md") == ""


def test_reference_page_lists_figures_in_the_papers_order():
    from recrepro.reporting.front_page import figure_order

    names = ["fig10_ssm_mawu_gowalla", "fig1_weight_decay_gowalla", "fig3_magnitudes_gowalla", "fig2_magnitudes",
             "fig3_batched_wd_gowalla", "curves"]
    ordered = [p.stem for p in sorted((Path(f"{n}.png") for n in names), key=figure_order)]
    # as text, fig10 would come before fig2; numbers sort as numbers
    assert ordered == ["curves", "fig1_weight_decay_gowalla", "fig2_magnitudes", "fig3_batched_wd_gowalla",
                       "fig3_magnitudes_gowalla", "fig10_ssm_mawu_gowalla"]


def test_record_parquets_are_written_compact_and_old_ones_rewritten_with_the_same_values(tmp_path):
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    from recrepro.io import write_parquet
    from recrepro.records import normalise_run_dir

    frame = pd.DataFrame({"round": range(1, 101), "hr@10": [i / 100 for i in range(100)], "dp_epsilon": [None] * 100,
                          "kind": ["dui"] * 100, "hit": [float(i % 2) for i in range(100)]})
    write_parquet(tmp_path / "history.parquet", frame)
    written = tmp_path / "history.parquet"
    assert pq.read_metadata(written).row_group(0).column(1).statistics is None  # no column statistics
    assert pq.read_schema(written).metadata is None  # neither pandas metadata nor a stored Arrow schema
    floats, ints = pq.read_metadata(written).row_group(0).column(1), pq.read_metadata(written).row_group(0).column(0)
    assert "BYTE_STREAM_SPLIT" in floats.encodings and "RLE_DICTIONARY" not in floats.encodings
    assert "RLE_DICTIONARY" in ints.encodings  # only distinct-valued float columns go without a dictionary
    hits = pq.read_metadata(written).row_group(0).column(4)
    assert "RLE_DICTIONARY" in hits.encodings and "BYTE_STREAM_SPLIT" not in hits.encodings  # 2 values: kept
    compact_size = written.stat().st_size
    # the earlier layout: statistics and the Arrow schema stored; normalising rewrites it smaller
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False).replace_schema_metadata(None), written,
                   compression="zstd")
    assert written.stat().st_size > compact_size
    assert normalise_run_dir(tmp_path) == [
        "history.parquet: no column statistics or stored Arrow schema; distinct-valued floats byte-stream-split"]
    assert written.stat().st_size == compact_size
    back = pd.read_parquet(written)
    pd.testing.assert_frame_equal(back, frame)  # same values and dtypes (the all-null column included)
    assert normalise_run_dir(tmp_path) == []  # idempotent
