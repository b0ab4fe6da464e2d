# Paper: λOpt (Chen et al., KDD 2019), issue 6.
# SGDA, AMF, NeuMF, MF-λFix and MF-λOpt-{D,DU,DI,DUI} on the tier's `lambdaopt` temporal_user_ratio splits;
# results table, λ-trajectory heat map, sensitivity and sparse-vs-active figures and the
# scorecard under results/<tier>/lambdaopt/.

from recrepro.papers.lambdaopt.rules import (
    official_curve_files as lambdaopt_official_curves,
    rule_first_seed as lambdaopt_first_seed,
    rule_grid_points as lambdaopt_grid_points,
    rule_grid_runs as lambdaopt_grid_runs,
    rule_group_records as lambdaopt_group_records,
    rule_run_dir as lambdaopt_run_dir,
    rule_runs as lambdaopt_runs,
    rule_sensitivity_epochs as lambdaopt_sensitivity_epochs,
    rule_settings as lambdaopt_settings,
    rule_split_dir as lambdaopt_split_dir,
    rule_splits as lambdaopt_splits,
    rule_tier as lambdaopt_tier,
)


localrules:
    lambdaopt_table,
    lambdaopt_figure_trajectory,
    lambdaopt_figure_sensitivity,
    lambdaopt_figure_groups,
    lambdaopt_official,
    lambdaopt_scorecard,


rule lambdaopt_table:
    input:
        redraw=REDRAW,
        runs=lambda wc: recorded(lambdaopt_runs(config, wc.tier)),
    output:
        md="results/{tier}/lambdaopt/tables/results.md",
        csv="results/{tier}/lambdaopt/tables/results.csv",
        tests="results/{tier}/lambdaopt/tables/paired_tests.csv",
    log:
        "logs/lambdaopt/{tier}/table.log",
    benchmark:
        "logs/benchmarks/lambdaopt/{tier}/table.tsv"
    conda:
        ENV_CPU
    threads: 1
    resources:
        mem_mb=res_mem_mb("light"),
        runtime=res_runtime("light"),
    shell:
        "recrepro lambdaopt table --tier {wildcards.tier:q} "
        "--out-md {output.md:q} --out-csv {output.csv:q} --out-tests {output.tests:q} "
        "{input.runs:q} > {log:q} 2>&1"


rule lambdaopt_figure_trajectory:
    input:
        redraw=REDRAW,
        trajectory=lambda wc: f"{lambdaopt_run_dir(config, wc.tier, wc.dataset, 'lambdaopt_dui')}/trajectory.parquet",
    output:
        pdf="results/{tier}/lambdaopt/figures/trajectory_{dataset}.pdf",
        png=report(
            "results/{tier}/lambdaopt/figures/trajectory_{dataset}.png",
            caption="../report/lambdaopt_trajectory.rst",
            category="λOpt",
            subcategory="Figures",
            labels={"figure": "3 · λ-trajectories (slide 22)", "dataset": "{dataset}"},
        ),
    log:
        "logs/lambdaopt/{tier}/figure_trajectory_{dataset}.log",
    benchmark:
        "logs/benchmarks/lambdaopt/{tier}/figure_trajectory_{dataset}.tsv"
    conda:
        ENV_CPU
    threads: 1
    resources:
        mem_mb=res_mem_mb("light"),
        runtime=res_runtime("light"),
    params:
        run=lambda wc, input: str(Path(input.trajectory).parent),
    shell:
        "recrepro lambdaopt figure-trajectory --tier {wildcards.tier:q} "
        "--dataset {wildcards.dataset:q} --run {params.run:q} --out-pdf {output.pdf:q} "
        "--out-png {output.png:q} > {log:q} 2>&1"


rule lambdaopt_figure_sensitivity:
    input:
        redraw=REDRAW,
        table=lambda wc: [
            f"results/{wc.tier}/lambdaopt/sensitivity/{d}/{s}/val_auc.parquet"
            for d, s, _ in lambdaopt_splits(config, wc.tier)
            if d == wc.dataset
        ],
    output:
        pdf="results/{tier}/lambdaopt/figures/sensitivity_{dataset}.pdf",
        png=report(
            "results/{tier}/lambdaopt/figures/sensitivity_{dataset}.png",
            caption="../report/lambdaopt_sensitivity.rst",
            category="λOpt",
            subcategory="Figures",
            labels={
                "figure": "1 · sensitivity to λ (poster Fig. 2)",
                "dataset": "{dataset}",
            },
        ),
    log:
        "logs/lambdaopt/{tier}/figure_sensitivity_{dataset}.log",
    benchmark:
        "logs/benchmarks/lambdaopt/{tier}/figure_sensitivity_{dataset}.tsv"
    conda:
        ENV_CPU
    threads: 1
    resources:
        mem_mb=res_mem_mb("light"),
        runtime=res_runtime("light"),
    params:
        epochs=lambda wc: lambdaopt_sensitivity_epochs(config, wc.tier),
    shell:
        "recrepro lambdaopt figure-sensitivity --tier {wildcards.tier:q} "
        "--dataset {wildcards.dataset:q} --table {input.table:q} --epochs {params.epochs:q} --out-pdf {output.pdf:q} "
        "--out-png {output.png:q} > {log:q} 2>&1"


