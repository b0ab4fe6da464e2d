"""What a record's numbers may be: finite everywhere (:func:`check_finite`, the guard training code calls
on tensors before anything is written), and shares (NDCG, HR, AUC, ...) within [0, 1]
(:func:`check_record_values`, applied to a record read back)."""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from recrepro.records.errors import NonFiniteError, RecordValueError

__all__ = ["check_finite", "check_record_values", "is_unit_metric"]


def check_finite(name: str, values: Any, where: str) -> None:
    """Raise :class:`NonFiniteError` if ``values`` holds NaN or ±inf.

    Parameters
    ----------
    name:
        What the values are, e.g. ``"user embeddings"``.
    values:
        A torch tensor (any device), numpy array, Python scalar or nested sequence.
    where:
        When/where it was checked, e.g. ``"epoch 3"``; the message reads
        ``"NaN in user embeddings at epoch 3 (...)"``.

    Raises
    ------
    NonFiniteError
        With the count of NaN and infinite entries out of the total.
    """
    n_nan, n_inf, n_total = _count_non_finite(values)
    if n_nan == 0 and n_inf == 0:
        return
    kind = "NaN" if n_nan else "inf"
    raise NonFiniteError(
        f"{kind} in {name} at {where} ({n_nan} NaN and {n_inf} infinite of {n_total} values)"
    )


def _count_non_finite(values: Any) -> tuple[int, int, int]:
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(values, torch.Tensor):
        # Integer/bool tensors cannot hold NaN; isnan would still work but costs a copy.
        if not (values.is_floating_point() or values.is_complex()):
            return 0, 0, values.numel()
        detached = values.detach()
        n_nan = int(torch.isnan(detached).sum().item())
        n_inf = int(torch.isinf(detached).sum().item())
        return n_nan, n_inf, detached.numel()
    array = np.asarray(values)
    if not (np.issubdtype(array.dtype, np.floating) or np.issubdtype(array.dtype, np.complexfloating)):
        if array.dtype == object:
            array = array.astype(np.float64)
        else:
            return 0, 0, int(array.size)
    return int(np.isnan(array).sum()), int(np.isinf(array).sum()), int(array.size)


#: Metrics that are shares, in [0, 1] (``ndcg@20``, ``val_ndcg``, ``pp_hr_micro``, ``gini_pos``, ``support_recall``).
_UNIT_METRIC = re.compile(r"^(?:val_|test_|best_val_|best_)?(?:pp_)?(?:ndcg|hr|recall|precision|auc|coverage|gini"
                          r"|map|mrr)(?:_|@|\[|$)|^support_")


#: Sections of a record that hold settings and counts, not metrics: only their finiteness is checked.
_SETTINGS_KEYS = frozenset({"settings", "config", "params", "counts"})


def is_unit_metric(key: str) -> bool:
    """Whether the metric or history key ``key`` is a share in [0, 1] (NDCG, HR, recall, AUC, coverage, ...)."""
    return bool(_UNIT_METRIC.search(str(key).lower()))


def check_record_values(path: str | Path, obj: Any) -> Any:
    """Refuse a record's content (``metrics.json``, a history) whose numbers are NaN or infinite, or a
    share (:func:`is_unit_metric`, outside ``settings``, ``config``, ``params`` and ``counts``) outside
    [0, 1]: what :func:`write_run_record` refuses to write.

    Returns ``obj``; raises :class:`RecordValueError` naming the file and the key.
    """
    def walk(value: Any, where: str, key: str, settings: bool) -> None:
        if isinstance(value, Mapping):
            for k, v in value.items():
                walk(v, f"{where}[{k!r}]" if where else repr(k), str(k), settings or k in _SETTINGS_KEYS)
        elif isinstance(value, (list, tuple)):
            for i, v in enumerate(value):
                walk(v, f"{where}[{i}]", key, settings)
        elif isinstance(value, (float, int, np.floating, np.integer)) and not isinstance(value, bool):
            number = float(value)
            if not math.isfinite(number):
                raise RecordValueError(f"{path}: {where} is {number} (records hold finite numbers only); "
                                       "the record is damaged - restore it (git checkout -- <file>) or rerun the run")
            if not settings and is_unit_metric(key) and not 0.0 <= number <= 1.0:
                raise RecordValueError(f"{path}: {where} = {number!r} is outside [0, 1], the range of {key!r}; "
                                       "the record is damaged - restore it (git checkout -- <file>) or rerun the run")

    walk(obj, "", "", False)
    return obj
