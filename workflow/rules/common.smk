import json
import os
import re
import shlex
import sys
import time
from pathlib import Path

from snakemake.utils import min_version

min_version("9.0")

sys.path.insert(0, str(Path(workflow.basedir) / "src"))
from recrepro.config import prepare_config  # noqa: E402
from recrepro.io import check_committed_present  # noqa: E402

# One short ConfigError (key, path, what is allowed, "did you mean") instead of Snakemake's
# validate(), whose message repeats the whole schema and config. prepare_config also nests
# dotted keys (--config data.mirror=...), types the strings a nested --config value arrives
# as ('data={allow_download: false}'), fills the schema's defaults and cross-checks.
_prepared = prepare_config(dict(config))
config.clear()
config.update(_prepared)

TIER = config["tier"]
FROM_RECORDS = bool(config.get("from_records", False))
DATA = config["data"]["root"]
# Per-epoch/round checkpoints of running jobs: a killed job resumes from its own (git-ignored).
CHECKPOINTS = config["checkpoints"]
TIER_CONF = config["tiers"][TIER]
# Threads per job: the tier's own `threads` over the top-level one (the smoke tier's tiny tables
# gain nothing from a second thread, and a 2-thread job on 2 cores runs alone: docs/performance.md).
JOB_THREADS = TIER_CONF.get("threads", config["threads"])
SRC = str(Path(workflow.basedir) / "src")


def expected_digest(paper):
    """sha256 of the paper's published numbers (``src/recrepro/expected/<paper>.yaml``).

    The scorecard rules take it as a param, so an edit reruns them, and the scorecard command
    reads the file from the package itself: as an input its path (this checkout's) would be
    listed in the HTML report, which is made to be shared.
    """
    from recrepro.io import sha256_file

    return sha256_file(Path(SRC) / "recrepro" / "expected" / f"{paper}.yaml")


def _python():
    """The interpreter rules run: the conda env's under --sdm conda, else the one running Snakemake."""
    try:
        from snakemake.settings.types import DeploymentMethod

        if DeploymentMethod.CONDA in workflow.deployment_settings.deployment_method:
            return "python"
    except (ImportError, AttributeError):
        pass
    return shlex.quote(sys.executable)


def _job_shell_prefix():
    """Strict bash, then the command every rule's shell line calls: ``recrepro``.

    ``recrepro ...`` (``recrepro data ...``, ``recrepro <paper> <verb> ...``, ``recrepro report
    ...``) runs the package's command line (``recrepro.cli.main``) with this checkout's package first
    on the path (whether or not it is pip-installed) and the interpreter of :func:`_python`. It
    lives in the shell prefix, not in the rules' params, because ``snakemake --report`` shows
    every job's params and the report must not carry the user's interpreter and paths (issue
    26). The prefix is built again wherever the Snakefile is parsed (a SLURM node parses it for
    its job) and, under ``--sdm conda``, runs after the environment is activated.
    """
    path = f"PYTHONPATH={shlex.quote(SRC)}${{PYTHONPATH:+:$PYTHONPATH}}"
    prefix = (
        f'set -euo pipefail; recrepro() {{ {path} {_python()} -m recrepro "$@"; }}; '
    )
    # shell.prefix() formats its text like a shell command: braces must be doubled
    return prefix.replace("{", "{{").replace("}", "}}")


shell.prefix(_job_shell_prefix())
ENV_CPU = "../../envs/cpu.yaml"

# Per-job resources for cluster submission (profiles/slurm), from the dataset's size: every rule's
# `resources:` uses these (kinds and formulas: recrepro.runtime.resources.estimate), scaled by `attempt`.
from recrepro.runtime.resources import dataset_size, estimate  # noqa: E402

# device: auto asks the scheduler for no GPU (the job uses one if its node has it); cuda asks for one.
GPU_JOBS = str(config["device"]).startswith("cuda")
# Under --sdm conda with device: cuda, every rule's `conda: ENV_CPU` gets the CUDA build of torch.
if GPU_JOBS:
    ENV_CPU = "../../envs/gpu.yaml"


def _job_estimate(kind, wildcards, attempt, dataset=None, **kwargs):
    wc = dict(wildcards.items()) if wildcards is not None else {}
    size = dataset_size(dataset or wc.get("dataset"), config, DATA, wc.get("protocol"))
    return estimate(
        kind,
        size,
        attempt=attempt,
        batch_size=config["evaluation"]["batch_size"],
        gpu=GPU_JOBS and kind == "train",
        **kwargs,
    )


