# Paper: fedrap. Rules, targets and figures of this paper (see the issue for the paper).
# Register the files `snakemake` builds by default for the current tier:
#     PAPER_TARGETS["fedrap"] = [...]


PAPER_TARGETS["fedrap"] = []
