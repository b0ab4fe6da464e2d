# recrepro: from raw data to the papers' figures.
#
#   snakemake --cores 2                                   smoke tier (synthetic, offline)
#   snakemake --cores 8 --config tier=paper data.mirror=../shared/datasets
#   snakemake --cores 2 results/smoke/baselines/scorecard.md   one target


configfile: "config.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/baselines.smk"


rule all:
    default_target: True
    input:
        all_targets(),
