# Paper: PRISM (Loveland et al., KDD 2025): weight decay encodes popularity in embedding
# magnitudes; PRISM initialises the magnitudes from training degrees instead.
# Runs: results/<tier>/prism/runs/<dataset>/<protocol>/<split>/<method>/seed<k>/ with method
# names from recrepro.papers.prism.methods (e.g. mf_directau_wd1em6, mf_ssm_prism).

import recrepro.papers.prism.workflow as prism_wf  # noqa: E402  (helpers that read the config)


localrules:
    prism_figure_wd,
    prism_figure_magnitudes,
    prism_figure,
    prism_figure_theory,
    prism_table,
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
        pdf=report(
            "results/{tier}/prism/figures/fig1_weight_decay_{dataset}.pdf",
            caption="../report/prism_fig1.rst",
            category="PRISM",
        ),
        png="results/{tier}/prism/figures/fig1_weight_decay_{dataset}.png",
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
        cli=RECREPRO_MODULE,
        backbone=lambda wc: prism_wf.tier_conf(config, wc.tier)["backbone"],
        losses=lambda wc: " ".join(
            prism_wf.tier_conf(config, wc.tier)["figure1_losses"]
        ),
        wds=lambda wc: " ".join(
            repr(float(w))
            for w in prism_wf.tier_conf(config, wc.tier)["weight_decays"]
        ),
    shell:
        "{params.cli} recrepro.papers.prism figure-wd --tier {wildcards.tier} --dataset {wildcards.dataset} "
        "--backbone {params.backbone} --losses {params.losses} --weight-decays {params.wds} "
        "--out-pdf {output.pdf} --out-png {output.png} --runs {input.runs} > {log} 2>&1"


rule prism_figure_magnitudes:
    input:
        redraw=REDRAW,
        runs=lambda wc: recorded(prism_wf.fig2_runs(config, wc.tier, wc.dataset)[1]),
    output:
        pdf=report(
            "results/{tier}/prism/figures/fig2_magnitudes_{dataset}.pdf",
            caption="../report/prism_fig2.rst",
            category="PRISM",
        ),
        png="results/{tier}/prism/figures/fig2_magnitudes_{dataset}.png",
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
        cli=RECREPRO_MODULE,
        titles=lambda wc: prism_wf.fig2_titles_arg(config, wc.tier, wc.dataset),
    shell:
        "{params.cli} recrepro.papers.prism figure-magnitudes --tier {wildcards.tier} "
        "--dataset {wildcards.dataset} --titles {params.titles} --out-pdf {output.pdf} "
        "--out-png {output.png} --runs {input.runs} > {log} 2>&1"


rule prism_figure:
    input:
        redraw=REDRAW,
        runs=lambda wc: recorded(
            prism_wf.figure_runs(config, wc.tier, wc.dataset, wc.fig)
        ),
    output:
        pdf=report(
            "results/{tier}/prism/figures/{fig}_{dataset}.pdf",
            caption="../report/prism_figures.rst",
            category="PRISM",
        ),
        png="results/{tier}/prism/figures/{fig}_{dataset}.png",
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
        cli=RECREPRO_MODULE,
        spec=lambda wc: as_json(
            prism_wf.figure_spec(config, wc.tier, wc.dataset, wc.fig)[0]
        ),
    shell:
        "{params.cli} recrepro.papers.prism figure --spec {params.spec} --tier {wildcards.tier} "
        "--dataset {wildcards.dataset} --out-pdf {output.pdf} --out-png {output.png} "
        "--runs {input.runs} > {log} 2>&1"


rule prism_figure_theory:
    input:
        redraw=REDRAW,
    output:
        pdf=report(
            "results/{tier}/prism/figures/fig7_theorem31.pdf",
            caption="../report/prism_fig7.rst",
            category="PRISM",
        ),
        png="results/{tier}/prism/figures/fig7_theorem31.png",
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
        cli=RECREPRO_MODULE,
        args=lambda wc: prism_wf.theory_args(config, wc.tier),
    shell:
        "{params.cli} recrepro.papers.prism figure-theory --tier {wildcards.tier} {params.args} "
        "--out-pdf {output.pdf} --out-png {output.png} > {log} 2>&1"


rule prism_table:
    input:
        redraw=REDRAW,
        runs=lambda wc: recorded(
            prism_wf.runs(
                config, wc.tier, wc.dataset, prism_wf.table_methods(config, wc.tier)
            )
        ),
    output:
        md=report(
            "results/{tier}/prism/tables/table1_{dataset}.md",
            caption="../report/prism_table1.rst",
            category="PRISM",
        ),
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
        cli=RECREPRO_MODULE,
        backbones=lambda wc: " ".join(
            prism_wf.tier_conf(config, wc.tier)["table"]["backbones"]
        ),
        losses=lambda wc: " ".join(
            prism_wf.tier_conf(config, wc.tier)["table"]["losses"]
        ),
        alpha=lambda wc: prism_wf.tier_conf(config, wc.tier)["table"]["alpha"],
        wds=lambda wc: " ".join(
            repr(float(w))
            for w in prism_wf.tier_conf(config, wc.tier)["weight_decays"]
        ),
    shell:
        "{params.cli} recrepro.papers.prism table --tier {wildcards.tier} --dataset {wildcards.dataset} "
        "--backbones {params.backbones} --losses {params.losses} --alpha {params.alpha} "
        "--weight-decays {params.wds} --out-md {output.md} --out-csv {output.csv} "
        "--tuned-root {output.tuned} --runs {input.runs} > {log} 2>&1"


rule prism_scorecard:
    input:
        redraw=REDRAW,
        runs=lambda wc: recorded(prism_wf.all_runs(config, wc.tier)),
        tuned=lambda wc: [
            f"results/{wc.tier}/prism/tuned/{d[0]}"
            for d in prism_wf.entries(config, wc.tier)
        ],
        expected=f"{EXPECTED}/prism.yaml",
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
        cli=RECREPRO,
        seeds=lambda wc: seeds_required("prism", wc.tier),
        tuned=lambda wc: " ".join(prism_wf.tuned_dirs(config, wc.tier)),
    shell:
        "{params.cli} scorecard --paper prism --tier {wildcards.tier} --expected {input.expected} "
        "--seeds-required {params.seeds} "
        "--out-md {output.md} --out-csv {output.csv} {input.runs} {params.tuned} > {log} 2>&1"


PAPER_TARGETS["prism"] = prism_wf.targets(config, TIER)