def res_mem_mb(kind, dataset=None, **kwargs):
    """`mem_mb=` of a rule's resources (MB, times the attempt)."""
    return lambda wildcards, attempt: _job_estimate(
        kind, wildcards, attempt, dataset, **kwargs
    )["mem_mb"]


def res_runtime(kind, dataset=None, **kwargs):
    """`runtime=` of a rule's resources (minutes, times the attempt)."""
    return lambda wildcards, attempt: _job_estimate(
        kind, wildcards, attempt, dataset, **kwargs
    )["runtime"]


# FedRAP's private item tables: the budget under which a job keeps them in RAM
def _check_budget_datasets():
    from recrepro.config import ConfigError
    from recrepro.datasets import DATASETS

    unknown = sorted(
        set(config.get("fedrap", {}).get("memory_budget_mb_by_dataset") or {})
        - set(DATASETS)
    )
    if unknown:
        raise ConfigError(
            f"fedrap/memory_budget_mb_by_dataset: unknown dataset {unknown[0]!r} "
            f"(known: {', '.join(sorted(DATASETS))})"
        )


_check_budget_datasets()


def fedrap_memory_budget(dataset):
    """MB under which a job keeps its private tables in RAM: the dataset's own, else the default."""
    fedrap = config.get("fedrap", {})
    by_dataset = fedrap.get("memory_budget_mb_by_dataset") or {}
    return by_dataset.get(dataset, fedrap.get("memory_budget_mb", 2048))


def fedrap_train_estimate(key):
    """`mem_mb=` / `runtime=` of a training job: the private-table budget is its own buffer."""
    return lambda wc, attempt: _job_estimate(
        "train", wc, attempt, extra_mb=fedrap_memory_budget(wc.dataset)
    )[key]


def strong_tune_estimate(key):
    """`mem_mb=` / `runtime=` of a strong-baseline job: the model's own fit on top (EASE: items²)."""

    def value(wc, attempt):
        import recrepro.baselines.strong as strong

        size = dataset_size(wc.dataset, config, DATA, wc.protocol)
        fixed = strong.tune_params(config, *strong.job_key(wc))["fixed"]
        extra = strong.fit_memory_mb(wc.model, fixed, size.items)
        return _job_estimate("evaluate", wc, attempt, extra_mb=extra)[key]

    return value


def res_gpu(kind="train"):
    """`gpu=`: 1 for torch training jobs when `device: cuda` (SLURM: --gpus=1), else 0 (none asked)."""
    return 1 if GPU_JOBS and kind == "train" else 0


# The synthetic dataset is generated, every other one is fetched.
wildcard_constraints:
    dataset=r"[a-z0-9][a-z0-9\-]*",
    protocol=r"[a-z][a-z0-9_]*",
    split=r"[a-z_]+",
    seed=r"\d+",
    method=r"[a-z][a-z0-9_]*(-g[0-9][0-9]+)?",  # -gNN: a validation-grid point (fedrap tuning)
    tier=r"smoke|paper",


def data_entries():
    """The (dataset, protocol, split, seed, params) this tier builds."""
    for entry in TIER_CONF["data"]:
        for seed in entry.get("seeds", [0]):
            yield entry["dataset"], entry["protocol"], entry["split"], seed, entry.get(
                "params", {}
            )


def split_dir(dataset, protocol, split, seed):
    return f"{DATA}/splits/{dataset}/{protocol}/{split}/seed{seed}"


def split_params(wildcards):
    for dataset, protocol, split, seed, params in data_entries():
        if (dataset, protocol, split, str(seed)) == (
            wildcards.dataset,
            wildcards.protocol,
            wildcards.split,
            wildcards.seed,
        ):
            return params
    return {}


def raw_marker(wildcards):
    if wildcards.dataset == "synthetic":
        return f"{DATA}/raw/synthetic/interactions.parquet"
    return f"{DATA}/raw/{wildcards.dataset}/fetch.json"


def as_json(obj):
    """A JSON argument (rules quote it in the shell line: ``{params.x:q}``)."""
    return json.dumps(obj, sort_keys=True)


def baseline_runs(tier=TIER):
    for dataset, protocol, split, seed, _ in data_entries():
        for method in TIER_CONF.get("baselines", []):
            yield f"results/{tier}/baselines/runs/{dataset}/{protocol}/{split}/{method}/seed{seed}/metrics.json"


def paper_rules(paper):
    """The paper's ``rules`` module (``recrepro.papers.<paper>.rules``): what its rules read."""
    import importlib

    return importlib.import_module(f"recrepro.papers.{paper}.rules")


