"""Run records: the three files every training/evaluation run leaves behind.

A run directory ``results/<tier>/<paper>/runs/<dataset>/<split>/<method>/seed<k>/`` holds

``metrics.json``
    Overall and stratified metrics, user counts and the run's identity
    (dataset, split, method, seed, tier, plus any other ``meta`` keys). Written with
    sorted keys, so identical metrics give byte-identical files.
``per_user.parquet``
    Column ``user`` plus one float column per per-user metric (for paired tests).
``provenance.json``
    Everything needed to say *how* the numbers were produced: the config slice and its
    hash, the split files' hashes, git commit, library versions, seed, device, thread
    settings, host, wall time, peak memory and the Snakemake benchmark file.

``timings.json``
    Wall-clock measurements of the run (seconds per epoch or round, seconds to the best
    epoch, ...), split off ``metrics.json`` and the histories by :func:`write_history`
    and :func:`write_run_record`. A rerun with the same seed on the same device leaves
    metrics and histories byte-identical; only ``timings.json`` and ``provenance.json``
    change, so ``git diff results/paper`` shows only real differences.

``metrics.json`` is written last and removed first, so its presence means the record
is complete. :func:`check_finite` is the guard training code calls on tensors; a run
that trips it raises before anything is written.

The package's modules, by what each is: :mod:`.write` (writing a run record), :mod:`.correlations`
(a per-item table's rank correlations, kept in ``metrics.json``), :mod:`.provenance` (``provenance.json``'s
content), :mod:`.history` (training histories), :mod:`.read` (reading a record
back), :mod:`.timings` (the wall-clock values kept apart), :mod:`.values` (what a record's numbers may
be), :mod:`.layout` (the files' names and JSON text), :mod:`.normalise` (records of earlier versions),
:mod:`.errors` and :mod:`.drift` (records against today's configuration). Everything other code uses
is importable from ``recrepro.records`` itself.
"""

from __future__ import annotations

from recrepro.records.correlations import (
    RANK_CORRELATION_PAIRS,
    rank_correlation,
    rank_correlations,
    rank_correlations_of,
    write_rank_correlations,
)
from recrepro.records.errors import ManifestMismatchError, NonFiniteError, RecordValueError, RunRecordError
from recrepro.records.history import read_history, write_history
from recrepro.records.layout import (
    METRICS_FILE,
    PER_USER_FILE,
    PROVENANCE_FILE,
    RANK_CORRELATIONS_KEY,
    TIMING_DECIMALS,
    TIMINGS_FILE,
    TIMINGS_KEY,
    history_text,
    provenance_text,
    write_provenance,
)
from recrepro.records.normalise import normalise_run_dir
from recrepro.records.provenance import (
    PROVENANCE_SCHEMA_VERSION,
    RunProvenance,
    canonical_json,
    config_sha256,
    portable_split_path,
    split_file_hashes,
)
from recrepro.records.read import read_metrics, read_per_user, read_record_json
from recrepro.records.timings import is_timing_key, read_timings
from recrepro.records.values import check_finite, check_record_values, is_unit_metric
# ``_group_by_k``: the tests check how metrics.json groups the metrics by cut-off
from recrepro.records.write import REQUIRED_META_KEYS, _group_by_k, write_run_record
# the machine's description, which records carry in their provenance, as this package offered it before
from recrepro.runtime.machine import git_state, process_cpu_seconds

__all__ = [
    "METRICS_FILE",
    "PER_USER_FILE",
    "PROVENANCE_FILE",
    "PROVENANCE_SCHEMA_VERSION",
    "RANK_CORRELATIONS_KEY",
    "RANK_CORRELATION_PAIRS",
    "REQUIRED_META_KEYS",
    "TIMINGS_FILE",
    "TIMINGS_KEY",
    "TIMING_DECIMALS",
    "ManifestMismatchError",
    "NonFiniteError",
    "RecordValueError",
    "RunProvenance",
    "RunRecordError",
    "canonical_json",
    "check_finite",
    "check_record_values",
    "config_sha256",
    "git_state",
    "history_text",
    "is_timing_key",
    "is_unit_metric",
    "normalise_run_dir",
    "portable_split_path",
    "process_cpu_seconds",
    "provenance_text",
    "rank_correlation",
    "rank_correlations",
    "rank_correlations_of",
    "read_history",
    "read_metrics",
    "read_per_user",
    "read_record_json",
    "read_timings",
    "split_file_hashes",
    "write_history",
    "write_provenance",
    "write_rank_correlations",
    "write_run_record",
]
