# recrepro: from raw data to the papers' figures.
#
#   snakemake --cores 2                                   smoke tier (synthetic, offline)
#   snakemake --cores 8 --config tier=paper 'data={mirror: ../shared/datasets}'
#   snakemake --cores 2 --config tier=paper from_records=true   redraw from results/paper/ records
#   snakemake --cores 2 results/smoke/baselines/scorecard.md   one target


configfile: "config.yaml"


# The landing text of the HTML report (snakemake --report results/<tier>-report.html).
report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
# Figures, tables, scorecards and reports: drawn from run records only.
include: "workflow/rules/baselines.smk"
include: "workflow/rules/exadmm.smk"
include: "workflow/rules/prism.smk"
include: "workflow/rules/lambdaopt.smk"
include: "workflow/rules/fedrap.smk"
include: "workflow/rules/lrs.smk"
include: "workflow/rules/report.smk"


# Data, training and evaluation: the jobs that make the run records. With from_records=true
# they are left out and the records under results/<tier>/ are the inputs of the rules above.
if not FROM_RECORDS:

    include: "workflow/rules/data.smk"
    include: "workflow/rules/baselines_runs.smk"
    include: "workflow/rules/exadmm_runs.smk"
    include: "workflow/rules/prism_runs.smk"
    include: "workflow/rules/lambdaopt_runs.smk"
    include: "workflow/rules/fedrap_runs.smk"
    include: "workflow/rules/lrs_runs.smk"


rule all:
    default_target: True
    input:
        all_targets(),
