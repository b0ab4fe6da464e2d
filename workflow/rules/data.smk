# Data stage: raw files (generated or fetched and verified) -> processed parquet -> splits;
# datasets.json says which datasets the mirror held (the reach of the reproduction).
from recrepro.datasets.preprocessing import entry_switches


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
        spec=as_json(config["data"]["synthetic"]),
        out=lambda wc, output: str(Path(output[0]).parent),
    shell:
        "recrepro data synth --raw-dir {params.out:q} --spec {params.spec:q} > {log:q} 2>&1"


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
        # lists: each word is quoted on its own, an empty list adds nothing
        mirror=(
            ["--mirror", config["data"]["mirror"]] if config["data"]["mirror"] else []
        ),
        offline=[] if config["data"]["allow_download"] else ["--no-download"],
        strict=["--strict-checksums"] if config["data"]["strict_checksums"] else [],
        caps=[
            "--unverified-size-factor",
            str(config["data"]["unverified_archive"]["size_factor"]),
            "--unverified-max-ratio",
            str(config["data"]["unverified_archive"]["max_ratio"]),
        ],
        raw=lambda wc, output: str(Path(output[0]).parent),
    # The whole output goes to the log; its WARNING and error lines (trust on first use, a
    # reconstructed form taken, a refused archive) also to Snakemake's console.
    shell:
        "recrepro data fetch {wildcards.dataset:q} --raw-dir {params.raw:q} "
        "{params.mirror:q} {params.offline:q} {params.strict:q} {params.caps:q} 2>&1 "
        "| tee {log:q} | (grep --line-buffered -E ' WARNING |error: ' >&2 || true)"


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
    # the log gets everything; a refusal (a form lacking what the protocol needs) and the
    # statistics checks that fail also reach the console
    params:
        protocols=as_json(config["protocols"]),
        # the top-level switches, then those of the tier's entries for (dataset, protocol)
        switches=lambda wc: as_json(
            entry_switches(
                config.get("switches"), TIER_CONF["data"], wc.dataset, wc.protocol
            )
        ),
        raw=lambda wc, input: str(Path(input[0]).parent),
        out=lambda wc, output: str(Path(output.stats).parent),
    shell:
        "recrepro data preprocess {wildcards.dataset:q} --protocol {wildcards.protocol:q} "
        "--protocols {params.protocols:q} --switches {params.switches:q} "
        "--raw-dir {params.raw:q} --out-dir {params.out:q} 2>&1 "
        "| tee {log:q} | (grep --line-buffered -E ' WARNING |error: ' >&2 || true)"


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
        split_params=lambda wc: as_json(split_params(wc)),
        processed=lambda wc, input: str(Path(input[0]).parent),
        out=lambda wc, output: str(Path(output[0]).parent),
    shell:
        "recrepro data split --processed-dir {params.processed:q} --split {wildcards.split:q} "
        "--seed {wildcards.seed:q} --params {params.split_params:q} --out-dir {params.out:q} "
        "> {log:q} 2>&1"


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
        mirror=(
            ["--mirror", config["data"]["mirror"]] if config["data"]["mirror"] else []
        ),
    shell:
        "recrepro data availability {params.mirror:q} --out {output:q} > {log:q} 2>&1"


# the leak audit of one split (helpers and the table: common.smk, report.smk)
rule leak_audit_split:
    input:
        manifest=f"{DATA}/splits/{{dataset}}/{{protocol}}/{{split}}/seed{{seed}}/manifest.json",
    output:
        "results/{tier}/leak_audit/{dataset}/{protocol}/{split}/seed{seed}.json",
    log:
        "logs/data/{tier}/leak_audit/{dataset}/{protocol}/{split}/seed{seed}.log",
    benchmark:
        "logs/benchmarks/data/{tier}/leak_audit/{dataset}/{protocol}/{split}/seed{seed}.tsv"
    conda:
        ENV_CPU
    threads: 1
    resources:
        mem_mb=res_mem_mb("data"),
        runtime=res_runtime("light"),
    params:
        paper=lambda wc: leak_audit_paper(wc.dataset, wc.protocol),
        pools=lambda wc: " ".join(fedrap_negative_pools(wc.tier)),
        split=lambda wc, input: str(Path(input.manifest).parent),
    shell:
        "recrepro leaks audit --split-dir {params.split:q} --paper {params.paper:q} "
        "--negative-pools {params.pools} --out {output:q} > {log:q} 2>&1"
