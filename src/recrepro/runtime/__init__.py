"""What a run needs from the process it runs in: checkpoints and resuming, the torch device, thread
and option conventions every verb shares, the torch shims, the cluster resources a job asks for, and a
description of the machine for provenance."""
