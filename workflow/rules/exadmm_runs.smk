# exadmm: the jobs that train, evaluate or read data (run records). Left out when
# from_records=true: the committed records are then the inputs of exadmm.smk's figures and tables.


rule exadmm_train:
    input:
        manifest=lambda wc: exadmm_wf.smk_manifest(config, DATA, wc.tier, wc.dataset),
    output:
        metrics="results/{tier}/exadmm/runs/{dataset}/{split}/{method}/seed{seed}/metrics.json",
        per_user="results/{tier}/exadmm/runs/{dataset}/{split}/{method}/seed{seed}/per_user.parquet",
        provenance="results/{tier}/exadmm/runs/{dataset}/{split}/{method}/seed{seed}/provenance.json",
        validation="results/{tier}/exadmm/runs/{dataset}/{split}/{method}/seed{seed}/validation.json",
        history="results/{tier}/exadmm/runs/{dataset}/{split}/{method}/seed{seed}/history.json",
    log:
        "logs/exadmm/{tier}/{dataset}/{split}/{method}/seed{seed}.log",
    benchmark:
        "logs/benchmarks/exadmm/{tier}/{dataset}/{split}/{method}/seed{seed}.tsv"
    conda:
        ENV_CPU
    threads: JOB_THREADS
    resources:
        mem_mb=res_mem_mb("train"),
        runtime=res_runtime("train"),
        gpu=res_gpu("train"),
    params:
        point=lambda wc: as_json(
            exadmm_wf.smk_point(config, wc.tier, wc.dataset, wc.method)
        ),
        ks=as_json(EXADMM.get("ks", list(exadmm_wf.DEFAULT_KS))),
        metrics=as_json(EXADMM.get("metrics", list(exadmm_wf.DEFAULT_METRICS))),
        meta=lambda wc: as_json(
            {
                "tier": wc.tier,
                "paper": "exadmm",
                "dataset": wc.dataset,
                "split": wc.split,
                "method": wc.method,
            }
        ),
        batch_size=config["evaluation"]["batch_size"],
        device=config["device"],
        split_dir=lambda wc, input: str(Path(input.manifest).parent),
        out=lambda wc, output: str(Path(output.metrics).parent),
        bench="logs/benchmarks/exadmm/{tier}/{dataset}/{split}/{method}/seed{seed}.tsv",
    shell:
        "OMP_NUM_THREADS={threads:q} recrepro exadmm train "
        "--split-dir {params.split_dir:q} --method {wildcards.method:q} --point {params.point:q} "
        "--seed {wildcards.seed:q} --out-dir {params.out:q} --ks {params.ks:q} "
        "--metrics {params.metrics:q} --meta {params.meta:q} --device {params.device:q} "
        "--batch-size {params.batch_size:q} --benchmark-file {params.bench:q} > {log:q} 2>&1"


# Fig. 2's timings (a record: the figure is drawn from it by exadmm_figure_scalability).
rule exadmm_scalability:
    input:
        manifest=lambda wc: exadmm_wf.smk_manifest(config, DATA, wc.tier, wc.dataset),
    output:
        json="results/{tier}/exadmm/scalability/{dataset}.json",
    log:
        "logs/exadmm/{tier}/scalability_{dataset}.log",
    benchmark:
        "logs/benchmarks/exadmm/{tier}/scalability_{dataset}.tsv"
    conda:
        ENV_CPU
    threads: JOB_THREADS
    resources:
        mem_mb=res_mem_mb("train"),
        runtime=res_runtime("train"),
        gpu=res_gpu("train"),
    params:
        entry=lambda wc: as_json(exadmm_wf.smk_entry(config, wc.tier, wc.dataset)),
        settings=lambda wc: as_json(EXADMM["tiers"][wc.tier]["scalability"]),
        device=config["device"],
        split_dir=lambda wc, input: str(Path(input.manifest).parent),
    shell:
        "OMP_NUM_THREADS={threads:q} recrepro exadmm train --mode scalability "
        "--split-dir {params.split_dir:q} --entry {params.entry:q} "
        "--settings {params.settings:q} --device {params.device:q} --out-json {output.json:q} "
        "> {log:q} 2>&1"
