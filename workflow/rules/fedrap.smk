# Paper: FedRAP (Li, Long & Zhou, ICLR 2024), issue 7.
# Federated runs (FedRAP paper/code modes, ablations, curricula, DP, FedMF, PFedRec, FedNCF,
# centralised MF and NCF) on the tier's `fedrap` leave-one-out splits; dataset statistics,
# results table, learning curves / sparsity / communication figure, ablation + DP figure,
# PCA of C vs D⁽ⁱ⁾ and scorecard under results/<tier>/fedrap/.

from recrepro.papers.fedrap import (
    rule_embedding_run as fedrap_embedding_run,
    rule_runs as fedrap_runs,
    rule_settings as fedrap_settings,
    rule_split_dir as fedrap_split_dir,
    rule_splits as fedrap_splits,
)

FEDRAP = config.get("fedrap", {})


localrules:
    fedrap_stats,
    fedrap_table,
    fedrap_figure,
    fedrap_ablation_figure,
    fedrap_embeddings_figure,
    fedrap_scorecard,


rule fedrap_train:
    input:
        manifest=lambda wc: f"{fedrap_split_dir(config, wc.tier, wc.dataset, wc.split)}/manifest.json",
    output:
        metrics="results/{tier}/fedrap/runs/{dataset}/{split}/{method}/seed{seed}/metrics.json",
        per_user="results/{tier}/fedrap/runs/{dataset}/{split}/{method}/seed{seed}/per_user.parquet",
        provenance="results/{tier}/fedrap/runs/{dataset}/{split}/{method}/seed{seed}/provenance.json",
        history="results/{tier}/fedrap/runs/{dataset}/{split}/{method}/seed{seed}/history.parquet",
        embeddings="results/{tier}/fedrap/runs/{dataset}/{split}/{method}/seed{seed}/embeddings.npz",
    log:
        "logs/fedrap/{tier}/{dataset}/{split}/{method}/seed{seed}.log",
    benchmark:
        "logs/benchmarks/fedrap/{tier}/{dataset}/{split}/{method}/seed{seed}.tsv"
    conda:
        ENV_CPU
    threads: config["threads"]
    resources:
        mem_mb=res_mem_mb("train", extra_mb=config["fedrap"]["memory_budget_mb"]),
        runtime=res_runtime("train", extra_mb=config["fedrap"]["memory_budget_mb"]),
        gpu=res_gpu("train"),
    params:
        cli=RECREPRO_MODULE,
        settings=lambda wc: as_json(
            fedrap_settings(config, wc.tier, wc.dataset, wc.method)
        ),
        evaluation=lambda wc: as_json(config["evaluation"]["splits"][wc.split]),
        meta=lambda wc: as_json(
            {"tier": wc.tier, "paper": "fedrap", "dataset": wc.dataset}
        ),
        budget=FEDRAP.get("memory_budget_mb", 2048),
        device=config["device"],
        split_dir=lambda wc, input: str(Path(input.manifest).parent),
        out=lambda wc, output: str(Path(output.metrics).parent),
        bench="logs/benchmarks/fedrap/{tier}/{dataset}/{split}/{method}/seed{seed}.tsv",
    shell:
        "OMP_NUM_THREADS={threads} {params.cli} recrepro.papers.fedrap run --split-dir {params.split_dir} "
        "--variant {wildcards.method} --settings {params.settings} --seed {wildcards.seed} "
        "--out-dir {params.out} --meta {params.meta} --evaluation {params.evaluation} "
        "--device {params.device} --memory-budget-mb {params.budget} --threads {threads} "
        "--benchmark-file {params.bench} > {log} 2>&1"


rule fedrap_stats:
    input:
        manifests=lambda wc: [
            f"{split_dir(d, 'fedrap', s, seed)}/manifest.json"
            for d, s, seed in fedrap_splits(config, wc.tier)
        ],
    output:
        csv="results/{tier}/fedrap/tables/dataset_stats.csv",
    log:
        "logs/fedrap/{tier}/stats.log",
    benchmark:
        "logs/benchmarks/fedrap/{tier}/stats.tsv"
    conda:
        ENV_CPU
    threads: 1
    resources:
        mem_mb=res_mem_mb("light"),
        runtime=res_runtime("light"),
    params:
        cli=RECREPRO_MODULE,
        dirs=lambda wc, input: " ".join(str(Path(m).parent) for m in input.manifests),
    shell:
        "{params.cli} recrepro.papers.fedrap stats --out-csv {output.csv} {params.dirs} > {log} 2>&1"


