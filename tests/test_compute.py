"""docs/compute.md's prices (recrepro.reporting.compute_page): scaled estimates and GPU records, on hand-made records.

The page's measured prices are also covered in tests/test_reference_records.py
(test_reference_readme_and_compute_page).
"""

from __future__ import annotations

import json
from pathlib import Path

from recrepro.reporting.compute_page import compute_markdown, compute_table, queue_priority
from recrepro.paperlist import paper_keys

#: A paper with no expected-numbers file, so the queue's priorities need none.
PAPER = "demo"


def _run(dataset: str, method: str = "mf_bpr_wd0", seed: int = 0) -> str:
    return f"results/paper/{PAPER}/runs/{dataset}/{method}/seed{seed}/metrics.json"


def _record(root: Path, dataset: str, cpu_hours: float, method: str = "mf_bpr_wd0", seed: int = 0,
            device: str = "cpu", device_name: str | None = None) -> str:
    """Write a finished run record of ``cpu_hours`` measured CPU time (wall time: 1 hour) and return its path."""
    path = _run(dataset, method, seed)
    run_dir = (root / path).parent
    run_dir.mkdir(parents=True)
    (run_dir / "metrics.json").write_text("{}")
    (run_dir / "provenance.json").write_text(json.dumps({
        "wall_seconds": 3600.0, "cpu_seconds": cpu_hours * 3600, "threads": {"torch_num_threads": 1},
        "peak_rss_mb": 100.0, "device": device, "device_name": device_name}))
    return path


def test_a_record_resumed_before_the_usage_ledger_is_priced_from_its_epoch_seconds(tmp_path):
    # Its last piece ran 1 hour (0.5 CPU-hours); its per-epoch seconds, over every piece, add up to 3 hours.
    path = _record(tmp_path, "ds", 0.5)
    run_dir = (tmp_path / path).parent
    # an earlier record's own timings.json (before they moved into provenance.json) is read too
    (run_dir / "timings.json").write_text(json.dumps({"history.json": {"epoch_seconds": [3600.0] * 3}}))
    measured = _record(tmp_path, "ds", 0.5, seed=1)  # resumed with a ledger: its times already sum the pieces
    prov = json.loads(((tmp_path / measured).parent / "provenance.json").read_text())
    prov.update(pieces=2, earlier_pieces={"pieces": 1, "wall_seconds": 1800.0, "cpu_seconds": 900.0},
                timings={"history.json": {"epoch_seconds": [3600.0] * 3}})  # where records keep them now
    ((tmp_path / measured).parent / "provenance.json").write_text(json.dumps(prov))
    frame = compute_table([path, measured, _record(tmp_path, "ds", 0.25, seed=2)], tmp_path)
    assert frame["wall_hours"].tolist() == [3.0, 1.0, 1.0]
    assert frame["cpu_hours"].tolist() == [1.5, 0.5, 0.25]  # 0.5 CPU-h per wall hour, over 3 hours
    assert frame["pieces_estimated"].tolist() == [True, False, False]
    page = compute_markdown(frame, {"ds": "mirror"})
    assert ("1 resumed record predates the ledger and measured only its last piece: its wall time is the sum "
            "of its per-epoch or per-round seconds") in page


def _remaining_row(page: str, dataset: str) -> str:
    return next(line for line in page.splitlines() if line.startswith(f"| {PAPER} | {dataset} | ") and
                line.count("|") == 8)


def test_scaled_estimate_is_linear_in_interactions(tmp_path):
    # reference: 1,000 interactions, one job of 2 CPU-hours; target: 3,000 -> 2 x 3,000 / 1,000 = 6.0
    runs = [_record(tmp_path, "ref", 2.0), _run("big")]
    page = compute_markdown(compute_table(runs, tmp_path), {"ref": "mirror"}, sizes={"ref": 1_000, "big": 3_000})
    assert _remaining_row(page, "big") == "| demo | big | no | 1 | 0 | not measured | ≈ 6.0 (1 job, from ref) |"
    assert ("Remaining: 1 jobs; the 0 priced ones ≈ 0 CPU-hours on this tier's settings; 1 jobs have no measured "
            "job of their kind yet. Scaled estimate, apart from that total: 1 of these 1 ≈ 6.0 CPU-hours; "
            "0 have no reference dataset or no known size.") in page


