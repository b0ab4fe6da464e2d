# The HTML report (snakemake --report results/<tier>/report.html): every paper's figures are wrapped
# in report() in its own rule file (the PNG: browsers show it inline; the PDF stays a file for papers
# and slides); here each scorecard and Markdown table is rendered as an HTML page (the report shows
# HTML inline, Markdown only as a download). Items are filed under the paper's category and the
# subcategories Figures / Tables / Scorecard, with labels that sort in the paper's order. Captions
# are reStructuredText: write metric names as NDCG\@20 (a bare NDCG@20 becomes a mailto: link).

import re

from snakemake.io import is_flagged, regex_from_filepattern

from recrepro.paperlist import PAPERS
from recrepro.scorecard import SUMMARY_PAPERS

# the report's category of each paper: its short title in the registry (recrepro.paperlist)
REPORT_CATEGORIES = {
    "baselines": "Baselines",
    **{paper.key: paper.short_title for paper in PAPERS},
}


localrules:
    claims,
    claims_html,
    claims_forest,
    scorecard_html,
    table_html,
    reference_readme,
    compute_doc,


rule scorecard_html:
    input:
        redraw=REDRAW,
        md="results/{tier}/{paper}/scorecard.md",
        csv="results/{tier}/{paper}/scorecard.csv",
    output:
        html=report(
            "results/{tier}/{paper}/scorecard.html",
            caption="../report/scorecard.rst",
            category=lambda wc: REPORT_CATEGORIES.get(wc.paper, wc.paper),
            subcategory="Scorecard",
            labels={"scorecard": "{paper}, {tier} tier"},
        ),
    log:
        "logs/report/{tier}/{paper}/scorecard_html.log",
    wildcard_constraints:
        paper=r"[a-z]+",
    conda:
        ENV_CPU
    threads: 1
    resources:
        mem_mb=res_mem_mb("light"),
        runtime=res_runtime("light"),
    shell:
        "recrepro report scorecard-html --md {input.md:q} --csv {input.csv:q} "
        "--out {output.html:q} > {log:q} 2>&1"


rule table_html:
    input:
        redraw=REDRAW,
        md="results/{tier}/{paper}/{table}.md",
    output:
        html=report(
            "results/{tier}/{paper}/{table}.html",
            caption="../report/table.rst",
            category=lambda wc: REPORT_CATEGORIES.get(wc.paper, wc.paper),
            subcategory="Tables",
            labels={"table": "{table}"},
        ),
    log:
        "logs/report/{tier}/{paper}/{table}_html.log",
    wildcard_constraints:
        paper=r"[a-z]+",
        table=r"(tables/)?[A-Za-z0-9_\-]+",
    conda:
        ENV_CPU
    threads: 1
    resources:
        mem_mb=res_mem_mb("light"),
        runtime=res_runtime("light"),
    shell:
        "recrepro report table-html --md {input.md:q} --out {output.html:q} "
        "> {log:q} 2>&1"


ruleorder: scorecard_html > table_html