rule fedrap_table:
    input:
        runs=lambda wc: fedrap_runs(config, wc.tier),
        stats="results/{tier}/fedrap/tables/dataset_stats.csv",
    output:
        md="results/{tier}/fedrap/tables/results.md",
        csv="results/{tier}/fedrap/tables/results.csv",
    log:
        "logs/fedrap/{tier}/table.log",
    benchmark:
        "logs/benchmarks/fedrap/{tier}/table.tsv"
    conda:
        ENV_CPU
    threads: 1
    resources:
        mem_mb=res_mem_mb("light"),
        runtime=res_runtime("light"),
    params:
        cli=RECREPRO_MODULE,
    shell:
        "{params.cli} recrepro.papers.fedrap table --tier {wildcards.tier} --stats {input.stats} "
        "--out-md {output.md} --out-csv {output.csv} {input.runs} > {log} 2>&1"


rule fedrap_figure:
    input:
        runs=lambda wc: fedrap_runs(config, wc.tier),
    output:
        pdf=report(
            "results/{tier}/fedrap/figures/curves.pdf",
            caption="../report/fedrap_curves.rst",
            category="FedRAP",
        ),
        png="results/{tier}/fedrap/figures/curves.png",
    log:
        "logs/fedrap/{tier}/figure.log",
    benchmark:
        "logs/benchmarks/fedrap/{tier}/figure.tsv"
    conda:
        ENV_CPU
    threads: 1
    resources:
        mem_mb=res_mem_mb("light"),
        runtime=res_runtime("light"),
    params:
        cli=RECREPRO_MODULE,
    shell:
        "{params.cli} recrepro.papers.fedrap figure --tier {wildcards.tier} --out-pdf {output.pdf} "
        "--out-png {output.png} {input.runs} > {log} 2>&1"


rule fedrap_ablation_figure:
    input:
        runs=lambda wc: fedrap_runs(config, wc.tier),
    output:
        pdf=report(
            "results/{tier}/fedrap/figures/ablation.pdf",
            caption="../report/fedrap_ablation.rst",
            category="FedRAP",
        ),
        png="results/{tier}/fedrap/figures/ablation.png",
    log:
        "logs/fedrap/{tier}/ablation_figure.log",
    benchmark:
        "logs/benchmarks/fedrap/{tier}/ablation_figure.tsv"
    conda:
        ENV_CPU
    threads: 1
    resources:
        mem_mb=res_mem_mb("light"),
        runtime=res_runtime("light"),
    params:
        cli=RECREPRO_MODULE,
    shell:
        "{params.cli} recrepro.papers.fedrap figure --kind ablation --tier {wildcards.tier} "
        "--out-pdf {output.pdf} --out-png {output.png} {input.runs} > {log} 2>&1"


rule fedrap_embeddings_figure:
    input:
        npz=lambda wc: fedrap_embedding_run(config, wc.tier)[1],
    output:
        pdf=report(
            "results/{tier}/fedrap/figures/embeddings.pdf",
            caption="../report/fedrap_embeddings.rst",
            category="FedRAP",
        ),
        png="results/{tier}/fedrap/figures/embeddings.png",
    log:
        "logs/fedrap/{tier}/embeddings_figure.log",
    benchmark:
        "logs/benchmarks/fedrap/{tier}/embeddings_figure.tsv"
    conda:
        ENV_CPU
    threads: 1
    resources:
        mem_mb=res_mem_mb("light"),
        runtime=res_runtime("light"),
    params:
        cli=RECREPRO_MODULE,
        dataset=lambda wc: fedrap_embedding_run(config, wc.tier)[0],
    shell:
        "{params.cli} recrepro.papers.fedrap embeddings --tier {wildcards.tier} --dataset {params.dataset} "
        "--npz {input.npz} --out-pdf {output.pdf} --out-png {output.png} > {log} 2>&1"


rule fedrap_scorecard:
    input:
        runs=lambda wc: fedrap_runs(config, wc.tier),
        expected=f"{EXPECTED}/fedrap.yaml",
    output:
        md="results/{tier}/fedrap/scorecard.md",
        csv="results/{tier}/fedrap/scorecard.csv",
    log:
        "logs/fedrap/{tier}/scorecard.log",
    benchmark:
        "logs/benchmarks/fedrap/{tier}/scorecard.tsv"
    conda:
        ENV_CPU
    threads: 1
    resources:
        mem_mb=res_mem_mb("light"),
        runtime=res_runtime("light"),
    params:
        cli=RECREPRO,
    shell:
        "{params.cli} scorecard --paper fedrap --tier {wildcards.tier} --expected {input.expected} "
        "--out-md {output.md} --out-csv {output.csv} {input.runs} > {log} 2>&1"


PAPER_TARGETS["fedrap"] = (
    [
        f"results/{TIER}/fedrap/tables/results.md",
        f"results/{TIER}/fedrap/figures/curves.pdf",
        f"results/{TIER}/fedrap/figures/ablation.pdf",
        f"results/{TIER}/fedrap/scorecard.md",
    ]
    + (
        [f"results/{TIER}/fedrap/figures/embeddings.pdf"]
        if fedrap_embedding_run(config, TIER)
        else []
    )
    if fedrap_runs(config, TIER)
    else []
)