def test_reference_is_the_recorded_dataset_with_most_known_interactions(tmp_path):
    # a: 1,000 interactions at 2 h; b: 2,000 at 1 h (mean of 0.5 and 1.5); c: more hours but no known size.
    # The reference is b: 1 x 3,000 / 2,000 = 1.5 (from a it would be 6.0).
    runs = [_record(tmp_path, "a", 2.0), _record(tmp_path, "b", 0.5), _record(tmp_path, "b", 1.5, seed=1),
            _record(tmp_path, "c", 100.0), _run("big"), _run("big", seed=1)]
    page = compute_markdown(compute_table(runs, tmp_path), {}, sizes={"a": 1_000, "b": 2_000, "big": 3_000})
    assert _remaining_row(page, "big").endswith("| not measured | ≈ 3.0 (2 jobs, from b) |")  # 2 jobs x 1.5


def test_no_reference_or_no_size_leaves_the_scaled_cell_blank(tmp_path):
    other = "results/paper/other/runs/big/mf_bpr_wd0/seed0/metrics.json"  # a paper with no record at all
    runs = [_record(tmp_path, "ref", 2.0),
            _run("unsized"),  # reference, but the target's size is unknown
            other]
    page = compute_markdown(compute_table(runs, tmp_path), {}, sizes={"ref": 1_000, "big": 3_000})
    assert _remaining_row(page, "unsized") == "| demo | unsized | no | 1 | 0 | not measured |  |"
    assert "| other | big | no | 1 | 0 | not measured |  |" in page.splitlines()
    assert "Scaled estimate" not in page


def test_a_family_never_recorded_is_scaled_from_its_papers_mean(tmp_path):
    # ials has no record anywhere: the paper's mean on its largest recorded dataset, (2 + 4) / 2 = 3 h on
    # "ref" (1,000 interactions), scaled to 3,000 -> 9.0 ("small", 500 interactions, is not the reference)
    runs = [_record(tmp_path, "ref", 2.0), _record(tmp_path, "ref", 4.0, method="mf_ssm_wd0"),
            _record(tmp_path, "small", 50.0), _run("big", method="ials")]
    page = compute_markdown(compute_table(runs, tmp_path), {}, sizes={"ref": 1_000, "small": 500, "big": 3_000})
    assert _remaining_row(page, "big") == "| demo | big | no | 1 | 0 | not measured | ≈ 9.0 (1 job, from ref) |"


def test_a_total_too_small_to_round_reads_less_than(tmp_path):
    runs = [_record(tmp_path, "ref", 0.001), _run("big")]
    page = compute_markdown(compute_table(runs, tmp_path), {}, sizes={"ref": 1_000, "big": 3_000})
    assert _remaining_row(page, "big") == "| demo | big | no | 1 | 0 | not measured | < 0.01 (1 job, from ref) |"


def test_scaled_estimates_never_change_the_measured_prices(tmp_path):
    runs = [_record(tmp_path, "ref", 2.0), _run("ref", seed=1), _run("big")]
    frame = compute_table(runs, tmp_path)
    unscaled = compute_markdown(frame, {"ref": "mirror"}, sizes={})
    scaled = compute_markdown(frame, {"ref": "mirror"}, sizes={"ref": 1_000, "big": 3_000})
    measured = ("Remaining: 2 jobs; the 1 priced ones ≈ 2.00 CPU-hours on this tier's settings; 1 jobs have no "
                "measured job of their kind yet.")
    assert measured in unscaled and measured in scaled
    # the priced job on its own dataset gets no scaled estimate; the unpriced one stays unpriced
    assert _remaining_row(scaled, "ref") == _remaining_row(unscaled, "ref") == \
        "| demo | ref | yes | 1 | 1 | 2.00 |  |"
    assert _remaining_row(scaled, "big") == "| demo | big | no | 1 | 0 | not measured | ≈ 6.0 (1 job, from ref) |"


def test_queue_labels_a_scaled_estimate(tmp_path):
    runs = [_record(tmp_path, "ref", 2.0), _run("big")]
    page = compute_markdown(compute_table(runs, tmp_path), {"ref": "mirror", "big": "mirror"},
                            sizes={"ref": 1_000, "big": 3_000})
    assert ("| 3: figure sweeps and unpublished runs | demo | big | 1 | not measured; scaled ≈ 6.0 (1 job, from ref) | "
            "`mf_bpr_wd0` |") in page


