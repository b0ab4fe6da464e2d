# lambdaopt: the jobs that train, evaluate or read data (run records). Left out when
# from_records=true: the committed records are then the inputs of lambdaopt.smk's figures and tables.


rule lambdaopt_train:
    input:
        manifest=lambda wc: f"{lambdaopt_split_dir(config, wc.tier, wc.dataset, wc.split)}/manifest.json",
        # MF-λFix one job per λ on the tier's lambdafix_per_lambda datasets: its grid points' records
        # (<method>-gNN), from which this job assembles the record instead of training
        grid=lambda wc: [
            f"results/{wc.tier}/lambdaopt/runs/{wc.dataset}/{wc.split}/{point}/seed{wc.seed}/metrics.json"
            for point in lambdaopt_grid_points(config, wc.tier, wc.dataset, wc.method)
        ],
    output:
        metrics="results/{tier}/lambdaopt/runs/{dataset}/{split}/{method}/seed{seed}/metrics.json",
        per_user="results/{tier}/lambdaopt/runs/{dataset}/{split}/{method}/seed{seed}/per_user.parquet",
        provenance="results/{tier}/lambdaopt/runs/{dataset}/{split}/{method}/seed{seed}/provenance.json",
        history="results/{tier}/lambdaopt/runs/{dataset}/{split}/{method}/seed{seed}/history.parquet",
        trajectory="results/{tier}/lambdaopt/runs/{dataset}/{split}/{method}/seed{seed}/trajectory.parquet",
        train_counts="results/{tier}/lambdaopt/runs/{dataset}/{split}/{method}/seed{seed}/train_counts.parquet",
    log:
        "logs/lambdaopt/{tier}/{dataset}/{split}/{method}/seed{seed}.log",
    benchmark:
        "logs/benchmarks/lambdaopt/{tier}/{dataset}/{split}/{method}/seed{seed}.tsv"
    conda:
        ENV_CPU
    threads: lambdaopt_tier(config, TIER).get("threads", JOB_THREADS)
    resources:
        mem_mb=res_mem_mb("train"),
        runtime=res_runtime("train"),
        gpu=res_gpu("train"),
    params:
        settings=lambda wc: as_json(
            lambdaopt_settings(config, wc.tier, wc.dataset, wc.method)
        ),
        evaluation=lambda wc: as_json(config["evaluation"]["splits"][wc.split]),
        meta=lambda wc: as_json(
            {"tier": wc.tier, "paper": "lambdaopt", "dataset": wc.dataset}
        ),
        batch_size=config["evaluation"]["batch_size"],
        device=config["device"],
        split_dir=lambda wc, input: str(Path(input.manifest).parent),
        out=lambda wc, output: str(Path(output.metrics).parent),
        bench="logs/benchmarks/lambdaopt/{tier}/{dataset}/{split}/{method}/seed{seed}.tsv",
        checkpoint=lambda wc: f"{CHECKPOINTS}/{wc.tier}/lambdaopt/{wc.dataset}/{wc.split}/{wc.method}/seed{wc.seed}.ckpt",
    shell:
        "OMP_NUM_THREADS={threads:q} recrepro lambdaopt train "
        "--split-dir {params.split_dir:q} --variant {wildcards.method:q} "
        "--settings {params.settings:q} --seed {wildcards.seed:q} --out-dir {params.out:q} "
        "--meta {params.meta:q} --evaluation {params.evaluation:q} --device {params.device:q} "
        "--batch-size {params.batch_size:q} --threads {threads:q} "
        "--benchmark-file {params.bench:q} --checkpoint {params.checkpoint:q} "
        "--grid-runs {input.grid:q} --log {log:q}"


rule lambdaopt_sensitivity:
    input:
        manifest=lambda wc: f"{lambdaopt_split_dir(config, wc.tier, wc.dataset, wc.split)}/manifest.json",
    output:
        table="results/{tier}/lambdaopt/sensitivity/{dataset}/{split}/val_auc.parquet",
    log:
        "logs/lambdaopt/{tier}/sensitivity/{dataset}/{split}.log",
    benchmark:
        "logs/benchmarks/lambdaopt/{tier}/sensitivity/{dataset}/{split}.tsv"
    conda:
        ENV_CPU
    threads: lambdaopt_tier(config, TIER).get("threads", JOB_THREADS)
    resources:
        mem_mb=res_mem_mb("train"),
        runtime=res_runtime("train"),
        gpu=res_gpu("train"),
    params:
        settings=lambda wc: as_json(
            lambdaopt_settings(config, wc.tier, wc.dataset, "lambdafix")
        ),
        lambdas=lambda wc: as_json(
            lambdaopt_tier(config, wc.tier)["sensitivity"]["lambdas"]
        ),
        epochs=lambda wc: lambdaopt_sensitivity_epochs(config, wc.tier),
        seed=lambda wc: lambdaopt_first_seed(config, wc.tier),
        evaluation=lambda wc: as_json(config["evaluation"]["splits"][wc.split]),
        device=config["device"],
        split_dir=lambda wc, input: str(Path(input.manifest).parent),
        # one file per λ's curve: a killed sweep resumes each curve where it stopped
        checkpoint=lambda wc: f"{CHECKPOINTS}/{wc.tier}/lambdaopt/{wc.dataset}/{wc.split}/sensitivity.ckpt",
    shell:
        "OMP_NUM_THREADS={threads:q} recrepro lambdaopt train --mode sensitivity "
        "--split-dir {params.split_dir:q} --settings {params.settings:q} "
        "--lambdas {params.lambdas:q} --epochs {params.epochs:q} --seed {params.seed:q} "
        "--evaluation {params.evaluation:q} --device {params.device:q} --threads {threads:q} "
        "--checkpoint {params.checkpoint:q} --out {output.table:q} --log {log:q}"
