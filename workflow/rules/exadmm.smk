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


rule exadmm_train:
    input:
        manifest=lambda wc: exadmm_wf.smk_manifest(config, DATA, wc.tier, wc.dataset),
    output:
        metrics="results/{tier}/exadmm/runs/{dataset}/{split}/{method}/seed{seed}/metrics.json",
        per_user="results/{tier}/exadmm/runs/{dataset}/{split}/{method}/seed{seed}/per_user.parquet",
        provenance="results/{tier}/exadmm/runs/{dataset}/{split}/{method}/seed{seed}/provenance.json",
        validation="results/{tier}/exadmm/runs/{dataset}/{split}/{method}/seed{seed}/validation.json",
        history="results/{tier}/exadmm/runs/{dataset}/{split}/{method}/seed{seed}/history.json",
    log:
        "logs/exadmm/{tier}/{dataset}/{split}/{method}/seed{seed}.log",
    benchmark:
        "logs/benchmarks/exadmm/{tier}/{dataset}/{split}/{method}/seed{seed}.tsv"
    conda:
        ENV_CPU
    threads: config["threads"]
    resources:
        mem_mb=res_mem_mb("train"),
        runtime=res_runtime("train"),
        gpu=res_gpu("train"),
    params:
        cli=RECREPRO_MODULE,
        point=lambda wc: as_json(
            exadmm_wf.smk_point(config, wc.tier, wc.dataset, wc.method)
        ),
        ks=as_json(EXADMM.get("ks", [3, 5, 10, 20, 50, 100])),
        metrics=as_json(
            EXADMM.get(
                "metrics", ["recall_liang", "ndcg", "coverage", "gini", "gini_pos"]
            )
        ),
        meta=lambda wc: as_json(
            {
                "tier": wc.tier,
                "paper": "exadmm",
                "dataset": wc.dataset,
                "split": wc.split,
                "method": wc.method,
            }
        ),
        batch_size=config["evaluation"]["batch_size"],
        device=config["device"],
        split_dir=lambda wc, input: str(Path(input.manifest).parent),
        out=lambda wc, output: str(Path(output.metrics).parent),
        bench="logs/benchmarks/exadmm/{tier}/{dataset}/{split}/{method}/seed{seed}.tsv",
    shell:
        "OMP_NUM_THREADS={threads} {params.cli} recrepro.papers.exadmm train "
        "--split-dir {params.split_dir} --method {wildcards.method} --point {params.point} "
        "--seed {wildcards.seed} --out-dir {params.out} --ks {params.ks} --metrics {params.metrics} "
        "--meta {params.meta} --device {params.device} --batch-size {params.batch_size} "
        "--benchmark-file {params.bench} > {log} 2>&1"


rule exadmm_tradeoff:
    input:
        runs=lambda wc: exadmm_wf.smk_runs(config, wc.tier),
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


rule exadmm_scalability:
    input:
        manifest=lambda wc: exadmm_wf.smk_manifest(config, DATA, wc.tier, wc.dataset),
    output:
        json="results/{tier}/exadmm/figures/fig2_scalability_{dataset}.json",
        pdf=report(
            "results/{tier}/exadmm/figures/fig2_scalability_{dataset}.pdf",
            caption="../report/exadmm_scalability.rst",
            category="exADMM",
        ),
        png="results/{tier}/exadmm/figures/fig2_scalability_{dataset}.png",
    log:
        "logs/exadmm/{tier}/fig2_scalability_{dataset}.log",
    benchmark:
        "logs/benchmarks/exadmm/{tier}/fig2_scalability_{dataset}.tsv"
    conda:
        ENV_CPU
    threads: config["threads"]
    resources:
        mem_mb=res_mem_mb("train"),
        runtime=res_runtime("train"),
        gpu=res_gpu("train"),
    params:
        cli=RECREPRO_MODULE,
        entry=lambda wc: as_json(exadmm_wf.smk_entry(config, wc.tier, wc.dataset)),
        settings=lambda wc: as_json(EXADMM["tiers"][wc.tier]["scalability"]),
        device=config["device"],
        split_dir=lambda wc, input: str(Path(input.manifest).parent),
    shell:
        "OMP_NUM_THREADS={threads} {params.cli} recrepro.papers.exadmm scalability "
        "--tier {wildcards.tier} --split-dir {params.split_dir} --entry {params.entry} "
        "--settings {params.settings} --device {params.device} --out-json {output.json} "
        "--out-pdf {output.pdf} --out-png {output.png} > {log} 2>&1"


rule exadmm_convergence:
    input:
        histories=lambda wc: exadmm_wf.smk_histories(config, wc.tier),
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
        runs=lambda wc: exadmm_wf.smk_runs(config, wc.tier),
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
        runs=lambda wc: exadmm_wf.smk_runs(config, wc.tier),
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
    shell:
        "{params.cli} scorecard --paper exadmm --tier {wildcards.tier} --expected {input.expected} "
        "--out-md {output.md} --out-csv {output.csv} {input.runs} > {log} 2>&1"


PAPER_TARGETS["exadmm"] = exadmm_wf.smk_targets(config, TIER)