def test_gpu_records_are_priced_apart_from_cpu_records(tmp_path):
    runs = [_record(tmp_path, "ref", 2.0),
            _record(tmp_path, "ref", 10.0, seed=1, device="cuda:0", device_name="NVIDIA H100"),
            _run("ref", seed=2)]
    page = compute_markdown(compute_table(runs, tmp_path), {"ref": "mirror"}, sizes={})
    # with the GPU record averaged in, the job would be priced at (2 + 10) / 2 = 6.00
    assert "| demo | ref | yes | 1 | 1 | 2.00 |  |" in page
    assert "| demo | ref | 1 | 2.00 | 1.00 | 2.00 | 100 | cpu |" in page
    assert "| demo | ref | 1 | 10.00 | 1.00 | 10.00 | 100 | NVIDIA H100 |" in page
    assert "1 records ran on a GPU (NVIDIA H100)" in page and "No GPU-hours are measured yet" not in page
    assert "Recorded: 2 of 3 paper-tier jobs, 2.00 CPU-hours; 1 of them on a GPU, 1.00 GPU-hours" in page


def test_cpu_only_records_say_no_gpu_hours_are_measured(tmp_path):
    page = compute_markdown(compute_table([_record(tmp_path, "ref", 2.0)], tmp_path), {}, sizes={})
    assert "No GPU-hours are measured yet: the device of every record is `cpu`" in page
    assert "Recorded: 1 of 1 paper-tier jobs, 2.00 CPU-hours." in page


def test_gpu_records_give_a_gpu_hour_estimate_for_every_job_not_run(tmp_path):
    # GPU record: wall 1 h on "ref" (1,000 interactions); jobs not run: one on "ref" (priced on CPU at
    # 2.00) and one on "big" (3,000): GPU-hours 1 x 1 = 1.0 and 1 x 3 = 3.0, total 4.0
    runs = [_record(tmp_path, "ref", 2.0),
            _record(tmp_path, "ref", 5.0, seed=1, device="cuda", device_name="NVIDIA H100"),
            _run("ref", seed=2), _run("big")]
    page = compute_markdown(compute_table(runs, tmp_path), {"ref": "mirror"}, sizes={"ref": 1_000, "big": 3_000})
    assert "| demo | ref | yes | 1 | 1 | 2.00 |  | ≈ 1.0 (1 job, from ref) |" in page
    assert "| demo | big | no | 1 | 0 | not measured | ≈ 6.0 (1 job, from ref) | ≈ 3.0 (1 job, from ref) |" in page
    assert "On one GPU: 2 of the 2 ≈ 4.0 GPU-hours (scaled, as above)." in page
    # the queue (data here: "ref" only) gives the same GPU estimate per row
    assert "| 3: figure sweeps and unpublished runs | demo | ref | 1 | 2.00 | ≈ 1.0 (1 job, from ref) | `mf_bpr_wd0` |" \
        in page
    # without GPU records the Remaining table keeps its seven columns
    cpu_only = compute_markdown(compute_table(runs[:1] + runs[2:], tmp_path), {"ref": "mirror"},
                                sizes={"ref": 1_000, "big": 3_000})
    assert "on one GPU (GPU-hours)" not in cpu_only and "On one GPU:" not in cpu_only
    assert "| 3: figure sweeps and unpublished runs | demo | ref | 1 | 2.00 | `mf_bpr_wd0` |" in cpu_only
    assert _remaining_row(cpu_only, "big").count("|") == 8


def test_a_tuned_picks_other_seeds_queue_with_the_published_cells_other_seeds(tmp_path):
    # the tier's seeds are 0 and 1; seed 0's grid ran (so the first seed left to run is 1)
    published = {(PAPER, "ref", "mf_ssm_tunedwd"), (PAPER, "ref", "mf_ssm_prism")}
    runs = [_record(tmp_path, "ref", 1.0, method="mf_ssm_wd1em4", seed=0),
            _record(tmp_path, "ref", 1.0, method="mf_ssm_wd0", seed=0),
            _run("ref", "mf_ssm_prism", seed=0), _run("ref", "mf_ssm_prism", seed=1),
            _run("ref", "mf_ssm_wd1em4", seed=1), _run("ref", "mf_ssm_wd0", seed=1), _run("ref", "mf_bpr_wd0", seed=1)]
    frame = compute_table(runs, tmp_path)
    method_seed = list(zip(frame["method"], frame["run_dir"].str[-1]))
    picked = {(PAPER, "ref", "mf_ssm_wd1em4")}
    assert dict(zip(method_seed, queue_priority(frame, published, picked))) == {
        ("mf_ssm_wd1em4", "0"): 1, ("mf_ssm_wd0", "0"): 1, ("mf_ssm_prism", "0"): 1,
        ("mf_ssm_prism", "1"): 2, ("mf_ssm_wd1em4", "1"): 2,  # the pick's other seed
        ("mf_ssm_wd0", "1"): 3, ("mf_bpr_wd0", "1"): 3}      # another λ's other seed: a figure sweep
    # with no pick known, every grid run on another seed is a sweep
    assert queue_priority(frame, published).tolist() == [1, 1, 1, 2, 3, 3, 3]


