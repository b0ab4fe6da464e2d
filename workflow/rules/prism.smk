# Paper: PRISM (Loveland et al., KDD 2025): weight decay encodes popularity in embedding
# magnitudes; PRISM initialises the magnitudes from training degrees instead.
# Runs: results/<tier>/prism/runs/<dataset>/<protocol>/<split>/<method>/seed<k>/ with method
# names from recrepro.papers.prism.methods (e.g. mf_directau_wd1em6, mf_ssm_prism).

import recrepro.papers.prism.rules as prism_wf  # noqa: E402  (helpers that read the config)


localrules:
    prism_figure_wd,
    prism_figure_magnitudes,
    prism_figure,
    prism_figure_theory,
    prism_table,
    prism_alpha_sweep,
    prism_lr_search,
    prism_scorecard,


rule prism_figure_wd:
    input:
        redraw=REDRAW,
        runs=lambda wc: recorded(
            prism_wf.runs(
                config, wc.tier, wc.dataset, prism_wf.fig1_methods(config, wc.tier)
            )
        ),
    output:
        pdf="results/{tier}/prism/figures/fig1_weight_decay_{dataset}.pdf",
        png=report(
            "results/{tier}/prism/figures/fig1_weight_decay_{dataset}.png",
            caption="../report/prism_fig1.rst",
            category="PRISM",
            subcategory="Figures",
            labels=lambda wc: prism_wf.report_labels("fig1_weight_decay", wc.dataset),
        ),
    log:
        "logs/prism/{tier}/fig1_{dataset}.log",
    benchmark:
        "logs/benchmarks/prism/{tier}/fig1_{dataset}.tsv"
    conda:
        ENV_CPU
    threads: 1
    resources:
        mem_mb=res_mem_mb("light"),
        runtime=res_runtime("light"),
    params:
        backbone=lambda wc: prism_wf.tier_conf(config, wc.tier)["backbone"],
        losses=lambda wc: list(prism_wf.tier_conf(config, wc.tier)["figure1_losses"]),
        wds=lambda wc: list(
            repr(float(w))
            for w in prism_wf.tier_conf(config, wc.tier)["weight_decays"]
        ),
    shell:
        "recrepro prism figure-wd --tier {wildcards.tier:q} --dataset {wildcards.dataset:q} "
        "--backbone {params.backbone:q} --losses {params.losses:q} --weight-decays {params.wds:q} "
        "--out-pdf {output.pdf:q} --out-png {output.png:q} --runs {input.runs:q} > {log:q} 2>&1"


rule prism_figure_magnitudes:
    input:
        redraw=REDRAW,
        runs=lambda wc: recorded(prism_wf.fig2_runs(config, wc.tier, wc.dataset)[1]),
    output:
        pdf="results/{tier}/prism/figures/fig2_magnitudes_{dataset}.pdf",
        png=report(
            "results/{tier}/prism/figures/fig2_magnitudes_{dataset}.png",
            caption="../report/prism_fig2.rst",
            category="PRISM",
            subcategory="Figures",
            labels=lambda wc: prism_wf.report_labels("fig2_magnitudes", wc.dataset),
        ),
    log:
        "logs/prism/{tier}/fig2_{dataset}.log",
    benchmark:
        "logs/benchmarks/prism/{tier}/fig2_{dataset}.tsv"
    conda:
        ENV_CPU
    threads: 1
    resources:
        mem_mb=res_mem_mb("light"),
        runtime=res_runtime("light"),
    params:
        titles=lambda wc: prism_wf.fig2_titles_arg(config, wc.tier, wc.dataset),
    shell:
        "recrepro prism figure-magnitudes --tier {wildcards.tier:q} "
        "--dataset {wildcards.dataset:q} --titles {params.titles:q} --out-pdf {output.pdf:q} "
        "--out-png {output.png:q} --runs {input.runs:q} > {log:q} 2>&1"


