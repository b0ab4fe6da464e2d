"""Helpers of ``workflow/rules/prism*.smk``: which runs, figures and tables a tier builds.

Every function takes the (validated) Snakemake ``config`` and a tier name.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from recrepro.papers.prism.methods import method_name, parse_method, table_arms

__all__ = [
    "EXTRA_FIGURES", "PICK_LR_FIGURES", "alias_records", "alpha_lr", "alpha_methods", "alpha_sweep_arg", "alpha_sweep_runs", "all_runs", "has_alpha_sweep", "entries", "every_run", "fig1_methods", "fig2_runs", "figure_runs", "figure_spec",
    "lr_search_arg", "lr_search_runs", "picked_runs", "runs", "searched_lrs", "selection_runs", "table_methods", "table_runs", "targets", "theory_args", "tier_conf", "tuned_dirs",
]

# Figs. 3-11 drawn by the generic ``prism_figure`` rule (Fig. 7 has its own, data-free rule).
EXTRA_FIGURES = ("fig3_batched_wd", "fig3_magnitudes", "fig4_epochs", "fig5_alpha", "fig6_curves", "fig8_lightgcn",
                 "fig9_debias", "fig10_ssm_mawu", "fig11_nlmf")
DEFAULT_ALPHAS = (0.0, 0.25, 0.5, 0.75, 1.0)
#: Figures whose PRISM α points run at the learning rate of Table 1's PRISM pick of MF + DirectAU
#: (:func:`alpha_lr`): their runs are known once the ``prism_select_wd`` checkpoint has picked.
PICK_LR_FIGURES = ("fig4_epochs", "fig5_alpha")


def tier_conf(config: Mapping[str, Any], tier: str) -> Mapping[str, Any]:
    return config["prism"]["tiers"][tier]


def entries(config: Mapping[str, Any], tier: str) -> Iterator[tuple[str, str, str, list[int]]]:
    """(dataset, protocol, split, seeds) of the tier's data entries with protocol ``prism``."""
    for entry in config["tiers"][tier]["data"]:
        if entry["protocol"] == "prism":
            yield entry["dataset"], entry["protocol"], entry["split"], list(entry.get("seeds", [0]))


def entry(config: Mapping[str, Any], tier: str, dataset: str) -> tuple[str, str, str, list[int]]:
    for item in entries(config, tier):
        if item[0] == dataset:
            return item
    raise ValueError(f"no prism data entry for {dataset} in tier {tier}")


def run(config: Mapping[str, Any], tier: str, dataset: str, method: str, seed: int) -> str:
    _, protocol, split, _ = entry(config, tier, dataset)
    return f"results/{tier}/prism/runs/{dataset}/{protocol}/{split}/{method}/seed{seed}/metrics.json"


def runs(config: Mapping[str, Any], tier: str, dataset: str, methods: list[str]) -> list[str]:
    seeds = entry(config, tier, dataset)[3]
    return [run(config, tier, dataset, m, s) for m in methods for s in seeds]


def fig1_methods(config: Mapping[str, Any], tier: str) -> list[str]:
    conf = tier_conf(config, tier)
    return [method_name(conf["backbone"], loss, weight_decay=wd)
            for loss in conf["figure1_losses"] for wd in conf["weight_decays"]]


def fig2_runs(config: Mapping[str, Any], tier: str, dataset: str) -> tuple[list[str], list[str]]:
    """Panel titles and runs of Fig. 2 (first seed; λ = magnitude_wd and λ = 0 per loss).

    In the paper's panel order: (a) with weight decay, then (b) without; the losses left to right.
    """
    conf = tier_conf(config, tier)
    seed = entry(config, tier, dataset)[3][0]
    titles, paths = [], []
    for wd in (conf["magnitude_wd"], 0.0):
        for loss in conf["figure1_losses"]:
            titles.append(f"{loss}, wd {wd:g}")
            paths.append(run(config, tier, dataset, method_name(conf["backbone"], loss, weight_decay=wd), seed))
    return titles, paths


def fig2_titles_arg(config: Mapping[str, Any], tier: str, dataset: str) -> list[str]:
    """Fig. 2's panel titles, one command-line word each (the rule quotes them: ``{params.titles:q}``)."""
    return list(fig2_runs(config, tier, dataset)[0])


