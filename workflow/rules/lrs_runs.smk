# lrs: the jobs that train, evaluate or read data (run records). Left out when
# from_records=true: the committed records are then the inputs of lrs.smk's figures and tables.


rule lrs_sweep:
    output:
        rows="results/{tier}/lrs/sweeps/{experiment}.parquet",
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
        cli=RECREPRO_MODULE,
        settings=lambda wc: as_json(LRS_TIERS.get(wc.tier, {})),
        seeds=lambda wc: ",".join(
            str(s) for s in LRS_TIERS.get(wc.tier, {}).get("seeds", [0])
        ),
        device=config["device"],
    shell:
        "OMP_NUM_THREADS={threads} {params.cli} recrepro.papers.lrs sweep --experiment {wildcards.experiment} "
        "--seeds {params.seeds} --settings {params.settings} --device {params.device} "
        "--threads {threads} --out {output.rows} > {log} 2>&1"


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
        cli=RECREPRO_MODULE,
        settings=lambda wc: as_json(LRS_TIERS.get(wc.tier, {})),
        device=config["device"],
        run_root="results/{tier}/lrs/runs",
    shell:
        "OMP_NUM_THREADS={threads} {params.cli} recrepro.papers.lrs acceptance --seed {wildcards.seed} "
        "--settings {params.settings} --tier {wildcards.tier} --device {params.device} --threads {threads} "
        "--run-root {params.run_root} --done {output.done} > {log} 2>&1"


rule lrs_ml100k:
    input:
        fetched=f"{DATA}/raw/ml-100k/fetch.json",
    output:
        rows="results/{tier}/lrs/sweeps/ml100k.parquet",
        pdf=report(
            "results/{tier}/lrs/figures/fig6_ml100k.pdf",
            caption="../report/lrs_ml100k.rst",
            category="AMHT-LRS",
        ),
        png="results/{tier}/lrs/figures/fig6_ml100k.png",
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
        cli=RECREPRO_MODULE,
        settings=lambda wc: as_json(LRS_TIERS.get(wc.tier, {})),
        seeds=lambda wc: ",".join(
            str(s) for s in LRS_TIERS.get(wc.tier, {}).get("seeds", [0])
        ),
        raw_dir=lambda wc, input: str(Path(input.fetched).parent),
    shell:
        "OMP_NUM_THREADS={threads} {params.cli} recrepro.papers.lrs ml100k --raw-dir {params.raw_dir} "
        "--seeds {params.seeds} --settings {params.settings} --tier {wildcards.tier} --threads {threads} "
        "--out {output.rows} --out-pdf {output.pdf} --out-png {output.png} > {log} 2>&1"
