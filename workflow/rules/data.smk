# Data stage: raw files (generated or fetched and verified) -> processed parquet -> splits;
# datasets.json says which datasets the mirror held (the reach of the reproduction).


localrules:
    data_availability,


rule synthesize_data:
    output:
        f"{DATA}/raw/synthetic/interactions.parquet",
    log:
        "logs/data/synthesize.log",
    benchmark:
        "logs/benchmarks/data/synthesize.tsv"
    conda:
        ENV_CPU
    threads: 1
    resources:
        mem_mb=res_mem_mb("data"),
        runtime=res_runtime("data"),
    params:
        cli=RECREPRO,
        spec=as_json(config["data"]["synthetic"]),
        out=lambda wc, output: str(Path(output[0]).parent),
    shell:
        "{params.cli} data synth --raw-dir {params.out} --spec {params.spec} > {log} 2>&1"


rule fetch_dataset:
    output:
        f"{DATA}/raw/{{dataset}}/fetch.json",
    log:
        "logs/data/fetch/{dataset}.log",
    benchmark:
        "logs/benchmarks/data/fetch/{dataset}.tsv"
    conda:
        ENV_CPU
    resources:
        downloads=1,
        mem_mb=res_mem_mb("data"),
        runtime=res_runtime("data"),
    params:
        cli=RECREPRO,
        mirror=(
            f"--mirror {shlex.quote(config['data']['mirror'])}"
            if config["data"]["mirror"]
            else ""
        ),
        offline="" if config["data"]["allow_download"] else "--no-download",
        raw=lambda wc: f"{DATA}/raw/{wc.dataset}",
    shell:
        "{params.cli} data fetch {wildcards.dataset} --raw-dir {params.raw} "
        "{params.mirror} {params.offline} > {log} 2>&1"


rule preprocess_dataset:
    input:
        raw_marker,
    output:
        interactions=f"{DATA}/processed/{{dataset}}/{{protocol}}/interactions.parquet",
        user_map=f"{DATA}/processed/{{dataset}}/{{protocol}}/user_map.parquet",
        item_map=f"{DATA}/processed/{{dataset}}/{{protocol}}/item_map.parquet",
        stats=f"{DATA}/processed/{{dataset}}/{{protocol}}/stats.json",
    log:
        "logs/data/preprocess/{dataset}/{protocol}.log",
    benchmark:
        "logs/benchmarks/data/preprocess/{dataset}/{protocol}.tsv"
    conda:
        ENV_CPU
    threads: 1
    resources:
        mem_mb=res_mem_mb("data"),
        runtime=res_runtime("data"),
    params:
        cli=RECREPRO,
        protocols=as_json(config["protocols"]),
        switches=as_json(config.get("switches", {})),
        raw=lambda wc: f"{DATA}/raw/{wc.dataset}",
        out=lambda wc, output: str(Path(output.stats).parent),
    shell:
        "{params.cli} data preprocess {wildcards.dataset} --protocol {wildcards.protocol} "
        "--protocols {params.protocols} --switches {params.switches} "
        "--raw-dir {params.raw} --out-dir {params.out} > {log} 2>&1"


rule split_dataset:
    input:
        f"{DATA}/processed/{{dataset}}/{{protocol}}/interactions.parquet",
        f"{DATA}/processed/{{dataset}}/{{protocol}}/stats.json",
    output:
        f"{DATA}/splits/{{dataset}}/{{protocol}}/{{split}}/seed{{seed}}/manifest.json",
    log:
        "logs/data/split/{dataset}/{protocol}/{split}/seed{seed}.log",
    benchmark:
        "logs/benchmarks/data/split/{dataset}/{protocol}/{split}/seed{seed}.tsv"
    conda:
        ENV_CPU
    threads: 1
    resources:
        mem_mb=res_mem_mb("data"),
        runtime=res_runtime("data"),
    params:
        cli=RECREPRO,
        split_params=lambda wc: as_json(split_params(wc)),
        processed=lambda wc: f"{DATA}/processed/{wc.dataset}/{wc.protocol}",
        out=lambda wc, output: str(Path(output[0]).parent),
    shell:
        "{params.cli} data split --processed-dir {params.processed} --split {wildcards.split} "
        "--seed {wildcards.seed} --params {params.split_params} --out-dir {params.out} > {log} 2>&1"


rule data_availability:
    output:
        "results/{tier}/datasets.json",
    log:
        "logs/data/{tier}/availability.log",
    benchmark:
        "logs/benchmarks/data/{tier}/availability.tsv"
    conda:
        ENV_CPU
    threads: 1
    resources:
        mem_mb=res_mem_mb("light"),
        runtime=res_runtime("light"),
    params:
        cli=RECREPRO,
        mirror=(
            f"--mirror {shlex.quote(str(config['data']['mirror']))}"
            if config["data"].get("mirror")
            else ""
        ),
    shell:
        "{params.cli} data availability {params.mirror} --out {output} > {log} 2>&1"