rule prism_figure:
    input:
        redraw=REDRAW,
        runs=lambda wc: recorded(
            prism_wf.figure_runs(
                config, wc.tier, wc.dataset, wc.fig, prism_figure_chosen(wc)
            )
        ),
        # the figures that read Table 1's picks read them from here (prism_figure_chosen)
        selection=lambda wc: (
            [f"results/{wc.tier}/prism/tables/wd_selection_{wc.dataset}.json"]
            if wc.fig in prism_wf.PICK_LR_FIGURES
            else []
        ),
    output:
        pdf="results/{tier}/prism/figures/{fig}_{dataset}.pdf",
        png=report(
            "results/{tier}/prism/figures/{fig}_{dataset}.png",
            caption="../report/prism_figures.rst",
            category="PRISM",
            subcategory="Figures",
            labels=lambda wc: prism_wf.report_labels(wc.fig, wc.dataset),
        ),
    log:
        "logs/prism/{tier}/{fig}_{dataset}.log",
    benchmark:
        "logs/benchmarks/prism/{tier}/{fig}_{dataset}.tsv"
    wildcard_constraints:
        fig="|".join(prism_wf.EXTRA_FIGURES),
    conda:
        ENV_CPU
    threads: 1
    resources:
        mem_mb=res_mem_mb("light"),
        runtime=res_runtime("light"),
    params:
        spec=lambda wc: as_json(
            prism_wf.figure_spec(
                config,
                wc.tier,
                wc.dataset,
                wc.fig,
                prism_figure_chosen(wc, params=True),
            )[0]
        ),
    shell:
        "recrepro prism figure --spec {params.spec:q} --tier {wildcards.tier:q} "
        "--dataset {wildcards.dataset:q} --out-pdf {output.pdf:q} --out-png {output.png:q} "
        "--runs {input.runs:q} > {log:q} 2>&1"


rule prism_figure_theory:
    input:
        redraw=REDRAW,
    output:
        pdf="results/{tier}/prism/figures/fig7_theorem31.pdf",
        png=report(
            "results/{tier}/prism/figures/fig7_theorem31.png",
            caption="../report/prism_fig7.rst",
            category="PRISM",
            subcategory="Figures",
            labels=lambda wc: prism_wf.report_labels(
                "fig7_theorem31", "none (theory)"
            ),
        ),
    log:
        "logs/prism/{tier}/fig7_theorem31.log",
    benchmark:
        "logs/benchmarks/prism/{tier}/fig7_theorem31.tsv"
    conda:
        ENV_CPU
    threads: 1
    resources:
        mem_mb=res_mem_mb("light"),
        runtime=res_runtime("light"),
    params:
        args=lambda wc: prism_wf.theory_args(config, wc.tier),
    shell:
        "recrepro prism figure-theory --tier {wildcards.tier:q} {params.args:q} "
        "--out-pdf {output.pdf:q} --out-png {output.png:q} > {log:q} 2>&1"


checkpoint prism_select_wd:
    input:
        redraw=REDRAW,
        runs=lambda wc: recorded(prism_wf.selection_runs(config, wc.tier, wc.dataset)),
    output:
        "results/{tier}/prism/tables/wd_selection_{dataset}.json",
    log:
        "logs/prism/{tier}/wd_selection_{dataset}.log",
    benchmark:
        "logs/benchmarks/prism/{tier}/wd_selection_{dataset}.tsv"
    conda:
        ENV_CPU
    threads: 1
    resources:
        mem_mb=res_mem_mb("light"),
        runtime=res_runtime("light"),
    params:
        backbones=lambda wc: list(
            prism_wf.tier_conf(config, wc.tier)["table"]["backbones"]
        ),
        losses=lambda wc: list(prism_wf.tier_conf(config, wc.tier)["table"]["losses"]),
        wds=lambda wc: list(
            repr(float(w))
            for w in prism_wf.tier_conf(config, wc.tier)["weight_decays"]
        ),
        alpha=lambda wc: prism_wf.tier_conf(config, wc.tier)["table"]["alpha"],
        lr_search=lambda wc: as_json(prism_wf.lr_search_arg(config, wc.tier)),
    shell:
        "recrepro prism select-wd --backbones {params.backbones:q} "
        "--losses {params.losses:q} --weight-decays {params.wds:q} --alpha {params.alpha:q} "
        "--lr-search {params.lr_search:q} --out {output:q} "
        "--runs {input.runs:q} > {log:q} 2>&1"


