# Paper: exADMM (Togashi, Abe, Saito, WWW 2024), issue 4.
# iALS, exADMM and FairRec operating points on strong-generalisation splits; figure 1
# (accuracy-fairness trade-off), 2 (scalability), 3 (convergence), table 4, scorecard.

import recrepro.papers.exadmm.rules as exadmm_wf  # noqa: E402  (helpers that read the config)

EXADMM = config.get("exadmm", {})


localrules:
    exadmm_tradeoff,
    exadmm_figure_scalability,
    exadmm_convergence,
    exadmm_table,
    exadmm_scorecard,


rule exadmm_tradeoff:
    input:
        redraw=REDRAW,
        runs=lambda wc: recorded(exadmm_wf.smk_runs(config, wc.tier)),
    output:
        pdf="results/{tier}/exadmm/figures/fig1_tradeoff.pdf",
        png=report(
            "results/{tier}/exadmm/figures/fig1_tradeoff.png",
            caption="../report/exadmm_tradeoff.rst",
            category="exADMM",
            subcategory="Figures",
            labels={
                "figure": "Fig. 1: accuracy vs exposure",
                "dataset": "every dataset",
            },
        ),
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
        ks=as_json(EXADMM.get("figure_ks", [20, 100])),
    shell:
        "recrepro exadmm tradeoff --tier {wildcards.tier:q} "
        "--ks {params.ks:q} --out-pdf {output.pdf:q} --out-png {output.png:q} "
        "{input.runs:q} > {log:q} 2>&1"


rule exadmm_figure_scalability:
    input:
        redraw=REDRAW,
        record="results/{tier}/exadmm/scalability/{dataset}.json",
    output:
        pdf="results/{tier}/exadmm/figures/fig2_scalability_{dataset}.pdf",
        png=report(
            "results/{tier}/exadmm/figures/fig2_scalability_{dataset}.png",
            caption="../report/exadmm_scalability.rst",
            category="exADMM",
            subcategory="Figures",
            labels={"figure": "Fig. 2: scalability", "dataset": "{dataset}"},
        ),
    log:
        "logs/exadmm/{tier}/fig2_scalability_{dataset}.log",
    benchmark:
        "logs/benchmarks/exadmm/{tier}/fig2_scalability_{dataset}.tsv"
    conda:
        ENV_CPU
    threads: 1
    resources:
        mem_mb=res_mem_mb("light"),
        runtime=res_runtime("light"),
    shell:
        "recrepro exadmm figure-scalability --tier {wildcards.tier:q} "
        "--record {input.record:q} --out-pdf {output.pdf:q} --out-png {output.png:q} "
        "> {log:q} 2>&1"


rule exadmm_convergence:
    input:
        redraw=REDRAW,
        histories=lambda wc: recorded(exadmm_wf.smk_histories(config, wc.tier)),
    output:
        pdf="results/{tier}/exadmm/figures/fig3_convergence.pdf",
        png=report(
            "results/{tier}/exadmm/figures/fig3_convergence.png",
            caption="../report/exadmm_convergence.rst",
            category="exADMM",
            subcategory="Figures",
            labels={"figure": "Fig. 3: convergence", "dataset": "every dataset"},
        ),
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
    shell:
        "recrepro exadmm convergence --tier {wildcards.tier:q} "
        "--out-pdf {output.pdf:q} --out-png {output.png:q} {input.histories:q} > {log:q} 2>&1"


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
        select=EXADMM.get("select", "ndcg@20"),
        ks=as_json(EXADMM.get("figure_ks", [20, 100])),
    shell:
        "recrepro exadmm table --tier {wildcards.tier:q} "
        "--select {params.select:q} --ks {params.ks:q} --out-md {output.md:q} "
        "--out-csv {output.csv:q} {input.runs:q} > {log:q} 2>&1"


rule exadmm_scorecard:
    input:
        redraw=REDRAW,
        runs=lambda wc: recorded(exadmm_wf.smk_runs(config, wc.tier)),
        strong=lambda wc: strong_baselines_csv(wc.tier, "exadmm"),
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
        expected=expected_digest("exadmm"),
        seeds=lambda wc: seeds_required("exadmm", wc.tier),
    shell:
        "recrepro scorecard --paper exadmm --tier {wildcards.tier:q} "
        "--expected-sha256 {params.expected:q} "
        "--seeds-required {params.seeds:q} --strong-baselines {input.strong:q} "
        "--out-md {output.md:q} --out-csv {output.csv:q} {input.runs:q} > {log:q} 2>&1"


PAPER_TARGETS["exadmm"] = exadmm_wf.smk_targets(config, TIER)
