"""What goes wrong with a run record: a value not finite, a split that changed, pieces that do not fit
together, a record read back that breaks what writing it promised."""

from __future__ import annotations

__all__ = ["ManifestMismatchError", "NonFiniteError", "RecordValueError", "RunRecordError"]


class NonFiniteError(ValueError):
    """A tensor or array holds NaN or infinity (the message names what and where)."""


class ManifestMismatchError(ValueError):
    """A split file is missing or its sha256 differs from the split's manifest.json."""


class RunRecordError(ValueError):
    """The pieces handed to :func:`write_run_record` are inconsistent or malformed."""


class RecordValueError(RunRecordError):
    """A record read back breaks what writing it promised (a value NaN, infinite or out of its range)."""