def seeds_required(paper, tier=TIER):
    """Seeds per cell of ``paper`` in ``tier`` (the scorecard calls fewer a cap)."""
    return paper_rules(paper).seeds_required(config, tier)


def tier_run_records(tier):
    """Every run record the tier's DAG makes (the compute page prices the missing ones)."""
    from recrepro.paperlist import paper_keys

    runs = list(baseline_runs(tier))
    for paper in paper_keys():
        runs += paper_rules(paper).run_records(config, tier)
    import recrepro.baselines.strong as strong

    # the tuned simple baselines: one job per model and split (its grid record)
    runs += [
        grid
        for paper in strong.papers(config, tier)
        for grid in strong.grid_records(config, tier, paper)
    ]
    return runs


def tier_alias_records(tier):
    """The tuned aliases the tier's tables write (a paper's ``rules.alias_records``, where it has one):
    names a claim may use before their records exist, never jobs."""
    from recrepro.paperlist import paper_keys

    out = []
    for paper in paper_keys():
        aliases = getattr(paper_rules(paper), "alias_records", None)
        out += aliases(config, tier) if aliases is not None else []
    return out


def prism_selections(tier):
    """Each PRISM dataset's tuned-λ selection file (the prism_select_wd checkpoint's output).

    In a redraw only the datasets with a selection in the records: the others have no grid runs.
    """
    out = []
    for dataset, _, _, _ in prism_wf.entries(config, tier):
        path = f"results/{tier}/prism/tables/wd_selection_{dataset}.json"
        if not FROM_RECORDS or Path(path).is_file():
            out.append(
                checkpoints.prism_select_wd.get(tier=tier, dataset=dataset).output[0]
            )
    return out


def prism_tuned_alpha(tier):
    """The α sweep's pick folders (``mf_directau_tunedalpha``, written by prism_alpha_sweep) the PRISM scorecard
    reads: every dataset with a selection where the tier sweeps α; in a redraw, those whose sweep table
    the records drew (the others have no α run)."""
    if not prism_wf.has_alpha_sweep(config, tier):
        return []
    out = []
    for dataset, _, _, _ in prism_wf.entries(config, tier):
        if not recorded(prism_wf.selection_runs(config, tier, dataset)):
            continue
        if (
            FROM_RECORDS
            and not Path(
                f"results/{tier}/prism/tables/alpha_sweep_{dataset}.md"
            ).is_file()
        ):
            continue
        out.append(f"results/{tier}/prism/tuned_alpha/{dataset}")
    return out


def prism_picked_runs(tier):
    """The tuned-λ picks' run records at every seed (read once the selections exist)."""
    chosen = {}
    for path in prism_selections(tier):
        dataset = Path(path).stem.removeprefix("wd_selection_")
        chosen[dataset] = json.loads(Path(path).read_text())["chosen"]
    return prism_wf.picked_runs(config, tier, chosen)


def prism_chosen(wildcards):
    """Table 1's tuned-λ pick of the dataset (the prism_select_wd checkpoint's output)."""
    path = checkpoints.prism_select_wd.get(
        tier=wildcards.tier, dataset=wildcards.dataset
    ).output[0]
    return json.loads(Path(path).read_text())["chosen"]


def prism_chosen_read(wildcards):
    """prism_chosen for a params function: the picks read from the selection file, which is among the
    job's inputs (a job's params are taken once its inputs exist); None before (a dry run's listing).
    """
    path = Path(
        f"results/{wildcards.tier}/prism/tables/wd_selection_{wildcards.dataset}.json"
    )
    return json.loads(path.read_text())["chosen"] if path.is_file() else None


def prism_figure_chosen(wildcards, params=False):
    """Table 1's picks where the PRISM figure reads them (its α points at the PRISM pick's learning
    rate: prism_wf.PICK_LR_FIGURES), else None (no dependence on the selection). ``params``: for a
    params function (prism_chosen_read), else for an input function (the checkpoint)."""
    if wildcards.fig not in prism_wf.PICK_LR_FIGURES:
        return None
    return prism_chosen_read(wildcards) if params else prism_chosen(wildcards)


def recorded(paths):
    """The run records among ``paths`` (a path or a list).

    Normally every path is asked for (and made by its training rule). With from_records=true
    there are no training rules: a figure or table is drawn from the records that exist, and
    the scorecard marks the missing ones ``not_run``; a missing record that git tracks is refused
    (``check_committed_present``: deleted by accident, not dropped with ``git rm``).
    """
    if not FROM_RECORDS:
        return paths
    # a record git tracks but deleted by accident is refused, naming it (not silently not_run)
    check_committed_present([paths] if isinstance(paths, str) else list(paths))
    if isinstance(paths, str):
        return paths if Path(paths).exists() else []
    return [p for p in paths if Path(p).exists()]


