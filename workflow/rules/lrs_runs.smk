# lrs: the jobs that train, evaluate or read data (run records). Left out when
# from_records=true: the committed records are then the inputs of lrs.smk's figures and tables.


rule lrs_sweep:
    output:
        rows="results/{tier}/lrs/sweeps/{experiment}.parquet",
        timings="results/{tier}/lrs/sweeps/{experiment}.timings.parquet",
    log:
        "logs/lrs/{tier}/sweep_{experiment}.log",
    benchmark:
        "logs/benchmarks/lrs/{tier}/sweep_{experiment}.tsv"
    wildcard_constraints:
        experiment="|".join(sorted(set(LRS_EXPERIMENTS.values()))),
    conda:
        ENV_CPU
    threads: 1
    resources:
        mem_mb=res_mem_mb("sweep"),
        runtime=res_runtime("sweep"),
    params:
        settings=lambda wc: as_json(LRS_TIERS.get(wc.tier, {})),
        seeds=lambda wc: ",".join(
            str(s) for s in LRS_TIERS.get(wc.tier, {}).get("seeds", [0])
        ),
        device=config["device"],
    shell:
        "OMP_NUM_THREADS={threads:q} recrepro lrs train --mode sweep "
        "--experiment {wildcards.experiment:q} --seeds {params.seeds:q} "
        "--settings {params.settings:q} --device {params.device:q} --threads {threads:q} "
        "--out {output.rows:q} --out-timings {output.timings:q} > {log:q} 2>&1"


rule lrs_acceptance:
    output:
        metrics=[
            f"results/{{tier}}/lrs/runs/synthetic/{split}/{method}/seed{{seed}}/metrics.json"
            for split, method in LRS_ACCEPTANCE_RUNS
        ],
        done="results/{tier}/lrs/runs/acceptance_seed{seed}.txt",
    log:
        "logs/lrs/{tier}/acceptance_seed{seed}.log",
    benchmark:
        "logs/benchmarks/lrs/{tier}/acceptance_seed{seed}.tsv"
    conda:
        ENV_CPU
    threads: 1
    resources:
        mem_mb=res_mem_mb("sweep"),
        runtime=res_runtime("sweep"),
    params:
        settings=lambda wc: as_json(LRS_TIERS.get(wc.tier, {})),
        device=config["device"],
        run_root="results/{tier}/lrs/runs",
    shell:
        "OMP_NUM_THREADS={threads:q} recrepro lrs train --mode acceptance "
        "--seed {wildcards.seed:q} --settings {params.settings:q} --tier {wildcards.tier:q} "
        "--device {params.device:q} --threads {threads:q} --run-root {params.run_root:q} "
        "--done {output.done:q} > {log:q} 2>&1"


rule lrs_ml100k:
    input:
        fetched=f"{DATA}/raw/ml-100k/fetch.json",
    output:
        rows="results/{tier}/lrs/sweeps/ml100k.parquet",
        timings="results/{tier}/lrs/sweeps/ml100k.timings.parquet",
    log:
        "logs/lrs/{tier}/ml100k.log",
    benchmark:
        "logs/benchmarks/lrs/{tier}/ml100k.tsv"
    conda:
        ENV_CPU
    threads: 1
    resources:
        mem_mb=res_mem_mb("sweep"),
        runtime=res_runtime("sweep"),
    params:
        settings=lambda wc: as_json(LRS_TIERS.get(wc.tier, {})),
        seeds=lambda wc: ",".join(
            str(s) for s in LRS_TIERS.get(wc.tier, {}).get("seeds", [0])
        ),
        raw_dir=lambda wc, input: str(Path(input.fetched).parent),
    shell:
        "OMP_NUM_THREADS={threads:q} recrepro lrs train --mode ml100k "
        "--raw-dir {params.raw_dir:q} --seeds {params.seeds:q} --settings {params.settings:q} "
        "--tier {wildcards.tier:q} --threads {threads:q} --out {output.rows:q} "
        "--out-timings {output.timings:q} > {log:q} 2>&1"