def test_validation_grid_points_and_the_runs_at_their_picks_queue_first(tmp_path):
    runs = [_run("ref", "fedrap_code-g07", seed=0), _run("ref", "fedmf_pool_tuned", seed=2),
            _run("ref", "mf_ssm_prism", seed=0), _run("ref", "fedrap_code", seed=0), _run("ref", "fedrap_code-g7", seed=0)]
    frame = compute_table(runs, tmp_path)
    published = {(PAPER, "ref", "mf_ssm_prism")}
    got = dict(zip(frame["method"], queue_priority(frame, published)))
    # a grid point needs two digits (fedrap_code-g7 is not one); a README-flag run is an ordinary sweep
    assert got == {"fedrap_code-g07": 0, "fedmf_pool_tuned": 0, "mf_ssm_prism": 1, "fedrap_code": 3,
                   "fedrap_code-g7": 3}


def test_the_queue_puts_the_picks_other_seeds_second(tmp_path, monkeypatch):
    import recrepro.reporting.compute_page as compute

    monkeypatch.setattr(compute, "_published_cells", lambda papers: {(PAPER, "ref", "mf_ssm_tunedwd")})
    runs = [_record(tmp_path, "ref", 1.0, method="mf_ssm_wd1em4", seed=0),
            _run("ref", "mf_ssm_wd1em4", seed=1), _run("ref", "mf_ssm_wd0", seed=1)]
    page = compute_markdown(compute_table(runs, tmp_path), {"ref": "mirror"}, sizes={},
                            picked_runs=[_run("ref", "mf_ssm_wd1em4", 0)])
    assert "| 2: published cells and claimed runs, other seeds | demo | ref | 1 | 1.00 | `mf_ssm_wd1em4` (seed 1) |" in page
    assert "| 3: figure sweeps and unpublished runs | demo | ref | 1 | 1.00 | `mf_ssm_wd0` |" in page


def test_a_run_is_priced_by_its_own_methods_other_seeds_before_its_family(tmp_path):
    # family mf_bpr on "ref": wd1em6 seed 0 took 5 h, wd1em2 seed 0 took 1 h (family mean 3 h).
    # Not run: wd1em6 seed 1 -> its method's 5 h, not 3; wd1em4 seed 0 (no record of its method) -> 3 h.
    runs = [_record(tmp_path, "ref", 5.0, method="mf_bpr_wd1em6"), _record(tmp_path, "ref", 1.0, method="mf_bpr_wd1em2"),
            _run("ref", method="mf_bpr_wd1em6", seed=1), _run("ref", method="mf_bpr_wd1em4")]
    frame = compute_table(runs, tmp_path)
    page = compute_markdown(frame, {"ref": "mirror"}, sizes={"ref": 1_000})
    assert "| demo | ref | 2 | 8.00 |" in page  # the queue's row: 5 + 3
    assert _remaining_row(page, "ref") == "| demo | ref | yes | 2 | 2 | 8.00 |  |"


def test_the_released_fedrap_code_curves_are_queued_with_their_rounds_left(tmp_path):
    from recrepro.reporting.compute_page import OFFICIAL_ROUNDS, official_lines

    assert official_lines([]) == []
    curve = tmp_path / "ml-100k_ml1m_seed2.jsonl"
    curve.write_text("".join(f'{{"round": {a}}}\n' for a in range(1, 5)))
    text = "\n".join(official_lines([curve]))
    assert "## Outside the workflow" in text
    assert f"| `ml-100k_ml1m_seed2.jsonl` | 4 | {OFFICIAL_ROUNDS - 4} |" in text
    assert "--flags ml1m --seed 2" in text and "data/splits/ml-100k/fedrap/leave_one_out/seed0" in text