rule lambdaopt_figure_groups:
    input:
        redraw=REDRAW,
        a=lambda wc: recorded(lambdaopt_group_records(config, wc.tier, wc.dataset, 0)),
        b=lambda wc: recorded(lambdaopt_group_records(config, wc.tier, wc.dataset, 1)),
        counts=lambda wc: f"{lambdaopt_run_dir(config, wc.tier, wc.dataset, lambdaopt_tier(config, wc.tier)['groups'][0])}/train_counts.parquet",
    output:
        pdf="results/{tier}/lambdaopt/figures/groups_{dataset}.pdf",
        png=report(
            "results/{tier}/lambdaopt/figures/groups_{dataset}.png",
            caption="../report/lambdaopt_groups.rst",
            category="λOpt",
            subcategory="Figures",
            labels={
                "figure": "2 · sparse vs active users (slide 21)",
                "dataset": "{dataset}",
            },
        ),
        csv="results/{tier}/lambdaopt/figures/groups_{dataset}.csv",
    log:
        "logs/lambdaopt/{tier}/figure_groups_{dataset}.log",
    benchmark:
        "logs/benchmarks/lambdaopt/{tier}/figure_groups_{dataset}.tsv"
    conda:
        ENV_CPU
    threads: 1
    resources:
        mem_mb=res_mem_mb("light"),
        runtime=res_runtime("light"),
    params:
        run_a=lambda wc, input: [str(Path(p).parent) for p in input.a],
        run_b=lambda wc, input: [str(Path(p).parent) for p in input.b],
    shell:
        "recrepro lambdaopt figure-groups --tier {wildcards.tier:q} "
        "--dataset {wildcards.dataset:q} --run-a {params.run_a:q} --run-b {params.run_b:q} "
        "--out-pdf {output.pdf:q} --out-png {output.png:q} --out-csv {output.csv:q} "
        "> {log:q} 2>&1"


rule lambdaopt_official:
    input:
        redraw=REDRAW,
        curves=lambda wc: lambdaopt_official_curves(wc.tier),
        runs=lambda wc: recorded(lambdaopt_runs(config, wc.tier)),
    output:
        md="results/{tier}/lambdaopt/tables/official.md",
        pdf="results/{tier}/lambdaopt/figures/official.pdf",
        png=report(
            "results/{tier}/lambdaopt/figures/official.png",
            caption="../report/lambdaopt_official.rst",
            category="λOpt",
            subcategory="Figures",
            labels={"figure": "4 · the released code beside ours, per epoch"},
        ),
    log:
        "logs/lambdaopt/{tier}/official.log",
    benchmark:
        "logs/benchmarks/lambdaopt/{tier}/official.tsv"
    conda:
        ENV_CPU
    threads: 1
    resources:
        mem_mb=res_mem_mb("light"),
        runtime=res_runtime("light"),
    params:
        runs_root=lambda wc: f"results/{wc.tier}/lambdaopt/runs",
        settings=lambda wc: as_json(lambdaopt_tier(config, wc.tier)["settings"]),
    shell:
        "recrepro lambdaopt official --tier {wildcards.tier:q} --runs-root {params.runs_root:q} "
        "--settings {params.settings:q} --out-md {output.md:q} --out-pdf {output.pdf:q} "
        "--out-png {output.png:q} {input.curves:q} > {log:q} 2>&1"


rule lambdaopt_scorecard:
    input:
        redraw=REDRAW,
        runs=lambda wc: recorded(lambdaopt_runs(config, wc.tier)),
        strong=lambda wc: strong_baselines_csv(wc.tier, "lambdaopt"),
    output:
        md="results/{tier}/lambdaopt/scorecard.md",
        csv="results/{tier}/lambdaopt/scorecard.csv",
    log:
        "logs/lambdaopt/{tier}/scorecard.log",
    benchmark:
        "logs/benchmarks/lambdaopt/{tier}/scorecard.tsv"
    conda:
        ENV_CPU
    threads: 1
    resources:
        mem_mb=res_mem_mb("light"),
        runtime=res_runtime("light"),
    params:
        expected=expected_digest("lambdaopt"),
        seeds=lambda wc: seeds_required("lambdaopt", wc.tier),
    shell:
        "recrepro scorecard --paper lambdaopt --tier {wildcards.tier:q} "
        "--expected-sha256 {params.expected:q} "
        "--seeds-required {params.seeds:q} --strong-baselines {input.strong:q} "
        "--out-md {output.md:q} --out-csv {output.csv:q} {input.runs:q} > {log:q} 2>&1"


PAPER_TARGETS["lambdaopt"] = (
    [
        f"results/{TIER}/lambdaopt/tables/results.md",
        f"results/{TIER}/lambdaopt/scorecard.md",
    ]
    + [
        f"results/{TIER}/lambdaopt/figures/{kind}_{d}.pdf"
        for d, _, _ in lambdaopt_splits(config, TIER)
        for kind in ("trajectory", "sensitivity", "groups")
    ]
    + (
        [
            f"results/{TIER}/lambdaopt/tables/official.md",
            f"results/{TIER}/lambdaopt/figures/official.pdf",
        ]
        if lambdaopt_official_curves(TIER)
        else []
    )
    if lambdaopt_runs(config, TIER)
    else []
)
