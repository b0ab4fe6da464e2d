# Reference baselines (MostPopular, Random) on every split of the tier, their
# scorecard and figure. They anchor every paper's table and check the metric code.


localrules:
    baselines_scorecard,
    baselines_figure,


rule baselines_scorecard:
    input:
        redraw=REDRAW,
        runs=lambda wc: recorded(list(baseline_runs(wc.tier))),
        expected=f"{EXPECTED}/baselines.yaml",
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
        cli=RECREPRO,
    shell:
        "{params.cli} scorecard --paper baselines --tier {wildcards.tier} --expected {input.expected} "
        "--out-md {output.md} --out-csv {output.csv} {input.runs} > {log} 2>&1"


rule baselines_figure:
    input:
        redraw=REDRAW,
        runs=lambda wc: recorded(list(baseline_runs(wc.tier))),
    output:
        pdf=report(
            "results/{tier}/baselines/figures/baselines.pdf",
            caption="../report/baselines.rst",
            category="Baselines",
        ),
        png="results/{tier}/baselines/figures/baselines.png",
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
    params:
        cli=RECREPRO,
    shell:
        "{params.cli} figure-baselines --tier {wildcards.tier} --out-pdf {output.pdf} "
        "--out-png {output.png} {input.runs} > {log} 2>&1"
