# prism: the jobs that train, evaluate or read data (run records). Left out when
# from_records=true: the committed records are then the inputs of prism.smk's figures and tables.


rule prism_train:
    input:
        manifest=f"{DATA}/splits/{{dataset}}/{{protocol}}/{{split}}/seed{{seed}}/manifest.json",
    output:
        metrics="results/{tier}/prism/runs/{dataset}/{protocol}/{split}/{method}/seed{seed}/metrics.json",
        per_user="results/{tier}/prism/runs/{dataset}/{protocol}/{split}/{method}/seed{seed}/per_user.parquet",
        provenance="results/{tier}/prism/runs/{dataset}/{protocol}/{split}/{method}/seed{seed}/provenance.json",
        history="results/{tier}/prism/runs/{dataset}/{protocol}/{split}/{method}/seed{seed}/history.json",
        magnitudes="results/{tier}/prism/runs/{dataset}/{protocol}/{split}/{method}/seed{seed}/magnitudes.parquet",
    log:
        "logs/prism/{tier}/{dataset}/{protocol}/{split}/{method}/seed{seed}.log",
    benchmark:
        "logs/benchmarks/prism/{tier}/{dataset}/{protocol}/{split}/{method}/seed{seed}.tsv"
    conda:
        ENV_CPU
    threads: prism_wf.tier_conf(config, TIER).get("threads", JOB_THREADS)
    resources:
        gpu=res_gpu("train"),
        mem_mb=res_mem_mb("train"),
        runtime=res_runtime("train"),
    params:
        tier_conf=lambda wc: as_json(prism_wf.tier_conf(config, wc.tier)),
        switches=as_json(config["prism"]["switches"]),
        evaluation=lambda wc: as_json(config["evaluation"]["splits"][wc.split]),
        meta=lambda wc: as_json(
            {
                "tier": wc.tier,
                "paper": "prism",
                "dataset": wc.dataset,
                "protocol": wc.protocol,
                "split": wc.split,
            }
        ),
        batch_size=config["evaluation"]["batch_size"],
        device=config["device"],
        split_dir=lambda wc, input: str(Path(input.manifest).parent),
        out=lambda wc, output: str(Path(output.metrics).parent),
        bench="logs/benchmarks/prism/{tier}/{dataset}/{protocol}/{split}/{method}/seed{seed}.tsv",
        checkpoint=lambda wc: f"{CHECKPOINTS}/{wc.tier}/prism/{wc.dataset}/{wc.protocol}/{wc.split}/{wc.method}/seed{wc.seed}.ckpt",
    shell:
        "OMP_NUM_THREADS={threads:q} recrepro prism train "
        "--split-dir {params.split_dir:q} --method {wildcards.method:q} --seed {wildcards.seed:q} "
        "--out-dir {params.out:q} --tier-conf {params.tier_conf:q} --switches {params.switches:q} "
        "--evaluation {params.evaluation:q} --meta {params.meta:q} --device {params.device:q} "
        "--batch-size {params.batch_size:q} --benchmark-file {params.bench:q} "
        "--checkpoint {params.checkpoint:q} --log {log:q}"


rule prism_dataset_summary:
    input:
        stats=f"{DATA}/processed/{{dataset}}/prism/stats.json",
    output:
        csv="results/{tier}/prism/tables/dataset_stats_{dataset}.csv",
    log:
        "logs/prism/{tier}/dataset_stats_{dataset}.log",
    benchmark:
        "logs/benchmarks/prism/{tier}/dataset_stats_{dataset}.tsv"
    conda:
        ENV_CPU
    threads: 1
    resources:
        mem_mb=res_mem_mb("light"),
        runtime=res_runtime("light"),
    shell:
        "recrepro data summary {input.stats:q} --out-csv {output.csv:q} > {log:q} 2>&1"