def table_methods(config: Mapping[str, Any], tier: str) -> list[str]:
    conf = tier_conf(config, tier)
    table = conf["table"]
    methods: list[str] = []
    for backbone in table["backbones"]:
        for loss in table["losses"]:
            methods.append(method_name(backbone, loss, alpha=table.get("alpha", 1.0)))
            methods += [method_name(backbone, loss, weight_decay=wd) for wd in conf["weight_decays"]]
    return list(dict.fromkeys(methods))


def searched_lrs(config: Mapping[str, Any], tier: str, backbone: str) -> list[float | None]:
    """Table 1's learning rates of ``backbone``: ``None`` (the tier's ``lr``) and, where
    ``table.lr_search`` names the backbone, its ``lrs``."""
    search = tier_conf(config, tier)["table"].get("lr_search") or {}
    extra = [float(x) for x in search.get("lrs", [])] if backbone in search.get("backbones", []) else []
    return [None, *extra]


def lr_search_arg(config: Mapping[str, Any], tier: str) -> dict[str, list[float]]:
    """``{backbone: [extra lrs]}`` of the table's backbones with a learning-rate search (the
    ``--lr-search`` of ``recrepro prism select-wd`` and ``table``)."""
    table = tier_conf(config, tier)["table"]
    return {b: lrs[1:] for b in table["backbones"] if len(lrs := searched_lrs(config, tier, b)) > 1}


def grid_methods(config: Mapping[str, Any], tier: str) -> list[str]:
    """Table 1's coupled weight-decay grid: every (backbone, loss) at every λ of ``weight_decays`` and
    every searched learning rate (:func:`searched_lrs`), and PRISM at every learning rate where one
    is searched (its pick over them; the tier-lr run is also :func:`prism_methods`', on every seed)."""
    conf = tier_conf(config, tier)
    table = conf["table"]
    out = []
    for b in table["backbones"]:
        extra = searched_lrs(config, tier, b)[1:]
        for l in table["losses"]:
            wd_arm, prism_arm = table_arms(b, l, conf["weight_decays"], table.get("alpha", 1.0), extra)
            out += list(wd_arm)
            if extra:  # PRISM's pick over the learning rates, its tier-lr run among them
                out += list(prism_arm)
    return out


def prism_methods(config: Mapping[str, Any], tier: str) -> list[str]:
    """Table 1's PRISM column: every (backbone, loss) with PRISM init (α), no weight decay."""
    table = tier_conf(config, tier)["table"]
    return [method_name(b, l, alpha=table.get("alpha", 1.0)) for b in table["backbones"] for l in table["losses"]]


def diagnostic_methods(config: Mapping[str, Any], tier: str) -> list[str]:
    """Table 1's diagnostic runs: each ``diagnostic_backbones`` × loss in the PRISM column."""
    table = tier_conf(config, tier)["table"]
    return [method_name(b, l, alpha=table.get("alpha", 1.0)) for b in table.get("diagnostic_backbones", [])
            for l in table["losses"]]


def selection_seeds(config: Mapping[str, Any], tier: str, dataset: str) -> list[int]:
    """Seeds whose validation scores pick the tuned λ: the first seed (``table.select_on: first_seed``,
    the default: the grid multiplies the cost, so the other seeds run at the pick only) or all."""
    seeds = entry(config, tier, dataset)[3]
    return seeds[:1] if tier_conf(config, tier)["table"].get("select_on", "first_seed") == "first_seed" else seeds


def selection_runs(config: Mapping[str, Any], tier: str, dataset: str) -> list[str]:
    """The grid runs the tuned-λ selection reads."""
    return [run(config, tier, dataset, m, s) for m in grid_methods(config, tier)
            for s in selection_seeds(config, tier, dataset)]


def lr_search_runs(config: Mapping[str, Any], tier: str, dataset: str) -> list[str]:
    """The learning-rate search table's runs: the selection's grid runs of the backbones whose learning
    rate is searched (:func:`lr_search_arg`)."""
    searched = lr_search_arg(config, tier)
    return [run(config, tier, dataset, m, s) for m in grid_methods(config, tier)
            if parse_method(m)["backbone"] in searched for s in selection_seeds(config, tier, dataset)]


