# Strong simple baselines (issue 48): each paper's table from the grid records
# (recrepro strong table). The tuning jobs are in strong_runs.smk.


localrules:
    strong_table,


import recrepro.baselines.strong as strong_wf
from recrepro.paperlist import data_protocol_keys

PAPER_TARGETS["strong"] = [
    f"results/{TIER}/{paper}/tables/strong_baselines.md"
    for paper in strong_wf.papers(config, TIER)
]


rule strong_table:
    input:
        redraw=REDRAW,
        grids=lambda wc: recorded(strong_wf.grid_records(config, wc.tier, wc.paper)),
    output:
        md="results/{tier}/{paper}/tables/strong_baselines.md",
        csv="results/{tier}/{paper}/tables/strong_baselines.csv",
    log:
        "logs/strong/{tier}/{paper}/table.log",
    benchmark:
        "logs/benchmarks/strong/{tier}/{paper}/table.tsv"
    wildcard_constraints:
        paper="|".join(data_protocol_keys()),
    conda:
        ENV_CPU
    threads: 1
    resources:
        mem_mb=res_mem_mb("light"),
        runtime=res_runtime("light"),
    params:
        protocols=lambda wc: as_json(
            strong_wf.table_protocols(config, wc.tier, wc.paper)
        ),
        title=lambda wc: f"{wc.paper}: tuned strong simple baselines",
        # the published references printed under a block (expected/strong.yaml): an edit redraws
        references=expected_digest("strong"),
        root=lambda wc: f"results/{wc.tier}",
    shell:
        "recrepro strong table --protocols {params.protocols:q} --results-root {params.root:q} "
        "--title {params.title:q} --out-md {output.md:q} --out-csv {output.csv:q} "
        "{input.grids:q} > {log:q} 2>&1"
