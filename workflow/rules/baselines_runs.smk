# baselines: the jobs that train, evaluate or read data (run records). Left out when
# from_records=true: the committed records are then the inputs of baselines.smk's figures and tables.


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
    threads: JOB_THREADS
    resources:
        mem_mb=res_mem_mb("evaluate"),
        runtime=res_runtime("evaluate"),
    params:
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
        "OMP_NUM_THREADS={threads:q} recrepro baseline --split-dir {params.split_dir:q} "
        "--method {wildcards.method:q} --seed {wildcards.seed:q} --out-dir {params.out:q} "
        "--evaluation {params.evaluation:q} --meta {params.meta:q} --device {params.device:q} "
        "--batch-size {params.batch_size:q} --benchmark-file {params.bench:q} > {log:q} 2>&1"
