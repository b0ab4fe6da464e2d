# Paper: lrs (AMHT-LRS, Pal et al., arXiv 2210.03505; issue 8).
# All experiments are synthetic and of our own design (docs/deviations.md#lrs-experiments):
# one sweep job per experiment (all seeds), one job drawing the figures, the acceptance runs
# (run records) per seed and their scorecard against our thresholds (expected/lrs.yaml).

# the figures' sweeps, the acceptance runs and the targets: recrepro.papers.lrs.rules
from recrepro.papers.lrs.rules import (
    ACCEPTANCE_RUNS as LRS_ACCEPTANCE_RUNS,
    FIGURE_SWEEPS as LRS_EXPERIMENTS,
    acceptance_records as lrs_acceptance_records,
    targets as lrs_targets,
)

LRS_TIERS = config.get("lrs", {}).get("tiers", {})


localrules:
    lrs_scorecard,


rule lrs_figures:
    input:
        **{
            figure: f"results/{{tier}}/lrs/sweeps/{experiment}.parquet"
            for figure, experiment in LRS_EXPERIMENTS.items()
        },
        redraw=REDRAW,
    output:
        **{
            f"{figure}_pdf": f"results/{{tier}}/lrs/figures/{figure}.pdf"
            for figure in LRS_EXPERIMENTS
        },
        **{
            f"{figure}_png": report(
                f"results/{{tier}}/lrs/figures/{figure}.png",
                caption="../report/lrs_figures.rst",
                category="AMHT-LRS",
                subcategory="Figures",
                labels={"figure": f"Fig. {figure[3]}: {figure[5:].replace('_', ' ')}"},
            )
            for figure in LRS_EXPERIMENTS
        },
    log:
        "logs/lrs/{tier}/figures.log",
    benchmark:
        "logs/benchmarks/lrs/{tier}/figures.tsv"
    conda:
        ENV_CPU
    threads: 1
    resources:
        mem_mb=res_mem_mb("light"),
        runtime=res_runtime("light"),
    params:
        rows=lambda wc, input: [f"{k}={v}" for k, v in input.items() if k != "redraw"],
        out_dir="results/{tier}/lrs/figures",
    shell:
        "OMP_NUM_THREADS={threads:q} recrepro lrs figures "
        "--tier {wildcards.tier:q} --out-dir {params.out_dir:q} {params.rows:q} > {log:q} 2>&1"


# Fig. 6 (ML-100K, our design) from its rows: the rows need the data (rule lrs_ml100k), the figure
# only the committed rows, so a redraw from records draws it too.
rule lrs_ml100k_figure:
    input:
        rows="results/{tier}/lrs/sweeps/ml100k.parquet",
        redraw=REDRAW,
    output:
        pdf="results/{tier}/lrs/figures/fig6_ml100k.pdf",
        png=report(
            "results/{tier}/lrs/figures/fig6_ml100k.png",
            caption="../report/lrs_ml100k.rst",
            category="AMHT-LRS",
            subcategory="Figures",
            labels={"figure": "Fig. 6: ML-100K (our design)"},
        ),
    log:
        "logs/lrs/{tier}/fig6_ml100k.log",
    benchmark:
        "logs/benchmarks/lrs/{tier}/fig6_ml100k.tsv"
    conda:
        ENV_CPU
    threads: 1
    resources:
        mem_mb=res_mem_mb("light"),
        runtime=res_runtime("light"),
    params:
        out_dir="results/{tier}/lrs/figures",
    shell:
        "OMP_NUM_THREADS={threads:q} recrepro lrs figures "
        "--tier {wildcards.tier:q} --out-dir {params.out_dir:q} fig6_ml100k={input.rows:q} > {log:q} 2>&1"


rule lrs_scorecard:
    input:
        redraw=REDRAW,
        runs=lambda wc: lrs_acceptance_records(config, wc.tier),
    output:
        md="results/{tier}/lrs/scorecard.md",
        csv="results/{tier}/lrs/scorecard.csv",
    log:
        "logs/lrs/{tier}/scorecard.log",
    benchmark:
        "logs/benchmarks/lrs/{tier}/scorecard.tsv"
    conda:
        ENV_CPU
    threads: 1
    resources:
        mem_mb=res_mem_mb("light"),
        runtime=res_runtime("light"),
    params:
        expected=expected_digest("lrs"),
        seeds=lambda wc: seeds_required("lrs", wc.tier),
    shell:
        "recrepro scorecard --paper lrs --tier {wildcards.tier:q} "
        "--expected-sha256 {params.expected:q} "
        "--seeds-required {params.seeds:q} "
        "--out-md {output.md:q} --out-csv {output.csv:q} {input.runs:q} > {log:q} 2>&1"


PAPER_TARGETS["lrs"] = lrs_targets(config, TIER)