def test_runs_a_claim_names_queue_first_on_their_first_seed(tmp_path):
    # a claim compares lambdaopt_dui with lambdafix on ref (and lambdaopt_* on any dataset):
    # their first seed is 0, their other seeds join the published cells' other seeds (2)
    runs = [_run("ref", "lambdaopt_dui", seed=0), _run("ref", "lambdaopt_dui", seed=1),
            _run("ref", "lambdafix", seed=0), _run("other", "lambdafix", seed=0),
            _run("other", "lambdaopt_du", seed=0), _run("ref", "neumf", seed=0)]
    frame = compute_table(runs, tmp_path)
    claimed = {(PAPER, "ref", "lambdaopt_dui"), (PAPER, "ref", "lambdafix"), (PAPER, "*", "lambdaopt_*")}
    got = dict(zip(zip(frame["dataset"], frame["method"], frame["run_dir"].str[-1]),
                   queue_priority(frame, set(), claimed=claimed)))
    assert got == {("ref", "lambdaopt_dui", "0"): 0, ("ref", "lambdaopt_dui", "1"): 2, ("ref", "lambdafix", "0"): 0,
                   ("other", "lambdafix", "0"): 3,  # the check names ref only
                   ("other", "lambdaopt_du", "0"): 0, ("ref", "neumf", "0"): 3}


def test_the_claimed_runs_come_from_the_expected_files_checks():
    from recrepro.reporting.compute_page import _claimed_runs

    claimed = _claimed_runs(paper_keys())
    assert ("lambdaopt", "ml-100k", "lambdaopt_dui") in claimed and ("lambdaopt", "amazon-video", "lambdafix") in claimed
    assert any(p == "fedrap" and m == "fedmf_tuned" for p, _, m in claimed)
    # F1's "fedrap_pool" is the stand-in the check reads only while fedrap_pool_tuned has no records
    assert not any(p == "fedrap" and m == "fedrap_pool" for p, _, m in claimed)
    # the N(0, 0.01²) switch runs sit beside the claims, not in them: a figure sweep
    assert not any(m.startswith("lambdafix_init") for _, _, m in claimed)


def _strong_grid(root: Path, dataset: str, model: str, split_seed: int = 0, point_seconds=(600.0, 1200.0),
                 runs: dict[str, tuple[float, float]] | None = None, write: bool = True) -> str:
    """A tuned baseline's job (``grid.json``: its points' seconds; its test runs' wall and CPU seconds)."""
    path = f"results/paper/baselines/strong/{dataset}/proto/split_a/{model}/split{split_seed}/grid.json"
    if write:
        split_dir = (root / path).parent
        split_dir.mkdir(parents=True)
        runs = runs or {"seed0": (1800.0, 3600.0)}
        (split_dir / "grid.json").write_text(json.dumps({
            "points": [{"point": i, "seconds": s} for i, s in enumerate(point_seconds)], "runs": list(runs)}))
        for name, (wall, cpu) in runs.items():
            (split_dir / name).mkdir()
            (split_dir / name / "provenance.json").write_text(json.dumps({
                "wall_seconds": wall, "cpu_seconds": cpu, "threads": {"torch_num_threads": 1},
                "peak_rss_mb": 50.0, "device": "cpu"}))
    return path


def test_a_tuned_baselines_job_is_priced_from_its_grid_and_test_runs_and_queued_first(tmp_path):
    # wall: 600 + 1200 (grid) + 1800 + 900 (two test runs) = 4500 s = 1.25 h; CPU: the last run's 5400 s = 1.5 h
    done = _strong_grid(tmp_path, "ds", "ials", runs={"seed0": (1800.0, 3600.0), "seed1": (900.0, 5400.0)})
    todo = [_strong_grid(tmp_path, "ds", "ials", split_seed=s, write=False) for s in (123, 246)]
    frame = compute_table([done, *todo, _run("ds")], tmp_path)
    strong = frame[frame["paper"] == "strong"].reset_index(drop=True)
    assert strong["method"].tolist() == ["ials · split_a"] * 3 and strong["recorded"].tolist() == [True, False, False]
    assert strong.loc[0, "wall_hours"] == 1.25 and strong.loc[0, "cpu_hours"] == 1.5
    assert queue_priority(frame, set()).tolist() == [0, 0, 0, 3]
    page = compute_markdown(frame, {"ds": "mirror"})
    assert "| strong | ds | 1 | 1.50 | 1.25 | 1.50 |" in page  # Recorded: jobs, CPU-h, wall h, mean
    # the two splits not run are priced at the recorded split's 1.5 CPU-hours each, and named as splits
    assert "| strong | ds | yes | 2 | 2 | 3.00 |" in page
    assert "`ials · split_a` (splits 123, 246)" in page
    # on a dataset with no record of the job, no scaled estimate: a tuned baseline is not linear in interactions
    big = [_strong_grid(tmp_path, "big", "ease", write=False)]
    page = compute_markdown(compute_table([done, *big], tmp_path), {"ds": "mirror"}, sizes={"ds": 10, "big": 1_000})
    assert "| strong | big | no | 1 | 0 | not measured |  |" in page
    # a grid record outside the strong layout is not a job
    assert compute_table(["results/paper/baselines/strong/ds/grid.json"], tmp_path).empty