# Verdicts on each paper's headline claims (claims: in src/recrepro/expected/<paper>.yaml), computed
# from the records under results/<tier>/<paper>/ and the figures' and tables' files drawn from them
# (so the rule waits for every other target of the paper).
rule claims:
    input:
        redraw=REDRAW,
        # the paper's other drawn targets (figures, tables, scorecard, strong baselines)
        drawn=lambda wc: recorded(
            [f"results/{wc.tier}/{wc.paper}/scorecard.csv"]
            + [
                str(t)
                for ts in PAPER_TARGETS.values()
                for t in ts
                if str(t).startswith(f"results/{wc.tier}/{wc.paper}/")
                and Path(str(t)).stem != "claims"
            ]
        ),
        # the leak audit's table: its rows of the paper open the page
        audit=lambda wc: recorded(f"results/{wc.tier}/leak_audit.csv"),
    output:
        md="results/{tier}/{paper}/claims.md",
        csv="results/{tier}/{paper}/claims.csv",
        # one row per check result (effect, CI, target region): the forest plot's input
        checks="results/{tier}/{paper}/checks.csv",
    log:
        "logs/report/{tier}/{paper}/claims.log",
    benchmark:
        "logs/benchmarks/report/{tier}/{paper}/claims.tsv"
    wildcard_constraints:
        paper="|".join(SUMMARY_PAPERS),
    conda:
        ENV_CPU
    threads: 1
    resources:
        mem_mb=res_mem_mb("light"),
        runtime=res_runtime("light"),
    params:
        expected=lambda wc: expected_digest(wc.paper),
        seeds=lambda wc: seeds_required(wc.paper, wc.tier),
        results=lambda wc, output: str(Path(output.md).parent),
        # the paper's planned run records: a name a check uses that neither they, the records nor the
        # expected entries know is a typo, refused
        audit=lambda wc: f"results/{wc.tier}/leak_audit.csv",
        # (every tier's: a name the paper tier plans is no typo on the smoke tier's page)
        planned=lambda wc: as_json(
            sorted(
                r
                for tier in ("smoke", "paper")
                for r in tier_run_records(tier) + tier_alias_records(tier)
                if f"/{wc.paper}/" in r
            )
        ),
    shell:
        # the list reaches recrepro through a pipe (a builtin's output has no argument-size limit)
        "recrepro claims --paper {wildcards.paper:q} --tier {wildcards.tier:q} "
        "--results {params.results:q} --seeds-required {params.seeds:q} "
        "--planned-runs <(printf '%s' {params.planned:q}) --leak-audit {params.audit:q} "
        "--out-md {output.md:q} --out-csv {output.csv:q} --out-checks {output.checks:q} "
        "> {log:q} 2>&1"


rule claims_html:
    input:
        redraw=REDRAW,
        md="results/{tier}/{paper}/claims.md",
    output:
        html=report(
            "results/{tier}/{paper}/claims.html",
            caption="../report/claims.rst",
            category="Claims",
            subcategory=lambda wc: REPORT_CATEGORIES.get(wc.paper, wc.paper),
            labels=lambda wc: {
                "paper": REPORT_CATEGORIES.get(wc.paper, wc.paper),
                "tier": wc.tier,
            },
        ),
    log:
        "logs/report/{tier}/{paper}/claims_html.log",
    benchmark:
        "logs/benchmarks/report/{tier}/{paper}/claims_html.tsv"
    wildcard_constraints:
        paper="|".join(SUMMARY_PAPERS),
    conda:
        ENV_CPU
    threads: 1
    resources:
        mem_mb=res_mem_mb("light"),
        runtime=res_runtime("light"),
    shell:
        "recrepro report table-html --md {input.md:q} --out {output.html:q} "
        "> {log:q} 2>&1"


ruleorder: claims_html > table_html


# The claims' checks as a forest plot: effect and CI of each check against the region its claim asks for.
rule claims_forest:
    input:
        redraw=REDRAW,
        checks="results/{tier}/{paper}/checks.csv",
    output:
        # PNG only: the report and the pages show it, and results/paper stays under its 30 MB
        png=report(
            "results/{tier}/{paper}/figures/claims.png",
            caption="../report/claims_forest.rst",
            category="Claims",
            subcategory=lambda wc: REPORT_CATEGORIES.get(wc.paper, wc.paper),
            labels=lambda wc: {
                "paper": REPORT_CATEGORIES.get(wc.paper, wc.paper),
                "tier": wc.tier,
                "figure": "forest plot of the checks",
            },
        ),
    log:
        "logs/report/{tier}/{paper}/claims_forest.log",
    benchmark:
        "logs/benchmarks/report/{tier}/{paper}/claims_forest.tsv"
    wildcard_constraints:
        paper="|".join(SUMMARY_PAPERS),
    conda:
        ENV_CPU
    threads: 1
    resources:
        mem_mb=res_mem_mb("light"),
        runtime=res_runtime("light"),
    shell:
        "recrepro claims-forest --checks {input.checks:q} --tier {wildcards.tier:q} "
        "--out-png {output.png:q} > {log:q} 2>&1"


PAPER_TARGETS["claims"] = (
    [
        f"results/{TIER}/{paper}/claims{ext}"
        for paper in SUMMARY_PAPERS
        for ext in (".md", ".csv", ".html")
    ]
    + [f"results/{TIER}/{paper}/figures/claims.png" for paper in SUMMARY_PAPERS]
    + [f"results/{TIER}/leak_audit.csv"]
)


