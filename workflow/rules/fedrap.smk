# Paper: FedRAP (Li, Long & Zhou, ICLR 2024), issue 7.
# Federated runs (FedRAP paper/code modes, ablations, curricula, DP, FedMF, PFedRec, FedNCF,
# centralised MF and NCF) on the tier's `fedrap` leave-one-out splits; dataset statistics,
# results table, learning curves / sparsity / communication figure, ablation + DP figure,
# PCA of C vs D⁽ⁱ⁾ and scorecard under results/<tier>/fedrap/.

from recrepro.papers.fedrap.rules import (
    rule_embedding_run as fedrap_embedding_run,
    rule_grid_runs as fedrap_grid_runs,
    rule_runs as fedrap_runs,
    rule_settings as fedrap_settings,
    rule_split_dir as fedrap_split_dir,
    rule_splits as fedrap_splits,
)
from recrepro.papers.fedrap.comparison import (
    official_curve_files as fedrap_official_curves,
)

FEDRAP = config.get("fedrap", {})


localrules:
    fedrap_table,
    fedrap_tuning_table,
    fedrap_figure,
    fedrap_official_figure,
    fedrap_ablation_figure,
    fedrap_embeddings_figure,
    fedrap_scorecard,


rule fedrap_table:
    input:
        redraw=REDRAW,
        runs=lambda wc: recorded(fedrap_runs(config, wc.tier)),
        stats="results/{tier}/fedrap/tables/dataset_stats.csv",
        official=lambda wc: fedrap_official_curves(wc.tier),
        grid=lambda wc: recorded(fedrap_grid_runs(config, wc.tier)),
    output:
        md="results/{tier}/fedrap/tables/results.md",
        csv="results/{tier}/fedrap/tables/results.csv",
    log:
        "logs/fedrap/{tier}/table.log",
    benchmark:
        "logs/benchmarks/fedrap/{tier}/table.tsv"
    conda:
        ENV_CPU
    threads: 1
    resources:
        mem_mb=res_mem_mb("light"),
        runtime=res_runtime("light"),
    params:
        # key order kept (not as_json's sorted keys): a grid's points are numbered in the order its
        # product's keys are written (recrepro.papers.fedrap.tuning.grid_points)
        tuning=lambda wc: json.dumps(
            FEDRAP.get("tiers", {}).get(wc.tier, {}).get("tuning") or {}
        ),
    shell:
        "recrepro fedrap table --tier {wildcards.tier:q} --tuning {params.tuning:q} "
        "--stats {input.stats:q} --out-md {output.md:q} --out-csv {output.csv:q} "
        "--official {input.official:q} --grid-runs {input.grid:q} -- {input.runs:q} > {log:q} 2>&1"


rule fedrap_tuning_table:
    input:
        redraw=REDRAW,
        runs=lambda wc: recorded(fedrap_grid_runs(config, wc.tier)),
    output:
        md="results/{tier}/fedrap/tables/tuning.md",
        csv="results/{tier}/fedrap/tables/tuning.csv",
    log:
        "logs/fedrap/{tier}/tuning_table.log",
    benchmark:
        "logs/benchmarks/fedrap/{tier}/tuning_table.tsv"
    conda:
        ENV_CPU
    threads: 1
    resources:
        mem_mb=res_mem_mb("light"),
        runtime=res_runtime("light"),
    params:
        # key order kept (not as_json's sorted keys): a grid's points are numbered in the order its
        # product's keys are written (recrepro.papers.fedrap.tuning.grid_points)
        tuning=lambda wc: json.dumps(
            FEDRAP.get("tiers", {}).get(wc.tier, {}).get("tuning") or {}
        ),
    shell:
        "recrepro fedrap tuning --tier {wildcards.tier:q} --tuning {params.tuning:q} "
        "--out-md {output.md:q} --out-csv {output.csv:q} {input.runs:q} > {log:q} 2>&1"


rule fedrap_figure:
    input:
        redraw=REDRAW,
        runs=lambda wc: recorded(fedrap_runs(config, wc.tier)),
        official=lambda wc: fedrap_official_curves(wc.tier),
    output:
        pdf="results/{tier}/fedrap/figures/curves.pdf",
        png=report(
            "results/{tier}/fedrap/figures/curves.png",
            caption="../report/fedrap_curves.rst",
            category="FedRAP",
            subcategory="Figures",
            labels={"figure": "1 · learning curves, sparsity, communication (Fig. 3)"},
        ),
    log:
        "logs/fedrap/{tier}/figure.log",
    benchmark:
        "logs/benchmarks/fedrap/{tier}/figure.tsv"
    conda:
        ENV_CPU
    threads: 1
    resources:
        mem_mb=res_mem_mb("light"),
        runtime=res_runtime("light"),
    shell:
        "recrepro fedrap figure --tier {wildcards.tier:q} --official {input.official:q} "
        "--out-pdf {output.pdf:q} --out-png {output.png:q} -- {input.runs:q} > {log:q} 2>&1"