def _drawn(target):
    """A figure/table target exists on disk (its PDF or its PNG sibling)."""
    path = Path(target)
    return path.exists() or path.with_suffix(".png").exists()


# Each paper's .smk file registers its default targets for the current tier here.
PAPER_TARGETS = {}


def _output_targets():
    """Every figure, table, scorecard and page of the tier (each paper's default targets)."""
    targets = [
        f"results/{TIER}/baselines/scorecard.md",
        f"results/{TIER}/baselines/figures/baselines.pdf",
    ]
    for paper_targets in PAPER_TARGETS.values():
        targets += list(paper_targets)
    return targets


def _is_figure(target):
    """A figure target: the PDF under a ``figures/`` folder (its PNG sibling is drawn with it)."""
    path = Path(target)
    return "figures" in path.parts and path.suffix == ".pdf"


def all_targets():
    if FROM_RECORDS:
        # Redraw what the records drew before: every figure, table and scorecard of the tier
        # that exists under results/<tier>/ (one file: ask for it as the target).
        return [t for t in _output_targets() if _drawn(t)]
    targets = [
        f"{split_dir(d, p, s, seed)}/manifest.json"
        for d, p, s, seed, _ in data_entries()
    ]
    targets += list(baseline_runs())
    return targets + _output_targets()


def tier_figures():
    """Every figure (PDF) the tier's workflow draws, drawn yet or not: the reference page names
    the ones a redraw from records could not draw."""
    return [str(t) for t in _output_targets() if _is_figure(t)]


def readme_shown_files():
    """The figures (PNG) and tables of this tier that ``results/<tier>/README.md`` shows.

    The page lists what is on disk when it is written, so it must wait for every figure and table
    job: otherwise a redraw could write it while a figure is being replaced and leave that out.
    """
    shown = []
    for target in all_targets():
        path = Path(target)
        if _is_figure(target):
            shown.append(str(path.with_suffix(".png")))
        elif "tables" in path.parts and path.suffix == ".md":
            shown.append(target)
    return shown


# A redraw is the point of from_records: every figure, table and scorecard job in the DAG runs even
# where its output looks up to date (a clean clone's file times say nothing about what is newer).
# Each of those rules takes REDRAW as an input: in from_records mode a stamp touched right now.
REDRAW = []
if FROM_RECORDS:
    _stamp = Path("logs/redraw.stamp")
    _stamp.parent.mkdir(parents=True, exist_ok=True)
    # new content each time: Snakemake skips an input that is newer but has the recorded checksum
    _stamp.write_text(f"{time.time_ns()}\n")
    REDRAW = [str(_stamp)]


def strong_baselines_csv(tier, paper):
    """The paper's tuned-simple-baselines table, if the tier has a protocol for it (its scorecard shows it)."""
    import recrepro.baselines.strong as strong

    if paper not in strong.papers(config, tier):
        return []
    if FROM_RECORDS and not recorded(strong.grid_records(config, tier, paper)):
        return []  # a redraw draws it from records: none yet
    return [f"results/{tier}/{paper}/tables/strong_baselines.csv"]


# Leak audit (recrepro.papers.leaks): per split a paper's trainers use, whether a held-out pair can
# reach training, as a positive or by never being drawn as a negative; each claims page opens with
# its paper's rows. Made where the data are here and committed, so a redraw from records reads them.
def leak_audit_paper(dataset, protocol):
    """The paper whose trainers a split serves (recrepro.papers.leaks.paper_of)."""
    from recrepro.papers.leaks import paper_of

    return paper_of(dataset, protocol)


def leak_audits(tier):
    return [
        f"results/{tier}/leak_audit/{d}/{p}/{s}/seed{seed}.json"
        for d, p, s, seed, _ in data_entries()
        if leak_audit_paper(d, p)
    ]


def fedrap_negative_pools(tier):
    """The negative_pool values FedRAP's variants of the tier train under."""
    conf = config.get("fedrap", {})
    variants = conf.get("variants", {})
    used = conf.get("tiers", {}).get(tier, {}).get("variants", [])
    default = conf.get("negative_pool", "train")
    return sorted(
        {variants.get(v, {}).get("negative_pool", default) for v in used} or {default}
    )