rule prism_table:
    input:
        redraw=REDRAW,
        selection="results/{tier}/prism/tables/wd_selection_{dataset}.json",
        runs=lambda wc: recorded(
            prism_wf.table_runs(config, wc.tier, wc.dataset, prism_chosen(wc))
        ),
    output:
        # in the report as HTML (rule table_html), not as a Markdown download
        md="results/{tier}/prism/tables/table1_{dataset}.md",
        csv="results/{tier}/prism/tables/table1_{dataset}.csv",
        tuned=directory("results/{tier}/prism/tuned/{dataset}"),
    log:
        "logs/prism/{tier}/table1_{dataset}.log",
    benchmark:
        "logs/benchmarks/prism/{tier}/table1_{dataset}.tsv"
    conda:
        ENV_CPU
    threads: 1
    resources:
        mem_mb=res_mem_mb("light"),
        runtime=res_runtime("light"),
    params:
        backbones=lambda wc: list(
            prism_wf.tier_conf(config, wc.tier)["table"]["backbones"]
        ),
        losses=lambda wc: list(prism_wf.tier_conf(config, wc.tier)["table"]["losses"]),
        alpha=lambda wc: prism_wf.tier_conf(config, wc.tier)["table"]["alpha"],
        wds=lambda wc: list(
            repr(float(w))
            for w in prism_wf.tier_conf(config, wc.tier)["weight_decays"]
        ),
        diagnostic=lambda wc: list(
            prism_wf.tier_conf(config, wc.tier)["table"].get(
                "diagnostic_backbones", []
            )
        ),
        lr_search=lambda wc: as_json(prism_wf.lr_search_arg(config, wc.tier)),
        lr=lambda wc: prism_wf.tier_conf(config, wc.tier)["lr"],
    shell:
        "recrepro prism table --tier {wildcards.tier:q} --dataset {wildcards.dataset:q} "
        "--backbones {params.backbones:q} --losses {params.losses:q} --alpha {params.alpha:q} "
        "--diagnostic-backbones {params.diagnostic:q} --lr-search {params.lr_search:q} --tier-lr {params.lr:q} "
        "--weight-decays {params.wds:q} --out-md {output.md:q} --out-csv {output.csv:q} "
        "--tuned-root {output.tuned:q} --selection {input.selection:q} --runs {input.runs:q} > {log:q} 2>&1"


# The α sweep (Fig. 5) on every seed at the learning rate of Table 1's PRISM pick: claim P5's table
# (recrepro.papers.prism.alpha).
rule prism_alpha_sweep:
    input:
        redraw=REDRAW,
        selection="results/{tier}/prism/tables/wd_selection_{dataset}.json",
        runs=lambda wc: recorded(
            prism_wf.alpha_sweep_runs(config, wc.tier, wc.dataset, prism_chosen(wc))
        ),
    output:
        md="results/{tier}/prism/tables/alpha_sweep_{dataset}.md",
        csv="results/{tier}/prism/tables/alpha_sweep_{dataset}.csv",
        tuned=directory("results/{tier}/prism/tuned_alpha/{dataset}"),
    log:
        "logs/prism/{tier}/alpha_sweep_{dataset}.log",
    benchmark:
        "logs/benchmarks/prism/{tier}/alpha_sweep_{dataset}.tsv"
    conda:
        ENV_CPU
    threads: 1
    resources:
        mem_mb=res_mem_mb("light"),
        runtime=res_runtime("light"),
    params:
        sweep=lambda wc: as_json(
            prism_wf.alpha_sweep_arg(config, wc.tier, prism_chosen_read(wc))
        ),
    shell:
        "recrepro prism alpha-sweep --tier {wildcards.tier:q} --dataset {wildcards.dataset:q} "
        "--sweep {params.sweep:q} --out-md {output.md:q} --out-csv {output.csv:q} "
        "--selection {input.selection:q} --tuned-root {output.tuned:q} "
        "--runs {input.runs:q} > {log:q} 2>&1"