def test_a_job_priced_from_its_datasets_other_methods_is_counted_apart(tmp_path):
    # "ref": one mf_bpr_wd0 record of 2 CPU-hours. A second seed of it is priced from its own method (2.0);
    # an ials job (no ials record, no ials family on "ref") only from the dataset's other methods (2.0)
    runs = [_record(tmp_path, "ref", 2.0), _run("ref", seed=1), _run("ref", method="ials")]
    page = compute_markdown(compute_table(runs, tmp_path), {"ref": "mirror"}, sizes={})
    assert _remaining_row(page, "ref") == "| demo | ref | yes | 2 | 2 (1 from other methods' jobs) | 4.00 |  |"
    # one of its own method's records: nothing to flag
    runs = [_record(tmp_path / "b", "ref", 2.0), _run("ref", seed=1)]
    page = compute_markdown(compute_table(runs, tmp_path / "b"), {"ref": "mirror"}, sizes={})
    assert _remaining_row(page, "ref") == "| demo | ref | yes | 1 | 1 | 2.00 |  |"


def test_method_families_join_a_grids_points_its_pick_and_its_pool():
    import pandas as pd

    from recrepro.reporting.compute_page import method_family

    names = ["fedmf-g03", "fedmf_tuned", "fedmf_pool_tuned", "fedmf", "fedrap_code-g21", "fedrap_code_pool_tuned",
             "fedrap_tuned", "mf_bpr_wd1em6", "mf_directau_prism_a025", "mf_directau_tunedwd", "exadmm_sw3",
             "fedrap_code_pool_ml1m", "lambdaopt_dui_init001"]
    assert method_family(pd.Series(names)).tolist() == [
        "fedmf", "fedmf", "fedmf", "fedmf", "fedrap_code", "fedrap_code",
        # the paper objective stays apart from the released code's mode: their steps cost differently
        "fedrap", "mf_bpr", "mf_directau_prism", "mf_directau_tunedwd", "exadmm",
        "fedrap_code_ml1m", "lambdaopt_dui_init001"]


def test_a_family_new_to_a_dataset_is_priced_by_its_cost_ratios_elsewhere(tmp_path):
    # "slow" costs 6 and 12 times "fast" on a and b (geometric mean 8.485...); on c only "fast" ran, at 0.5 h:
    # by the ratios slow costs 0.5 x sqrt(6 x 12) = 4.24 h there, where c's mean (0.5) would say 0.50
    runs = [_record(tmp_path, "a", 1.0, method="fast"), _record(tmp_path, "a", 6.0, method="slow"),
            _record(tmp_path, "b", 0.5, method="fast"), _record(tmp_path, "b", 6.0, method="slow"),
            _record(tmp_path, "c", 0.5, method="fast"), _run("c", method="slow")]
    page = compute_markdown(compute_table(runs, tmp_path), {}, sizes={})
    assert _remaining_row(page, "c") == "| demo | c | no | 1 | 1 (1 by cost ratios) | 4.24 |  |"
    # with no family beside it elsewhere, the dataset's mean prices it, and says so
    runs = [_record(tmp_path / "x", "c", 0.5, method="fast"), _run("c", method="slow")]
    page = compute_markdown(compute_table(runs, tmp_path / "x"), {}, sizes={})
    assert _remaining_row(page, "c") == "| demo | c | no | 1 | 1 (1 from other methods' jobs) | 0.50 |  |"