def table_runs(config: Mapping[str, Any], tier: str, dataset: str, chosen: Mapping[str, str]) -> list[str]:
    """Table 1's runs: the selection grid, the chosen λ (``chosen``: ``<backbone>_<loss>`` -> method)
    at every seed, and PRISM at every seed."""
    seeds = entry(config, tier, dataset)[3]
    out = selection_runs(config, tier, dataset)
    out += [run(config, tier, dataset, m, s) for m in chosen.values() for s in seeds]
    out += runs(config, tier, dataset, prism_methods(config, tier))
    out += [run(config, tier, dataset, m, s) for m in diagnostic_methods(config, tier) for s in seeds[:1]]
    return list(dict.fromkeys(out))


def tuned_dirs(config: Mapping[str, Any], tier: str) -> list[str]:
    table = tier_conf(config, tier)["table"]
    return [f"results/{tier}/prism/tuned/{dataset}/{b}_{l}_tunedwd/seed{s}"
            for dataset, _, _, seeds in entries(config, tier)
            for b in table["backbones"] for l in table["losses"] for s in seeds]


def all_runs(config: Mapping[str, Any], tier: str) -> list[str]:
    """Fig. 1's runs and Table 1's selection grid and PRISM runs (the tuned λ's other seeds are
    known only once the selection ran: the ``prism_select_wd`` checkpoint adds them)."""
    out: list[str] = []
    for dataset, _, _, _ in entries(config, tier):
        out += runs(config, tier, dataset, fig1_methods(config, tier))
        out += table_runs(config, tier, dataset, {})
    return list(dict.fromkeys(out))


def every_run(config: Mapping[str, Any], tier: str) -> list[str]:
    """Every run record the tier's PRISM jobs make: :func:`all_runs` and the runs of Figs. 3-11
    (their first ``figure_seeds`` seeds), so that the compute page prices the whole DAG."""
    out = all_runs(config, tier)
    searched = bool(lr_search_arg(config, tier))
    for dataset, _, _, _ in entries(config, tier):
        for fig in extra_figures(config, tier):
            # with a learning-rate search the α points' runs are known only once it has picked (picked_runs)
            if not (searched and fig in PICK_LR_FIGURES):
                out += figure_runs(config, tier, dataset, fig)
    return list(dict.fromkeys(out))


def picked_runs(config: Mapping[str, Any], tier: str, chosen: Mapping[str, Mapping[str, str]]) -> list[str]:
    """The run records of the tuned-λ picks at every seed.

    ``chosen``: dataset -> ``<backbone>_<loss>`` -> picked method (the ``chosen`` of each
    dataset's weight-decay selection). The compute page queues the picks' other seeds with the
    published cells' other seeds; the grid's other λ on those seeds are only figure sweeps. With them,
    the α sweep at the PRISM pick's learning rate (:func:`alpha_sweep_runs`), every seed, where the
    tier draws Fig. 4 or Fig. 5.
    """
    out = [path for dataset, picks in chosen.items()
           for path in runs(config, tier, dataset, list(dict.fromkeys(picks.values())))]
    if any(fig in PICK_LR_FIGURES for fig in extra_figures(config, tier)):  # Fig. 4's α points are Fig. 5's
        out += [path for dataset, picks in chosen.items() for path in alpha_sweep_runs(config, tier, dataset, picks)]
    return list(dict.fromkeys(out))


def figure_seeds(config: Mapping[str, Any], tier: str, dataset: str) -> list[int]:
    """Seeds of Figs. 3-11: the entry's first ``figure_seeds`` seeds (default: all)."""
    seeds = entry(config, tier, dataset)[3]
    count = tier_conf(config, tier).get("figure_seeds")
    return seeds if count is None else seeds[: int(count)]


def _wd_spec(conf: Mapping[str, Any], backbone: str, losses: list[str], batched: bool = False) -> dict[str, Any]:
    return {"kind": "wd", "backbone": backbone, "losses": losses,
            "weight_decays": [float(w) for w in conf["weight_decays"]], "batched": batched}


def alpha_lr(chosen: Mapping[str, str] | None, backbone: str = "mf", loss: str = "directau") -> float | None:
    """The learning rate of Table 1's PRISM pick of ``(backbone, loss)`` (``chosen``: the selection's picks),
    at which the α sweep runs; ``None`` (the tier's) where nothing was picked over learning rates."""
    pick = (chosen or {}).get(f"{backbone}_{loss}_prism")
    return parse_method(pick)["lr"] if pick else None