# Every (λ, lr) point of Table 1's learning-rate pick (table.lr_search), on the selection's seeds:
# its record or "not run", each arm's pick marked (recrepro.papers.prism.tables.lr_search_table).
rule prism_lr_search:
    input:
        redraw=REDRAW,
        selection="results/{tier}/prism/tables/wd_selection_{dataset}.json",
        runs=lambda wc: recorded(prism_wf.lr_search_runs(config, wc.tier, wc.dataset)),
    output:
        # in the report as HTML (rule table_html), not as a Markdown download
        md="results/{tier}/prism/tables/lr_search_{dataset}.md",
        csv="results/{tier}/prism/tables/lr_search_{dataset}.csv",
    log:
        "logs/prism/{tier}/lr_search_{dataset}.log",
    benchmark:
        "logs/benchmarks/prism/{tier}/lr_search_{dataset}.tsv"
    conda:
        ENV_CPU
    threads: 1
    resources:
        mem_mb=res_mem_mb("light"),
        runtime=res_runtime("light"),
    params:
        backbones=lambda wc: list(
            prism_wf.tier_conf(config, wc.tier)["table"]["backbones"]
        ),
        losses=lambda wc: list(prism_wf.tier_conf(config, wc.tier)["table"]["losses"]),
        alpha=lambda wc: prism_wf.tier_conf(config, wc.tier)["table"]["alpha"],
        wds=lambda wc: list(
            repr(float(w))
            for w in prism_wf.tier_conf(config, wc.tier)["weight_decays"]
        ),
        lr_search=lambda wc: as_json(prism_wf.lr_search_arg(config, wc.tier)),
        lr=lambda wc: prism_wf.tier_conf(config, wc.tier)["lr"],
        seeds=lambda wc: prism_wf.selection_seeds(config, wc.tier, wc.dataset),
    shell:
        "recrepro prism lr-search --tier {wildcards.tier:q} --dataset {wildcards.dataset:q} "
        "--backbones {params.backbones:q} --losses {params.losses:q} --alpha {params.alpha:q} "
        "--lr-search {params.lr_search:q} --tier-lr {params.lr:q} --seeds {params.seeds:q} "
        "--weight-decays {params.wds:q} --out-md {output.md:q} --out-csv {output.csv:q} "
        "--selection {input.selection:q} --runs {input.runs:q} > {log:q} 2>&1"


rule prism_scorecard:
    input:
        redraw=REDRAW,
        runs=lambda wc: recorded(prism_wf.all_runs(config, wc.tier)),
        tuned=lambda wc: [
            f"results/{wc.tier}/prism/tuned/{d[0]}"
            for d in prism_wf.entries(config, wc.tier)
            if recorded(prism_wf.selection_runs(config, wc.tier, d[0]))
        ]
        + prism_tuned_alpha(wc.tier),
        strong=lambda wc: strong_baselines_csv(wc.tier, "prism"),
    output:
        md="results/{tier}/prism/scorecard.md",
        csv="results/{tier}/prism/scorecard.csv",
    log:
        "logs/prism/{tier}/scorecard.log",
    benchmark:
        "logs/benchmarks/prism/{tier}/scorecard.tsv"
    conda:
        ENV_CPU
    threads: 1
    resources:
        mem_mb=res_mem_mb("light"),
        runtime=res_runtime("light"),
    params:
        expected=expected_digest("prism"),
        seeds=lambda wc: seeds_required("prism", wc.tier),
        tuned=lambda wc, input: list(
            str(p.parent)
            for d in input.tuned
            for p in sorted(Path(d).glob("*/seed*/metrics.json"))
        ),
    shell:
        "recrepro scorecard --paper prism --tier {wildcards.tier:q} "
        "--expected-sha256 {params.expected:q} "
        "--seeds-required {params.seeds:q} --strong-baselines {input.strong:q} "
        "--out-md {output.md:q} --out-csv {output.csv:q} {input.runs:q} {params.tuned:q} > {log:q} 2>&1"


# the dataset summaries read data: a redraw takes the committed ones
PAPER_TARGETS["prism"] = prism_wf.targets(config, TIER) + recorded(
    prism_wf.dataset_summaries(config, TIER)
)
