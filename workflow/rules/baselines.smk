# Reference baselines (MostPopular, Random) on every split of the tier, their
# scorecard and figure. They anchor every paper's table and check the metric code.


localrules:
    baselines_scorecard,
    baselines_figure,


rule baselines_scorecard:
    input:
        redraw=REDRAW,
        runs=lambda wc: recorded(list(baseline_runs(wc.tier))),
    output:
        md="results/{tier}/baselines/scorecard.md",
        csv="results/{tier}/baselines/scorecard.csv",
    log:
        "logs/baselines/{tier}/scorecard.log",
    benchmark:
        "logs/benchmarks/baselines/{tier}/scorecard.tsv"
    conda:
        ENV_CPU
    threads: 1
    resources:
        mem_mb=res_mem_mb("light"),
        runtime=res_runtime("light"),
    params:
        expected=expected_digest("baselines"),
    shell:
        "recrepro scorecard --paper baselines --tier {wildcards.tier:q} "
        "--expected-sha256 {params.expected:q} "
        "--out-md {output.md:q} --out-csv {output.csv:q} "
        "{input.runs:q} > {log:q} 2>&1"


rule baselines_figure:
    input:
        redraw=REDRAW,
        runs=lambda wc: recorded(list(baseline_runs(wc.tier))),
    output:
        pdf="results/{tier}/baselines/figures/baselines.pdf",
        png=report(
            "results/{tier}/baselines/figures/baselines.png",
            caption="../report/baselines.rst",
            category="Baselines",
            subcategory="Figures",
            labels={"figure": "MostPopular and Random on every split"},
        ),
    log:
        "logs/baselines/{tier}/figure.log",
    benchmark:
        "logs/benchmarks/baselines/{tier}/figure.tsv"
    conda:
        ENV_CPU
    threads: 1
    resources:
        mem_mb=res_mem_mb("light"),
        runtime=res_runtime("light"),
    shell:
        "recrepro figure-baselines --tier {wildcards.tier:q} --out-pdf {output.pdf:q} "
        "--out-png {output.png:q} {input.runs:q} > {log:q} 2>&1"
