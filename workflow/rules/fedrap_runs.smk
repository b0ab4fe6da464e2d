# fedrap: the jobs that train, evaluate or read data (run records). Left out when
# from_records=true: the committed records are then the inputs of fedrap.smk's figures and tables.


localrules:
    fedrap_stats,


rule fedrap_train:
    input:
        manifest=lambda wc: f"{fedrap_split_dir(config, wc.tier, wc.dataset, wc.split)}/manifest.json",
    output:
        metrics="results/{tier}/fedrap/runs/{dataset}/{split}/{method}/seed{seed}/metrics.json",
        per_user="results/{tier}/fedrap/runs/{dataset}/{split}/{method}/seed{seed}/per_user.parquet",
        provenance="results/{tier}/fedrap/runs/{dataset}/{split}/{method}/seed{seed}/provenance.json",
        history="results/{tier}/fedrap/runs/{dataset}/{split}/{method}/seed{seed}/history.parquet",
    log:
        "logs/fedrap/{tier}/{dataset}/{split}/{method}/seed{seed}.log",
    benchmark:
        "logs/benchmarks/fedrap/{tier}/{dataset}/{split}/{method}/seed{seed}.tsv"
    conda:
        ENV_CPU
    threads: JOB_THREADS
    resources:
        mem_mb=fedrap_train_estimate("mem_mb"),
        runtime=fedrap_train_estimate("runtime"),
        gpu=res_gpu("train"),
    params:
        settings=lambda wc: as_json(
            fedrap_settings(config, wc.tier, wc.dataset, wc.method)
        ),
        evaluation=lambda wc: as_json(config["evaluation"]["splits"][wc.split]),
        meta=lambda wc: as_json(
            {"tier": wc.tier, "paper": "fedrap", "dataset": wc.dataset}
        ),
        budget=lambda wc: fedrap_memory_budget(wc.dataset),
        device=config["device"],
        split_dir=lambda wc, input: str(Path(input.manifest).parent),
        out=lambda wc, output: str(Path(output.metrics).parent),
        bench="logs/benchmarks/fedrap/{tier}/{dataset}/{split}/{method}/seed{seed}.tsv",
        checkpoint=lambda wc: f"{CHECKPOINTS}/{wc.tier}/fedrap/{wc.dataset}/{wc.split}/{wc.method}/seed{wc.seed}.ckpt",
        projection="",
    shell:
        "OMP_NUM_THREADS={threads:q} recrepro fedrap train "
        "--split-dir {params.split_dir:q} --variant {wildcards.method:q} "
        "--settings {params.settings:q} --seed {wildcards.seed:q} --out-dir {params.out:q} "
        "--meta {params.meta:q} --evaluation {params.evaluation:q} --device {params.device:q} "
        "--memory-budget-mb {params.budget:q} --threads {threads:q} "
        "--benchmark-file {params.bench:q} --checkpoint {params.checkpoint:q}{params.projection} --log {log:q}"


# The embeddings figure's run alone also writes projection.parquet: one file in every record
# would cost each a disk block and is read nowhere else.
_EMBEDDING_RUN = fedrap_embedding_run(config, TIER)
if _EMBEDDING_RUN:
    _embedding_parts = Path(_EMBEDDING_RUN[1]).parts

    use rule fedrap_train as fedrap_train_projected with:
        output:
            metrics="results/{tier}/fedrap/runs/{dataset}/{split}/{method}/seed{seed}/metrics.json",
            per_user="results/{tier}/fedrap/runs/{dataset}/{split}/{method}/seed{seed}/per_user.parquet",
            provenance="results/{tier}/fedrap/runs/{dataset}/{split}/{method}/seed{seed}/provenance.json",
            history="results/{tier}/fedrap/runs/{dataset}/{split}/{method}/seed{seed}/history.parquet",
            projection="results/{tier}/fedrap/runs/{dataset}/{split}/{method}/seed{seed}/projection.parquet",
        wildcard_constraints:
            tier=re.escape(_embedding_parts[1]),
            dataset=re.escape(_embedding_parts[4]),
            split=re.escape(_embedding_parts[5]),
            method=re.escape(_embedding_parts[6]),
            seed=re.escape(_embedding_parts[7].removeprefix("seed")),
        params:
            projection=lambda wc, output: f" --projection {shlex.quote(output.projection)}",

    ruleorder: fedrap_train_projected > fedrap_train


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
        dirs=lambda wc, input: [str(Path(m).parent) for m in input.manifests],
    shell:
        "recrepro fedrap stats --out-csv {output.csv:q} {params.dirs:q} "
        "> {log:q} 2>&1"