def alpha_methods(config: Mapping[str, Any], tier: str, lr: float | None) -> dict[float, str]:
    """α -> the MF + DirectAU + PRISM run at that α and learning rate ``lr`` (``None``: the tier's)."""
    alphas = [float(a) for a in tier_conf(config, tier).get("alphas", DEFAULT_ALPHAS)]
    return {a: method_name("mf", "directau", alpha=a, lr=lr) for a in alphas}


def alpha_sweep_runs(config: Mapping[str, Any], tier: str, dataset: str,
                     chosen: Mapping[str, str] | None) -> list[str]:
    """The α sweep's runs (claim P5's table): every α at the PRISM pick's learning rate, every seed."""
    return runs(config, tier, dataset, list(alpha_methods(config, tier, alpha_lr(chosen)).values()))


def has_alpha_sweep(config: Mapping[str, Any], tier: str) -> bool:
    """Whether the tier draws Fig. 5, so that each dataset has the α sweep's table and its α pick (claim P5)."""
    return "fig5_alpha" in extra_figures(config, tier)


def alpha_sweep_arg(config: Mapping[str, Any], tier: str, chosen: Mapping[str, str] | None) -> dict[str, Any]:
    """``recrepro prism alpha-sweep``'s ``--alphas`` (α as text -> run name) and ``--lr``."""
    lr = alpha_lr(chosen)
    return {"alphas": {f"{a:g}": m for a, m in alpha_methods(config, tier, lr).items()},
            "lr": float(tier_conf(config, tier)["lr"]) if lr is None else lr}


def figure_spec(config: Mapping[str, Any], tier: str, dataset: str, fig: str,
                chosen: Mapping[str, str] | None = None) -> tuple[dict[str, Any], list[str]]:
    """The drawing spec of ``fig`` (see :mod:`recrepro.papers.prism.figures`) and the methods it reads.

    ``chosen``: Table 1's picks (the selection's ``chosen``), which :data:`PICK_LR_FIGURES` read: their
    PRISM α points run at the PRISM pick's learning rate, and Fig. 4's tuned weight decay is Table 1's
    pick over the (λ, learning rate) grid (``mf_directau``), drawn on the figure's seeds.

    Settings coincide across figures wherever the paper's do, so runs are shared: Fig. 3's
    λ = 0 point is Fig. 1's DirectAU λ = 0 run, Fig. 4/5's α = 1 is Table 1's PRISM run,
    Fig. 6 reads the validation curves of Fig. 1's DirectAU runs, Fig. 9's BPR / DirectAU
    points are Fig. 1's runs at the weight decay chosen on validation.
    """
    conf = tier_conf(config, tier)
    wds = [float(w) for w in conf["weight_decays"]]
    seed = figure_seeds(config, tier, dataset)[0]
    mf = "mf"
    coupled = lambda loss: [method_name(mf, loss, weight_decay=w) for w in wds]  # noqa: E731
    if fig == "fig3_batched_wd":
        spec = _wd_spec(conf, mf, ["directau"], batched=True)
        methods = [method_name(mf, "directau", weight_decay=w, batched=True) for w in wds]
    elif fig == "fig3_magnitudes":
        mwd = float(conf["magnitude_wd"])
        panels = [[f"directau, batched wd {mwd:g}", method_name(mf, "directau", weight_decay=mwd, batched=True), seed],
                  ["directau, wd 0", method_name(mf, "directau"), seed]]
        spec = {"kind": "magnitudes", "panels": panels}
        methods = [p[1] for p in panels]
    elif fig in PICK_LR_FIGURES:
        lr = alpha_lr(chosen)
        named = {(f"α={a:g}" if fig == "fig4_epochs" else f"{a:g}"): m
                 for a, m in alpha_methods(config, tier, lr).items()}
        spec = {"kind": "epochs" if fig == "fig4_epochs" else "alpha", "alphas": named,
                "lr": float(conf["lr"]) if lr is None else lr}
        methods = list(named.values())
        if fig == "fig4_epochs":
            # Table 1's tuned weight decay (picked on the selection seed, the run P4 reads) where the
            # selection has picked; before, every λ at the tier's rate, picked on the figure's seeds
            pick = (chosen or {}).get(f"{mf}_directau")
            candidates = [pick] if pick else list(table_arms(mf, "directau", wds, 1.0, [])[0])
            spec["tuned_candidates"] = candidates
            methods += candidates
    elif fig == "fig6_curves":
        curves = [[f"λ = {w:g}", method_name(mf, "directau", weight_decay=w), seed] for w in wds]
        spec = {"kind": "curves", "curves": curves}
        methods = [c[1] for c in curves]
    elif fig == "fig8_lightgcn":
        spec = _wd_spec(conf, "lightgcn", ["directau"])
        methods = [method_name("lightgcn", "directau", weight_decay=w) for w in wds]
    elif fig == "fig9_debias":
        dwd = float(conf.get("debias", {}).get("weight_decay", 0.0))
        prism_alpha = float(conf.get("debias", {}).get("prism_alpha", 1.0))  # the paper does not say which α
        groups = {"BPR": coupled("bpr"), "DirectAU": coupled("directau"),
                  "PRISM + DirectAU": [method_name(mf, "directau", alpha=prism_alpha)],
                  **{label: [method_name(mf, loss, weight_decay=dwd)]
                     for label, loss in (("IPL", "ipl"), ("ReSN", "resn"), ("MACR", "macr"))}}
        spec = {"kind": "debias", "groups": groups}
        methods = [m for group in groups.values() for m in group]
    elif fig == "fig10_ssm_mawu":
        spec = _wd_spec(conf, mf, ["ssm", "mawu"])
        methods = coupled("ssm") + coupled("mawu")
    elif fig == "fig11_nlmf":
        spec = _wd_spec(conf, "nlmf", ["ssm", "directau", "mawu"])
        methods = [method_name("nlmf", loss, weight_decay=w) for loss in ("ssm", "directau", "mawu") for w in wds]
    else:
        raise ValueError(f"unknown PRISM figure {fig!r}; known: {EXTRA_FIGURES}")
    return spec, list(dict.fromkeys(methods))


