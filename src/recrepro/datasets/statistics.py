"""Checks of a processed dataset's size against the statistics its paper prints.

The printed numbers are data: ``recrepro/expected/dataset_statistics.yaml`` (source, the
(dataset, protocol) and recipe they describe, users / items / interactions).
:func:`statistics_checks` compares them with a processed dataset's ``stats.json`` and returns
the ``published_checks`` list written into it: one item per printed row of that (dataset,
protocol), each ``applies`` (the recipe matches) and, when it does, ``match`` per count and in all.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache
from importlib import resources
from typing import TYPE_CHECKING, Any

import yaml

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["COUNTS", "published_statistics", "recipe_applies", "statistics_checks", "summary_frame"]

#: The counts compared, in the order stats.json and the papers give them.
COUNTS = ("users", "items", "interactions")
_REQUIRED = ("source", "paper", "dataset", "protocol", "mode", "recipe", *COUNTS)


@lru_cache(maxsize=1)
def published_statistics() -> tuple[dict[str, Any], ...]:
    """The entries of ``expected/dataset_statistics.yaml`` (ValueError naming a malformed one)."""
    text = resources.files("recrepro.expected").joinpath("dataset_statistics.yaml").read_text()
    entries = (yaml.safe_load(text) or {}).get("statistics") or []
    for index, entry in enumerate(entries):
        missing = [k for k in _REQUIRED if k not in entry]
        if missing or not all(isinstance(entry[k], int) and entry[k] >= 0 for k in COUNTS):
            raise ValueError(f"dataset_statistics.yaml: statistics[{index}] ({entry.get('dataset')!r}): "
                             f"needs {', '.join(_REQUIRED)} with non-negative integer counts (missing: {missing})")
    return tuple(entries)


def recipe_applies(wanted: Mapping[str, Any], recipe: Mapping[str, Any]) -> bool:
    """Whether a processed dataset's ``recipe`` has every field a printed row assumes (``wanted``)."""
    return _recipe_matches(wanted, recipe)


def _recipe_matches(wanted: Mapping[str, Any], recipe: Mapping[str, Any]) -> bool:
    for key, value in wanted.items():
        have = recipe.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and isinstance(have, (int, float)):
            if float(value) != float(have):
                return False
        elif have != value:
            return False
    return True


def statistics_checks(stats: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The printed statistics of ``stats``' (dataset, protocol), each compared with ``stats``.

    Parameters
    ----------
    stats:
        A processed dataset's statistics (``dataset``, ``protocol``, ``recipe`` and the
        :data:`COUNTS`), as :meth:`recrepro.datasets.preprocessing.Preprocessed.stats` makes them.

    Returns
    -------
    list of dict
        ``source``, ``paper``, ``mode``, ``note`` (may be None), ``applies`` (the entry's recipe
        fields equal the run's), and when it applies ``match`` (all three counts equal) and
        per count ``{"expected", "actual", "match"}``; otherwise ``expected`` per count only.
    """
    out = []
    for entry in published_statistics():
        if (entry["dataset"], entry["protocol"]) != (stats.get("dataset"), stats.get("protocol")):
            continue
        applies = _recipe_matches(entry["recipe"] or {}, stats.get("recipe") or {})
        check: dict[str, Any] = {"source": entry["source"], "paper": entry["paper"], "mode": entry["mode"],
                                 "note": entry.get("note"), "applies": applies}
        if applies:
            for count in COUNTS:
                check[count] = {"expected": entry[count], "actual": int(stats[count]),
                                "match": entry[count] == int(stats[count])}
            check["match"] = all(check[c]["match"] for c in COUNTS)
        else:
            check.update({count: {"expected": entry[count]} for count in COUNTS})
        out.append(check)
    return out


def summary_frame(stats: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """One row per processed dataset: what a results page shows of it without the data.

    Columns ``dataset``, ``protocol``, the :data:`COUNTS`, ``recipe`` (the preprocessing recipe as
    sorted JSON, so that a page can tell which printed row applies) and ``form`` (the raw form a
    mirror held instead of the canonical files, empty for the canonical release).
    """
    import json

    import pandas as pd

    rows = []
    for one in stats:
        missing = [k for k in ("dataset", "protocol", *COUNTS) if k not in one]
        if missing:
            raise ValueError(f"stats of {one.get('dataset')!r}: lacks {', '.join(missing)}")
        rows.append({"dataset": one["dataset"], "protocol": one["protocol"],
                     **{k: int(one[k]) for k in COUNTS},
                     "recipe": json.dumps(one.get("recipe") or {}, sort_keys=True),
                     "form": (one.get("raw_form") or {}).get("name", "")})
    return pd.DataFrame(rows, columns=["dataset", "protocol", *COUNTS, "recipe", "form"])
