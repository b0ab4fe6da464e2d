# Paper: exADMM (Togashi, Abe, Saito, WWW 2024), issue 4.
# iALS, exADMM and FairRec operating points on strong-generalisation splits; figure 1
# (accuracy-fairness trade-off), 2 (scalability), 3 (convergence), table 4, scorecard.

import recrepro.papers.exadmm as exadmm_wf  # noqa: E402  (helpers that read the config)

EXADMM = config.get("exadmm", {})


localrules:
    exadmm_tradeoff,
    exadmm_convergence,
    exadmm_table,
    exadmm_scorecard,


rule exadmm_tradeoff:
    input:
        redraw=REDRAW,
        runs=lambda wc: recorded(exadmm_wf.smk_runs(config, wc.tier)),
    output:
        pdf=report(
            "results/{tier}/exadmm/figures/fig1_tradeoff.pdf",
            caption="../report/exadmm_tradeoff.rst",
            category="exADMM",
        ),
        png="results/{tier}/exadmm/figures/fig1_tradeoff.png",
    log:
        "logs/exadmm/{tier}/fig1_tradeoff.log",
    benchmark:
        "logs/benchmarks/exadmm/{tier}/fig1_tradeoff.tsv"
    conda:
        ENV_CPU
    threads: 1
    resources:
        mem_mb=res_mem_mb("light"),
        runtime=res_runtime("light"),
    params:
        cli=RECREPRO_MODULE,
        ks=as_json(EXADMM.get("figure_ks", [20, 100])),
    shell:
        "{params.cli} recrepro.papers.exadmm tradeoff --tier {wildcards.tier} --ks {params.ks} "
        "--out-pdf {output.pdf} --out-png {output.png} {input.runs} > {log} 2>&1"


rule exadmm_convergence:
    input:
        redraw=REDRAW,
        histories=lambda wc: recorded(exadmm_wf.smk_histories(config, wc.tier)),
    output:
        pdf=report(
            "results/{tier}/exadmm/figures/fig3_convergence.pdf",
            caption="../report/exadmm_convergence.rst",
            category="exADMM",
        ),
        png="results/{tier}/exadmm/figures/fig3_convergence.png",
    log:
        "logs/exadmm/{tier}/fig3_convergence.log",
    benchmark:
        "logs/benchmarks/exadmm/{tier}/fig3_convergence.tsv"
    conda:
        ENV_CPU
    threads: 1
    resources:
        mem_mb=res_mem_mb("light"),
        runtime=res_runtime("light"),
    params:
        cli=RECREPRO_MODULE,
    shell:
        "{params.cli} recrepro.papers.exadmm convergence --tier {wildcards.tier} "
        "--out-pdf {output.pdf} --out-png {output.png} {input.histories} > {log} 2>&1"


rule exadmm_table:
    input:
        redraw=REDRAW,
        runs=lambda wc: recorded(exadmm_wf.smk_runs(config, wc.tier)),
    output:
        md="results/{tier}/exadmm/table4_best_points.md",
        csv="results/{tier}/exadmm/table4_best_points.csv",
    log:
        "logs/exadmm/{tier}/table4.log",
    benchmark:
        "logs/benchmarks/exadmm/{tier}/table4.tsv"
    conda:
        ENV_CPU
    threads: 1
    resources:
        mem_mb=res_mem_mb("light"),
        runtime=res_runtime("light"),
    params:
        cli=RECREPRO_MODULE,
        select=EXADMM.get("select", "ndcg@20"),
        ks=as_json(EXADMM.get("figure_ks", [20, 100])),
    shell:
        "{params.cli} recrepro.papers.exadmm table --tier {wildcards.tier} --select {params.select} --ks {params.ks} "
        "--out-md {output.md} --out-csv {output.csv} {input.runs} > {log} 2>&1"


rule exadmm_scorecard:
    input:
        redraw=REDRAW,
        runs=lambda wc: recorded(exadmm_wf.smk_runs(config, wc.tier)),
        expected=f"{EXPECTED}/exadmm.yaml",
    output:
        md="results/{tier}/exadmm/scorecard.md",
        csv="results/{tier}/exadmm/scorecard.csv",
    log:
        "logs/exadmm/{tier}/scorecard.log",
    benchmark:
        "logs/benchmarks/exadmm/{tier}/scorecard.tsv"
    conda:
        ENV_CPU
    threads: 1
    resources:
        mem_mb=res_mem_mb("light"),
        runtime=res_runtime("light"),
    params:
        cli=RECREPRO,
        seeds=lambda wc: seeds_required("exadmm", wc.tier),
    shell:
        "{params.cli} scorecard --paper exadmm --tier {wildcards.tier} --expected {input.expected} "
        "--seeds-required {params.seeds} "
        "--out-md {output.md} --out-csv {output.csv} {input.runs} > {log} 2>&1"


PAPER_TARGETS["exadmm"] = exadmm_wf.smk_targets(config, TIER)