# One HTML page beside every Markdown table this tier builds: scorecards (baselines + every registered
# paper) and the papers' other .md tables that their rules do not already put in the report.
_REPORTED_MD = [
    re.compile(regex_from_filepattern(str(out)))
    for r in workflow.rules
    for out in r.output
    if is_flagged(out, "report") and str(out).endswith(".md")
]
PAPER_TARGETS["report"] = [
    str(Path(md).with_suffix(".html"))
    for md in dict.fromkeys(
        [f"results/{TIER}/baselines/scorecard.md"]
        + [
            str(t)
            for ts in PAPER_TARGETS.values()
            for t in ts
            if str(t).endswith(".md")
        ]
    )
    if not any(p.match(md) for p in _REPORTED_MD)
]


rule reference_readme:
    input:
        redraw=REDRAW,
        cards=lambda wc: recorded(
            [f"results/{wc.tier}/{p}/scorecard.csv" for p in SUMMARY_PAPERS]
        ),
        availability="results/{tier}/datasets.json",
        claims=expand("results/{{tier}}/{paper}/claims.csv", paper=SUMMARY_PAPERS),
        # its data checks read the processed sizes (PRISM's per dataset; FedRAP's through its table)
        summaries=lambda wc: recorded(prism_wf.dataset_summaries(config, wc.tier)),
        # the page shows the tier's figures and links its tables: drawn first, never mid-redraw
        shown=lambda wc: readme_shown_files(),
    output:
        "results/{tier}/README.md",
    log:
        "logs/report/{tier}/reference_readme.log",
    benchmark:
        "logs/benchmarks/report/{tier}/reference_readme.tsv"
    conda:
        ENV_CPU
    threads: 1
    resources:
        mem_mb=res_mem_mb("light"),
        runtime=res_runtime("light"),
    params:
        results=lambda wc, output: str(Path(output[0]).parent),
        figures=lambda wc: tier_figures(),
    shell:
        "recrepro report reference --results {params.results:q} --out {output:q} "
        "--expected-figures {params.figures:q} > {log:q} 2>&1"


rule compute_doc:
    input:
        redraw=REDRAW,
        runs=lambda wc: recorded(tier_run_records("paper")),
        availability="results/paper/datasets.json",
        selections=lambda wc: prism_selections("paper"),
        official=lambda wc: fedrap_official_curves("paper"),
    output:
        "docs/compute.md",
    log:
        "logs/report/compute_doc.log",
    benchmark:
        "logs/benchmarks/report/compute_doc.tsv"
    conda:
        ENV_CPU
    threads: 1
    resources:
        mem_mb=res_mem_mb("light"),
        runtime=res_runtime("light"),
    params:
        expected=as_json(tier_run_records("paper")),
        picked=lambda wc: as_json(prism_picked_runs("paper")),
        # grid records today's configuration has moved past (a walk switched on later): queued again
        outdated=lambda wc: as_json(strong_wf.outdated_grids(config, "paper")),
        # jobs timed only in part (recrepro.reporting.compute_page.partial_rates): an edit reprices the page
        partial=expected_digest("compute"),
    shell:
        # the lists reach recrepro through a pipe: a builtin's output has no argument-size limit, an
        # exec'd command's arguments do (the tier's planned runs are thousands of paths)
        "recrepro report compute --expected-runs <(printf '%s' {params.expected:q}) "
        "--picked-runs <(printf '%s' {params.picked:q}) "
        "--outdated <(printf '%s' {params.outdated:q}) "
        "--availability {input.availability:q} --official {input.official:q} "
        "--out {output:q} > {log:q} 2>&1"


if TIER == "paper":
    PAPER_TARGETS["reference"] = [f"results/{TIER}/README.md", "docs/compute.md"]


# the leak audit's table, from the per-split audits (data.smk); each claims page opens with its rows
rule leak_audit:
    input:
        redraw=REDRAW,
        audits=lambda wc: recorded(leak_audits(wc.tier)),
    output:
        csv="results/{tier}/leak_audit.csv",
        md="results/{tier}/leak_audit.md",
    log:
        "logs/data/{tier}/leak_audit.log",
    benchmark:
        "logs/benchmarks/data/{tier}/leak_audit.tsv"
    conda:
        ENV_CPU
    threads: 1
    resources:
        mem_mb=res_mem_mb("light"),
        runtime=res_runtime("light"),
    shell:
        "recrepro leaks table --out-csv {output.csv:q} --out-md {output.md:q} {input.audits:q} "
        "> {log:q} 2>&1"