def figure_runs(config: Mapping[str, Any], tier: str, dataset: str, fig: str,
                chosen: Mapping[str, str] | None = None) -> list[str]:
    """``metrics.json`` paths a figure reads: its methods × the figure seeds (``chosen``: :func:`figure_spec`'s)."""
    methods = figure_spec(config, tier, dataset, fig, chosen)[1]
    return [run(config, tier, dataset, m, s) for m in methods for s in figure_seeds(config, tier, dataset)]


def extra_figures(config: Mapping[str, Any], tier: str) -> list[str]:
    return list(tier_conf(config, tier).get("figures", EXTRA_FIGURES))


def theory_args(config: Mapping[str, Any], tier: str) -> list[str]:
    """Fig. 7's command-line arguments from the tier's ``theory`` block, one word each
    (the rule quotes them: ``{params.args:q}``)."""
    th = {"lr": 1e-3, "weight_decay": 1e-6, "norm": 1.0, "cosine": 0.9, "max_degree": 1e4,
          "batch_fractions": [1e-4, 1.0], **dict(tier_conf(config, tier).get("theory", {}))}
    lo, hi = th["batch_fractions"]
    return ["--lr", repr(float(th["lr"])), "--weight-decay", repr(float(th["weight_decay"])),
            "--norm", repr(float(th["norm"])), "--cosine", repr(float(th["cosine"])),
            "--max-degree", repr(float(th["max_degree"])), "--batch-fractions", repr(float(lo)), repr(float(hi))]


def dataset_summaries(config: Mapping[str, Any], tier: str) -> list[str]:
    """Each PRISM dataset's processed sizes and recipe, which the results page checks against Table 2
    (``recrepro data summary``; committed, so that a redraw needs no data)."""
    return [f"results/{tier}/prism/tables/dataset_stats_{dataset}.csv" for dataset, *_ in entries(config, tier)]


def targets(config: Mapping[str, Any], tier: str) -> list[str]:
    out: list[str] = []
    for dataset, _, _, _ in entries(config, tier):
        out += [f"results/{tier}/prism/figures/fig1_weight_decay_{dataset}.pdf",
                f"results/{tier}/prism/figures/fig2_magnitudes_{dataset}.pdf",
                f"results/{tier}/prism/tables/table1_{dataset}.md"]
        if lr_search_arg(config, tier):  # every (λ, lr) point of Table 1's learning-rate pick
            out.append(f"results/{tier}/prism/tables/lr_search_{dataset}.md")
        out += [f"results/{tier}/prism/figures/{fig}_{dataset}.pdf" for fig in extra_figures(config, tier)]
        if has_alpha_sweep(config, tier):  # the α sweep on every seed (claim P5)
            out.append(f"results/{tier}/prism/tables/alpha_sweep_{dataset}.md")
    out.append(f"results/{tier}/prism/figures/fig7_theorem31.pdf")
    out.append(f"results/{tier}/prism/scorecard.md")
    return out


