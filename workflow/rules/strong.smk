# Strong simple baselines (issue 48): each paper's table from the grid records
# (recrepro strong table). The tuning jobs are in strong_runs.smk.


localrules:
    strong_table,


def strong_tier(tier):
    return config.get("strong_baselines", {}).get("tiers", {}).get(tier, {})


def strong_entry(tier, dataset, protocol, split):
    for entry in strong_tier(tier).get("protocols", []):
        if (entry["dataset"], entry["protocol"], entry["split"]) == (
            dataset,
            protocol,
            split,
        ):
            return entry
    raise ValueError(
        f"no strong_baselines protocol {dataset}/{protocol}/{split} in {tier}"
    )


def strong_evaluation(entry):
    """The protocol's evaluation section: a name under evaluation.splits, or the section itself."""
    evaluation = entry["evaluation"]
    if isinstance(evaluation, str):
        return dict(config["evaluation"]["splits"][evaluation])
    return dict(evaluation)


def strong_models(tier, entry):
    """Model -> {grid, fixed}: the tier's models, with the protocol's own overrides."""
    return {**strong_tier(tier).get("models", {}), **entry.get("models", {})}


def strong_model(wc):
    entry = strong_entry(wc.tier, wc.dataset, wc.protocol, wc.split)
    return strong_models(wc.tier, entry)[wc.model]


def strong_papers(tier):
    return list(
        dict.fromkeys(e["paper"] for e in strong_tier(tier).get("protocols", []))
    )


def strong_grids(tier, paper):
    return [
        f"results/{tier}/baselines/strong/{e['dataset']}/{e['protocol']}/{e['split']}/{m}/split{s}/grid.json"
        for e in strong_tier(tier).get("protocols", [])
        if e["paper"] == paper
        for m in strong_models(tier, e)
        for s in e["split_seeds"]
    ]


def strong_protocols(tier, paper):
    return {
        f"{e['dataset']}/{e['split']}": {
            "metrics": e["metrics"],
            "paper_method": e.get("paper_method"),
        }
        for e in strong_tier(tier).get("protocols", [])
        if e["paper"] == paper
    }


PAPER_TARGETS["strong"] = [
    f"results/{TIER}/{paper}/tables/strong_baselines.md"
    for paper in strong_papers(TIER)
]


rule strong_table:
    input:
        redraw=REDRAW,
        grids=lambda wc: recorded(strong_grids(wc.tier, wc.paper)),
    output:
        md="results/{tier}/{paper}/tables/strong_baselines.md",
        csv="results/{tier}/{paper}/tables/strong_baselines.csv",
    log:
        "logs/strong/{tier}/{paper}/table.log",
    benchmark:
        "logs/benchmarks/strong/{tier}/{paper}/table.tsv"
    wildcard_constraints:
        paper="exadmm|prism|lambdaopt|fedrap",
    conda:
        ENV_CPU
    threads: 1
    resources:
        mem_mb=res_mem_mb("light"),
        runtime=res_runtime("light"),
    params:
        protocols=lambda wc: as_json(strong_protocols(wc.tier, wc.paper)),
        title=lambda wc: f"{wc.paper}: tuned strong simple baselines",
        root=lambda wc: f"results/{wc.tier}",
    shell:
        "recrepro strong table --protocols {params.protocols:q} --results-root {params.root:q} "
        "--title {params.title:q} --out-md {output.md:q} --out-csv {output.csv:q} "
        "{input.grids:q} > {log:q} 2>&1"