def test_a_job_timed_in_part_is_priced_from_its_own_rounds_until_it_has_a_record(tmp_path):
    # "slow" costs 6 times "fast" on a, so by the ratio it would cost 3 h on c; its own rounds, timed on c
    # (180 s each, 100 of them), say 5 h: they win, and the row says so
    runs = [_record(tmp_path, "a", 1.0, method="fast"), _record(tmp_path, "a", 6.0, method="slow"),
            _record(tmp_path, "c", 0.5, method="fast"), _run("c", method="slow"), _run("c", method="slow", seed=1)]
    timed = [{"paper": PAPER, "dataset": "c", "methods": ["sl*"], "cpu_seconds_per_step": 180.0, "steps": 100,
              "measured": "x", "source": "y"}]
    page = compute_markdown(compute_table(runs, tmp_path), {}, sizes={}, partial=timed)
    assert _remaining_row(page, "c") == "| demo | c | no | 2 | 2 (2 timed in part) | 10.00 |  |"
    assert _remaining_row(compute_markdown(compute_table(runs, tmp_path), {}, sizes={}, partial=[]), "c") == \
        "| demo | c | no | 2 | 2 (2 by cost ratios) | 6.00 |  |"
    # another dataset's or paper's measurement prices nothing here
    for other in ({"dataset": "a"}, {"paper": "prism"}):
        page = compute_markdown(compute_table(runs, tmp_path), {}, sizes={}, partial=[{**timed[0], **other}])
        assert _remaining_row(page, "c") == "| demo | c | no | 2 | 2 (2 by cost ratios) | 6.00 |  |"
    # once a seed has its record, the method's own records price the rest
    runs[3] = _record(tmp_path, "c", 4.0, method="slow")
    page = compute_markdown(compute_table(runs, tmp_path), {}, sizes={}, partial=timed)
    assert _remaining_row(page, "c") == "| demo | c | no | 1 | 1 | 4.00 |  |"


def test_the_packaged_partial_timings_load_and_bad_ones_are_refused(tmp_path):
    import pytest

    from recrepro.reporting.compute_page import ComputeRatesError, partial_rates

    packaged = partial_rates()
    ease = [e for e in packaged if e["paper"] == "strong" and e["dataset"] == "gowalla"]
    assert ease and ease[0]["methods"] == ["ease · *"]
    assert 0.5 < ease[0]["cpu_seconds_per_step"] * ease[0]["steps"] / 3600 < 1.5   # hours a job, as measured
    good = {"paper": "p", "dataset": "d", "methods": ["m"], "cpu_seconds_per_step": 1, "steps": 2,
            "measured": "x", "source": "y"}
    for bad, message in (({**good, "steps": 0}, "'steps' must be a positive number"),
                         ({**good, "methods": []}, "'methods' must be a non-empty list"),
                         ({k: v for k, v in good.items() if k != "source"}, "needs exactly the keys")):
        path = tmp_path / "rates.yaml"
        path.write_text(json.dumps({"partial": [bad]}))
        with pytest.raises(ComputeRatesError, match=message):
            partial_rates(path)
    assert partial_rates(tmp_path / "absent.yaml") == []


def test_a_record_assembled_from_its_grid_points_is_priced_by_its_points(tmp_path):
    # λOpt's MF-λFix one job per λ: the points are the jobs, the assembly costs nothing, and a point is
    # not priced as the whole grid's one job (ml-100k's lambdafix, 8 h here)
    def lo(dataset, method, seed=0):
        return f"results/paper/lambdaopt/runs/{dataset}/s/{method}/seed{seed}/metrics.json"

    def rec(dataset, method, hours):
        path = lo(dataset, method)
        (tmp_path / path).parent.mkdir(parents=True)
        (tmp_path / path).write_text("{}")
        (tmp_path / path).with_name("provenance.json").write_text(json.dumps({
            "wall_seconds": 3600.0, "cpu_seconds": hours * 3600, "threads": {"torch_num_threads": 1},
            "peak_rss_mb": 100.0, "device": "cpu", "device_name": None}))
        return path

    runs = [rec("small", "lambdafix", 8.0), rec("small", "dui", 1.0), rec("big", "dui", 2.0),
            rec("big", "lambdafix-g00", 0.5), lo("big", "lambdafix-g01"), lo("big", "lambdafix")]
    frame = compute_table(runs, tmp_path)
    assert set(frame.loc[frame["method"].str.contains("-g"), "family"]) == {"lambdafix_point"}
    page = compute_markdown(frame, {}, sizes={})
    row = next(line for line in page.splitlines() if line.startswith("| lambdaopt | big | ") and line.count("|") == 8)
    # g01 at g00's cost (its family's), the assembly at 0: not 16 h by the ratio to dui
    assert row == "| lambdaopt | big | no | 2 | 2 | 0.50 |  |"
    # once assembled: its own cost (not its history's epoch seconds, which are its points'), and it prices
    # no other dataset's one-job lambdafix (that stays ml-100k's family cost, 8 h, by the ratio)
    fix = tmp_path / lo("big", "lambdafix")
    fix.parent.mkdir(parents=True)
    fix.write_text("{}")
    fix.with_name("provenance.json").write_text(json.dumps({
        "wall_seconds": 2.0, "cpu_seconds": 3.0, "threads": {"torch_num_threads": 1}, "device": "cpu",
        "grid_points": [{"run": "lambdafix-g00"}, {"run": "lambdafix-g01"}],
        "timings": {"history.parquet": {"seconds": [3600.0] * 5}}}))
    runs += [rec("other", "dui", 1.0), lo("other", "lambdafix")]
    frame = compute_table(runs, tmp_path)
    assembled = frame[(frame["dataset"] == "big") & (frame["method"] == "lambdafix") & frame["recorded"]]
    assert assembled["assembled"].all() and float(assembled["cpu_hours"].iloc[0]) * 3600 == 3.0
    assert not assembled["pieces_estimated"].any()
    page = compute_markdown(frame, {}, sizes={})
    row = next(line for line in page.splitlines() if line.startswith("| lambdaopt | other | ") and line.count("|") == 8)
    # by the ratio to dui on small alone (8 × 1 h); with big's assembly beside it, about 0.06 h
    assert row == "| lambdaopt | other | no | 1 | 1 (1 by cost ratios) | 8.00 |  |"