rule fedrap_official_figure:
    input:
        redraw=REDRAW,
        official=lambda wc: fedrap_official_curves(wc.tier),
        runs=lambda wc: recorded(fedrap_runs(config, wc.tier)),
    output:
        pdf="results/{tier}/fedrap/figures/official.pdf",
        png=report(
            "results/{tier}/fedrap/figures/official.png",
            caption="../report/fedrap_official.rst",
            category="FedRAP",
            subcategory="Figures",
            labels={"figure": "4 · the released code beside ours, per round"},
        ),
    log:
        "logs/fedrap/{tier}/official_figure.log",
    benchmark:
        "logs/benchmarks/fedrap/{tier}/official_figure.tsv"
    conda:
        ENV_CPU
    threads: 1
    resources:
        mem_mb=res_mem_mb("light"),
        runtime=res_runtime("light"),
    params:
        runs_root=lambda wc: f"results/{wc.tier}/fedrap/runs",
    shell:
        "recrepro fedrap official --tier {wildcards.tier:q} --runs-root {params.runs_root:q} "
        "--out-pdf {output.pdf:q} --out-png {output.png:q} {input.official:q} > {log:q} 2>&1"


rule fedrap_ablation_figure:
    input:
        redraw=REDRAW,
        runs=lambda wc: recorded(fedrap_runs(config, wc.tier)),
    output:
        pdf="results/{tier}/fedrap/figures/ablation.pdf",
        png=report(
            "results/{tier}/fedrap/figures/ablation.png",
            caption="../report/fedrap_ablation.rst",
            category="FedRAP",
            subcategory="Figures",
            labels={"figure": "2 · ablations, curricula, DP (§4.5, Table 1)"},
        ),
    log:
        "logs/fedrap/{tier}/ablation_figure.log",
    benchmark:
        "logs/benchmarks/fedrap/{tier}/ablation_figure.tsv"
    conda:
        ENV_CPU
    threads: 1
    resources:
        mem_mb=res_mem_mb("light"),
        runtime=res_runtime("light"),
    shell:
        "recrepro fedrap figure --kind ablation --tier {wildcards.tier:q} "
        "--out-pdf {output.pdf:q} --out-png {output.png:q} {input.runs:q} > {log:q} 2>&1"


rule fedrap_embeddings_figure:
    input:
        redraw=REDRAW,
        projection=lambda wc: recorded(fedrap_embedding_run(config, wc.tier)[1]),
    output:
        pdf="results/{tier}/fedrap/figures/embeddings.pdf",
        png=report(
            "results/{tier}/fedrap/figures/embeddings.png",
            caption="../report/fedrap_embeddings.rst",
            category="FedRAP",
            subcategory="Figures",
            labels={"figure": "3 · item embeddings C vs D (Fig. 5)"},
        ),
    log:
        "logs/fedrap/{tier}/embeddings_figure.log",
    benchmark:
        "logs/benchmarks/fedrap/{tier}/embeddings_figure.tsv"
    conda:
        ENV_CPU
    threads: 1
    resources:
        mem_mb=res_mem_mb("light"),
        runtime=res_runtime("light"),
    params:
        dataset=lambda wc: fedrap_embedding_run(config, wc.tier)[0],
    shell:
        "recrepro fedrap embeddings --tier {wildcards.tier:q} "
        "--dataset {params.dataset:q} --projection {input.projection:q} "
        "--out-pdf {output.pdf:q} --out-png {output.png:q} > {log:q} 2>&1"


rule fedrap_scorecard:
    input:
        redraw=REDRAW,
        runs=lambda wc: recorded(fedrap_runs(config, wc.tier)),
        strong=lambda wc: strong_baselines_csv(wc.tier, "fedrap"),
    output:
        md="results/{tier}/fedrap/scorecard.md",
        csv="results/{tier}/fedrap/scorecard.csv",
    log:
        "logs/fedrap/{tier}/scorecard.log",
    benchmark:
        "logs/benchmarks/fedrap/{tier}/scorecard.tsv"
    conda:
        ENV_CPU
    threads: 1
    resources:
        mem_mb=res_mem_mb("light"),
        runtime=res_runtime("light"),
    params:
        expected=expected_digest("fedrap"),
        seeds=lambda wc: seeds_required("fedrap", wc.tier),
    shell:
        "recrepro scorecard --paper fedrap --tier {wildcards.tier:q} "
        "--expected-sha256 {params.expected:q} "
        "--seeds-required {params.seeds:q} --strong-baselines {input.strong:q} "
        "--out-md {output.md:q} --out-csv {output.csv:q} {input.runs:q} > {log:q} 2>&1"


PAPER_TARGETS["fedrap"] = (
    [
        f"results/{TIER}/fedrap/tables/results.md",
        f"results/{TIER}/fedrap/figures/curves.pdf",
        f"results/{TIER}/fedrap/figures/ablation.pdf",
        f"results/{TIER}/fedrap/scorecard.md",
    ]
    + (
        [f"results/{TIER}/fedrap/tables/tuning.md"]
        if fedrap_grid_runs(config, TIER)
        else []
    )
    + (
        [f"results/{TIER}/fedrap/figures/official.pdf"]
        if fedrap_official_curves(TIER)
        else []
    )
    + (
        [f"results/{TIER}/fedrap/figures/embeddings.pdf"]
        if fedrap_embedding_run(config, TIER)
        else []
    )
    if fedrap_runs(config, TIER)
    else []
)
