# recrepro: from raw data to the papers' figures.
#
#   snakemake --cores 2                                   smoke tier (synthetic, offline)
#   snakemake --cores 8 --config tier=paper 'data={mirror: ../shared/datasets}'
#   snakemake --cores 2 results/smoke/baselines/scorecard.md   one target


configfile: "config.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/baselines.smk"
include: "workflow/rules/exadmm.smk"
include: "workflow/rules/prism.smk"
include: "workflow/rules/lambdaopt.smk"
include: "workflow/rules/fedrap.smk"
include: "workflow/rules/lrs.smk"
include: "workflow/rules/report.smk"


rule all:
    default_target: True
    input:
        all_targets(),
