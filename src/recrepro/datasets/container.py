"""Typed, validated containers for interaction data.

``RawInteractions`` is what a dataset parser returns (the dataset's own ids);
``Interactions`` is the preprocessed form (contiguous int32 ids) that protocols,
splits and models consume.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

RAW_COLUMNS = ("user", "item", "rating", "timestamp")


class DataFormatError(ValueError):
    """A data file does not have the expected format (the message names file and line)."""


@dataclass(frozen=True)
class RawInteractions:
    """Interactions as parsed from a dataset's files, in file order.

    Attributes
    ----------
    dataset:
        Registry name of the dataset.
    frame:
        Columns ``user`` and ``item`` (the dataset's own ids: int64 or str), ``rating``
        (float32; 1.0 where the data is implicit, play count for play data),
        ``timestamp`` (int64; the 0-based file order where the data has none) and,
        for datasets published already split, ``part`` (``"train"``/``"test"``).
    has_timestamps:
        False when ``timestamp`` is the file order.
    implicit:
        True when ``rating`` carries no preference strength.
    """

    dataset: str
    frame: pd.DataFrame
    has_timestamps: bool = True
    implicit: bool = False
    extras: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        missing = [c for c in RAW_COLUMNS if c not in self.frame.columns]
        if missing:
            raise DataFormatError(f"{self.dataset}: parsed frame lacks columns {missing}")
        if self.frame["rating"].dtype != np.float32:
            raise DataFormatError(f"{self.dataset}: rating must be float32, got {self.frame['rating'].dtype}")
        if self.frame["timestamp"].dtype != np.int64:
            raise DataFormatError(f"{self.dataset}: timestamp must be int64, got {self.frame['timestamp'].dtype}")

    def __len__(self) -> int:
        return len(self.frame)


@dataclass(frozen=True)
class Interactions:
    """Preprocessed interactions with contiguous ids.

    ``frame`` has int32 ``user`` in [0, n_users), int32 ``item`` in [0, n_items),
    float32 ``rating`` and int64 ``timestamp`` (plus ``part`` for given splits).
    """

    frame: pd.DataFrame
    n_users: int
    n_items: int

    def __post_init__(self) -> None:
        f = self.frame
        for col, dt in (("user", np.int32), ("item", np.int32), ("rating", np.float32), ("timestamp", np.int64)):
            if col not in f.columns:
                raise DataFormatError(f"interactions lack column {col!r}")
            if f[col].dtype != dt:
                raise DataFormatError(f"column {col!r} must be {np.dtype(dt)}, got {f[col].dtype}")
        if len(f):
            if f["user"].min() < 0 or f["user"].max() >= self.n_users:
                raise DataFormatError("user ids are not contiguous in [0, n_users)")
            if f["item"].min() < 0 or f["item"].max() >= self.n_items:
                raise DataFormatError("item ids are not contiguous in [0, n_items)")

    def __len__(self) -> int:
        return len(self.frame)

    @property
    def density(self) -> float:
        return len(self.frame) / float(self.n_users * self.n_items) if self.n_users and self.n_items else 0.0
