# Reference baselines (MostPopular, Random) on every split of the tier, their
# scorecard and figure. They anchor every paper's table and check the metric code.


localrules:
    baselines_scorecard,
    baselines_figure,


rule evaluate_baseline:
    input:
        manifest=f"{DATA}/splits/{{dataset}}/{{protocol}}/{{split}}/seed{{seed}}/manifest.json",
    output:
        metrics="results/{tier}/baselines/runs/{dataset}/{protocol}/{split}/{method}/seed{seed}/metrics.json",
        per_user="results/{tier}/baselines/runs/{dataset}/{protocol}/{split}/{method}/seed{seed}/per_user.parquet",
        provenance="results/{tier}/baselines/runs/{dataset}/{protocol}/{split}/{method}/seed{seed}/provenance.json",
    log:
        "logs/baselines/{tier}/{dataset}/{protocol}/{split}/{method}/seed{seed}.log",
    benchmark:
        "logs/benchmarks/baselines/{tier}/{dataset}/{protocol}/{split}/{method}/seed{seed}.tsv"
    conda:
        ENV_CPU
    threads: config["threads"]
    resources:
        mem_mb=res_mem_mb("evaluate"),
        runtime=res_runtime("evaluate"),
    params:
        cli=RECREPRO,
        evaluation=lambda wc: as_json(config["evaluation"]["splits"][wc.split]),
        meta=lambda wc: as_json(
            {
                "tier": wc.tier,
                "paper": "baselines",
                "dataset": wc.dataset,
                "protocol": wc.protocol,
                "split": wc.split,
                "method": wc.method,
            }
        ),
        batch_size=config["evaluation"]["batch_size"],
        device=config["device"],
        split_dir=lambda wc, input: str(Path(input.manifest).parent),
        out=lambda wc, output: str(Path(output.metrics).parent),
        bench="logs/benchmarks/baselines/{tier}/{dataset}/{protocol}/{split}/{method}/seed{seed}.tsv",
    shell:
        "OMP_NUM_THREADS={threads} {params.cli} baseline --split-dir {params.split_dir} "
        "--method {wildcards.method} --seed {wildcards.seed} --out-dir {params.out} "
        "--evaluation {params.evaluation} --meta {params.meta} --device {params.device} "
        "--batch-size {params.batch_size} --benchmark-file {params.bench} > {log} 2>&1"


rule baselines_scorecard:
    input:
        runs=lambda wc: list(baseline_runs(wc.tier)),
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
        runs=lambda wc: list(baseline_runs(wc.tier)),
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
