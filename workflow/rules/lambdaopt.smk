# Paper: lambdaopt. Rules, targets and figures of this paper (see the issue for the paper).
# Register the files `snakemake` builds by default for the current tier:
#     PAPER_TARGETS["lambdaopt"] = [...]


PAPER_TARGETS["lambdaopt"] = []