#: How the HTML report lists PRISM's figures: the label sorts as text, so the numbers are padded
#: and the figures appear in the paper's order.
FIGURE_LABELS = {
    "fig1_weight_decay": "Fig. 01: NDCG@20 vs weight decay", "fig2_magnitudes": "Fig. 02: magnitude vs degree",
    "fig3_batched_wd": "Fig. 03a: batched weight decay", "fig3_magnitudes": "Fig. 03b: magnitudes, batched wd",
    "fig4_epochs": "Fig. 04: NDCG@20 vs epochs to early stop", "fig5_alpha": "Fig. 05: NDCG@20 vs PRISM α",
    "fig6_curves": "Fig. 06: training curves", "fig7_theorem31": "Fig. 07: Theorem 3.1",
    "fig8_lightgcn": "Fig. 08: LightGCN vs weight decay", "fig9_debias": "Fig. 09: debiasing",
    "fig10_ssm_mawu": "Fig. 10: SSM and MAWU vs weight decay", "fig11_nlmf": "Fig. 11: non-linear MF vs weight decay",
}


def report_labels(fig: str, dataset: str) -> dict[str, str]:
    """Labels of a PRISM figure in the HTML report (``report(..., labels=...)``)."""
    return {"figure": FIGURE_LABELS.get(fig, fig), "dataset": dataset}


# ----------------------------------------------------------------- what the shared workflow and tests read
# Every paper's rules.py defines these (docs/adding-a-paper.md): the compute page, the scorecard's
# seed count, the leak audit and the smoke checks' test read them through the registry, not a list.

#: The paper's smallest smoke-tier jobs' outputs: a second run must give byte-identical files
#: (tests/test_workflow.py).
SMALLEST_SMOKE_RUNS = ("results/smoke/prism/runs/synthetic/prism/random_ratio/mf_bpr_wd0/seed123/metrics.json",)
#: The training rules that ask for a GPU under ``--config device=cuda`` (tests/test_resources.py).
GPU_RULES = ("prism_train",)


def alias_records(config: Mapping[str, Any], tier: str) -> list[str]:
    """The tuned aliases the tier's tables write, as run-record paths (Table 1's ``<backbone>_<loss>_tunedwd``
    and, where it searches learning rates, ``_tunedprism``; the α sweep's ``mf_directau_tunedalpha``):
    names the claims may use before a record exists. They are copies, not jobs: never priced."""
    searched = lr_search_arg(config, tier)
    wd = [f"{d}/metrics.json" for d in tuned_dirs(config, tier)]
    # the PRISM arm's alias sits beside each searched backbone's tunedwd alias
    prism = [p.replace("_tunedwd/", "_tunedprism/") for p in wd if p.split("/")[-3].split("_")[0] in searched]
    alpha = [f"results/{tier}/prism/tuned_alpha/{dataset}/mf_directau_tunedalpha/seed{s}/metrics.json"
             for dataset, _, _, seeds in entries(config, tier) for s in seeds] if has_alpha_sweep(config, tier) else []
    return wd + prism + alpha


def run_records(config: Mapping[str, Any], tier: str) -> list[str]:
    """Every run record the tier's DAG makes for this paper (the compute page prices the missing ones)."""
    return every_run(config, tier)


def seeds_required(config: Mapping[str, Any], tier: str) -> int:
    """Seeds per cell in ``tier``: the seeds of the tier's first PRISM data entry."""
    seeds = [e.get("seeds", [0]) for e in config["tiers"][tier]["data"] if e["protocol"] == "prism"]
    return len(seeds[0]) if seeds else 1


def training_pools(variants: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, tuple[str, ...]]:
    """Negatives uniform over all items (``negatives: uniform``) or over the batch's positives
    (``in_batch``): nothing excluded."""
    return {"uniform over all items (none excluded)": ()}


def smoke_methods(config: Mapping[str, Any]) -> set[str]:
    """The methods the smoke tier gives the scorecard (the tuned-λ rows by their ``_tunedwd`` name)."""
    methods = {r.split("/")[-3] for r in all_runs(config, "smoke")}
    return methods | {d.split("/")[-2].split("_tunedwd")[0] + "_tunedwd" for d in tuned_dirs(config, "smoke")}
