# recrepro: from raw data to the papers' figures.
#
#   snakemake --cores 2                                   smoke tier (synthetic, offline)
#   snakemake --cores 8 --config tier=paper 'data={mirror: ../shared/datasets}'
#   snakemake --cores 2 --config tier=paper from_records=true   redraw from results/paper/ records
#   snakemake --cores 2 results/smoke/baselines/scorecard.md   one target

import sys
from pathlib import Path

# config.yaml and every --configfile are read with recrepro's loader first: a YAML syntax error is named by
# its line and column, a key given twice is refused (Snakemake's own loader says neither).
sys.path.insert(0, str(Path(workflow.basedir) / "src"))
from recrepro.config import check_config_files  # noqa: E402
from recrepro.paperlist import PAPERS  # noqa: E402

check_config_files(["config.yaml", *workflow.overwrite_configfiles])


configfile: "config.yaml"


# The landing text of the HTML report (snakemake --report results/<tier>-report.html); Jinja in it picks
# the text by config["tier"] (paper: the Claims category and results/paper/README.md first).
report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
# Figures, tables, scorecards and reports: drawn from run records only. Each paper's rule files are
# workflow/rules/<paper>.smk and <paper>_runs.smk, included in the registry's order (recrepro.paperlist).
include: "workflow/rules/baselines.smk"


for _paper in PAPERS:

    include: _paper.rule_files[0]


include: "workflow/rules/strong.smk"
include: "workflow/rules/report.smk"


# Data, training and evaluation: the jobs that make the run records. With from_records=true
# they are left out and the records under results/<tier>/ are the inputs of the rules above.
if not FROM_RECORDS:

    include: "workflow/rules/data.smk"
    include: "workflow/rules/baselines_runs.smk"

    for _paper in PAPERS:

        include: _paper.rule_files[1]
    # the tuned strong baselines' grids on the papers' splits
    include: "workflow/rules/strong_runs.smk"


rule all:
    default_target: True
    input:
        all_targets(),


# A failed redraw leaves the committed files as they were: Snakemake removes a job's outputs before it
# runs and again when it fails; flagged `update`, they are kept, backed up and restored on failure
# ("Restored previous version of ..."). Snakemake keeps a path's flags on its `_file`.
if FROM_RECORDS:
    from snakemake.io import flag

    for _rule in workflow.rules:
        for _out in _rule.output:
            _out._file = flag(_out._file, "update")
