# Strong simple baselines (issue 48): the jobs that tune on validation and test the pick (run
# records). Left out when from_records=true: the committed records are then the inputs of strong.smk.


rule strong_tune:
    input:
        manifest=f"{DATA}/splits/{{dataset}}/{{protocol}}/{{split}}/seed{{split_seed}}/manifest.json",
    output:
        grid="results/{tier}/baselines/strong/{dataset}/{protocol}/{split}/{model}/split{split_seed}/grid.json",
    log:
        "logs/strong/{tier}/{dataset}/{protocol}/{split}/{model}/split{split_seed}.log",
    benchmark:
        "logs/benchmarks/strong/{tier}/{dataset}/{protocol}/{split}/{model}/split{split_seed}.tsv"
    conda:
        ENV_CPU
    threads: JOB_THREADS
    resources:
        mem_mb=strong_tune_estimate("mem_mb"),
        runtime=strong_tune_estimate("runtime"),
    params:
        evaluation=lambda wc: as_json(
            strong_wf.tune_params(config, *strong_wf.job_key(wc))["evaluation"]
        ),
        grid=lambda wc: as_json(
            strong_wf.tune_params(config, *strong_wf.job_key(wc))["grid"]
        ),
        fixed=lambda wc: as_json(
            strong_wf.tune_params(config, *strong_wf.job_key(wc))["fixed"]
        ),
        beyond=lambda wc: as_json(
            strong_wf.tune_params(config, *strong_wf.job_key(wc))["beyond"]
        ),
        select=lambda wc: strong_wf.tune_params(config, *strong_wf.job_key(wc))[
            "select"
        ],
        seeds=lambda wc: strong_wf.tune_params(config, *strong_wf.job_key(wc))["seeds"],
        meta=lambda wc: as_json(
            {
                "tier": wc.tier,
                "paper": "baselines",
                "dataset": wc.dataset,
                "protocol": wc.protocol,
                "split": wc.split,
                "split_seed": int(wc.split_seed),
            }
        ),
        batch_size=config["evaluation"]["batch_size"],
        device=config["device"],
        split_dir=lambda wc, input: str(Path(input.manifest).parent),
        out=lambda wc, output: str(Path(output.grid).parent),
        # the grid points scored so far: a killed job scores only the rest when started again
        checkpoint=lambda wc: strong_wf.ledger_path(
            CHECKPOINTS, *strong_wf.job_key(wc), wc.split_seed
        ),
    shell:
        "OMP_NUM_THREADS={threads:q} recrepro strong tune --split-dir {params.split_dir:q} "
        "--model {wildcards.model:q} --grid {params.grid:q} --fixed {params.fixed:q} --beyond {params.beyond:q} "
        "--select {params.select:q} --seeds {params.seeds:q} --out-dir {params.out:q} "
        "--evaluation {params.evaluation:q} --meta {params.meta:q} --device {params.device:q} "
        "--batch-size {params.batch_size:q} --checkpoint {params.checkpoint:q} --log {log:q}"