def test_a_resumed_tuned_baselines_job_adds_the_cpu_of_the_points_an_earlier_process_scored(tmp_path):
    # points 0 and 1 scored by a killed process (CPU 500 s; the second has no cpu_seconds: its wall 1200 s
    # × 1 thread), point 2 and the test by the last one, whose provenance measures 3600 CPU-s
    path = _strong_grid(tmp_path, "ds", "ease", point_seconds=(600.0, 1200.0, 300.0))
    grid_path = tmp_path / path
    grid = json.loads(grid_path.read_text())
    grid["points"][0]["cpu_seconds"] = 500.0
    grid["resumed_points"] = [0, 1]
    grid_path.write_text(json.dumps(grid))
    row = compute_table([path], tmp_path).iloc[0]
    assert row["cpu_hours"] == (3600.0 + 500.0 + 1200.0) / 3600
    assert row["wall_hours"] == (600.0 + 1200.0 + 300.0 + 1800.0) / 3600


def test_a_reconstructed_form_counts_as_data_here_only_for_the_protocols_it_serves(tmp_path):
    # the mirror holds ML-1M as (user, movie) pairs only: PRISM's loader reads them, FedRAP's split
    # needs timestamps; a baseline's path names the protocol whose data it needs
    runs = [_record(tmp_path, "ml-100k", 1.0, method="fedrap_code"),
            "results/paper/fedrap/runs/ml-1m/leave_one_out/fedrap_code/seed0/metrics.json",
            "results/paper/prism/runs/ml-1m/random_ratio/mf_bpr_wd0/seed123/metrics.json",
            "results/paper/baselines/runs/ml-1m/prism/random_ratio/mostpop/seed123/metrics.json",
            "results/paper/baselines/runs/ml-1m/fedrap/leave_one_out/mostpop/seed0/metrics.json"]
    frame = compute_table(runs, tmp_path)
    assert frame.set_index("paper").loc[["prism"], "protocol"].tolist()[0] == "prism"
    page = compute_markdown(frame, {"ml-100k": "mirror", "ml-1m": "form:pairs"}, sizes={})
    assert "| fedrap | ml-1m | no | 1 |" in page
    assert "| prism | ml-1m | yes | 1 |" in page
    assert "| baselines | ml-1m | for 1 of 2 jobs | 2 |" in page
    queue = page.split("## Queue")[1]
    assert "| prism | ml-1m |" in queue and "| fedrap | ml-1m |" not in queue
    assert "`mostpop`" in queue.split("| baselines | ml-1m |")[1].split("\n")[0]
    # with the canonical files every protocol has its data
    page = compute_markdown(frame, {"ml-100k": "mirror", "ml-1m": "mirror"}, sizes={})
    assert "| fedrap | ml-1m | yes | 1 |" in page and "| baselines | ml-1m | yes | 2 |" in page
