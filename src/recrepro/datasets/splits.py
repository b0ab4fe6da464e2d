"""The papers' split protocols.

Each ``split_*`` function takes preprocessed :class:`Interactions` and returns a
:class:`Split`: named parts (DataFrames with int32 ``user``/``item``, float32
``rating``, int64 ``timestamp``) plus metadata. :func:`write_split` writes one parquet
per part and, last, ``manifest.json`` with the sha256 and row count of every part.

=========================  ==========  ===============================================
split                      paper       parts
=========================  ==========  ===============================================
strong_generalization      exADMM      train, validation_tr/te, test_tr/te, item_index
random_ratio               PRISM       train, validation, test
temporal_user_ratio        λOpt        train, validation, test
leave_one_out              FedRAP      train, validation, test, negatives
lightgcn_given             LightGCN    train, test
lightgcn_given_val         LightGCN    train, validation (carved from the published train), test
=========================  ==========  ===============================================
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from recrepro.datasets.container import Interactions
from recrepro.io import frame_digest, sha256_file, write_json, write_parquet

PART_COLUMNS = ("user", "item", "rating", "timestamp")

#: The largest seed numpy's ``RandomState`` takes (2^32 - 1); the config schema bounds every seed by it.
MAX_SEED = 2**32 - 1


@dataclass(frozen=True)
class Split:
    """Parts of a split and what describes it (``n_users``/``n_items`` index every part)."""

    name: str
    parts: dict[str, pd.DataFrame]
    n_users: int
    n_items: int
    params: dict[str, Any] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)


def _rows(frame: pd.DataFrame, mask: np.ndarray) -> pd.DataFrame:
    return frame.loc[mask, list(PART_COLUMNS)].reset_index(drop=True)


def _order_by_user_time(frame: pd.DataFrame) -> np.ndarray:
    """Row order by user, then timestamp, then file order (later in file = later)."""
    return np.lexsort((np.arange(len(frame)), frame["timestamp"].to_numpy(), frame["user"].to_numpy()))


def _position_from_end(users_sorted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For rows sorted by user: 0 for each user's last row, 1 for the one before, …; and the user's count."""
    n = users_sorted.size
    starts = np.flatnonzero(np.r_[True, users_sorted[1:] != users_sorted[:-1]])
    counts = np.diff(np.r_[starts, n])
    ends = np.repeat(starts + counts, counts)
    return ends - 1 - np.arange(n), np.repeat(counts, counts)


# ---------------------------------------------------------------------------------
# strong generalization (Liang et al. 2018; exADMM's scripts/generate_data.py)
# ---------------------------------------------------------------------------------
def _holdout_fraction_legacy(group_starts: np.ndarray, group_counts: np.ndarray, test_prop: float,
                             min_items: int, seed: int) -> np.ndarray:
    """Row-level mask of the target rows of held-out users, as Liang et al.'s code draws it.

    Users are visited in ascending id order with one ``RandomState(seed)``; a user with
    ``n >= min_items`` rows has ``int(test_prop * n)`` of them drawn by
    ``choice(n, size, replace=False)``. The legacy stream is sequential, so this loops
    over held-out users (not over rows); that loop is what makes the split identical
    to the published one (e.g. Epinions' ``unique_sid.txt``) and costs ~10 µs a user.
    """
    rs = np.random.RandomState(seed)
    mask = np.zeros(int(group_counts.sum()), dtype=bool)
    for start, count in zip(group_starts.tolist(), group_counts.tolist(), strict=True):
        if count >= min_items:
            chosen = rs.choice(count, size=int(test_prop * count), replace=False).astype(np.int64)
            mask[start + chosen] = True
    return mask


def split_strong_generalization(data: Interactions, *, heldout_users: int, test_prop: float = 0.2,
                                min_items: int = 5, seed: int = 98765) -> Split:
    """Strong generalisation: disjoint train / validation / test users.

    Follows ``generate_data`` of Liang et al. (2018) as used by exADMM: permute the
    (sorted) users with ``np.random.seed(seed)``; the last ``2·heldout_users`` become
    validation then test users; the item universe is the items of training users in
    order of first appearance; held-out rows on other items are dropped; each held-out
    user with ``>= min_items`` rows gets a random ``int(test_prop·n)`` as targets
    (``*_te``), the rest is fold-in (``*_tr``). Ids are renumbered as the script does:
    users by position in the permutation (train users first), items by position in
    the universe; ``item_index`` maps the new item index to the processed item id.
    """
    n = data.n_users
    if 2 * heldout_users >= n:
        raise ValueError(f"strong_generalization: {2 * heldout_users} held-out users need more than {n} users")
    perm = np.random.RandomState(seed).permutation(n)
    n_train_users = n - 2 * heldout_users
    new_user_id = np.empty(n, dtype=np.int64)
    new_user_id[perm] = np.arange(n)
    frame = data.frame
    user_new = new_user_id[frame["user"].to_numpy()]
    is_train_user = user_new < n_train_users

    train_items = frame["item"].to_numpy()[is_train_user]
    universe = pd.unique(train_items)  # order of first appearance, as pd.unique in the script
    new_item_id = np.full(data.n_items, -1, dtype=np.int64)
    new_item_id[universe] = np.arange(universe.size)

    renumbered = pd.DataFrame(
        {
            "user": user_new.astype(np.int32),
            "item": new_item_id[frame["item"].to_numpy()].astype(np.int32),
            "rating": frame["rating"].to_numpy(),
            "timestamp": frame["timestamp"].to_numpy(),
        }
    )
    parts = {"train": _rows(renumbered, is_train_user)}
    for name, lo, hi in (("validation", n_train_users, n_train_users + heldout_users),
                         ("test", n_train_users + heldout_users, n)):
        # Groups are visited in ascending *original* id order (pandas groupby on the
        # dataset's sorted ids), with each group's rows in file order.
        in_group = (user_new >= lo) & (user_new < hi) & (renumbered["item"].to_numpy() >= 0)
        rows = np.flatnonzero(in_group)
        original_user = frame["user"].to_numpy()[rows]
        rows = rows[np.argsort(original_user, kind="stable")]
        sorted_users = frame["user"].to_numpy()[rows]
        starts = np.flatnonzero(np.r_[True, sorted_users[1:] != sorted_users[:-1]]) if rows.size else np.array([], int)
        counts = np.diff(np.r_[starts, rows.size]).astype(np.int64)
        target = _holdout_fraction_legacy(starts, counts, test_prop, min_items, seed)
        held = renumbered.iloc[rows].reset_index(drop=True)
        parts[f"{name}_tr"] = held.loc[~target].reset_index(drop=True)
        parts[f"{name}_te"] = held.loc[target].reset_index(drop=True)
    parts["item_index"] = pd.DataFrame({"item": np.arange(universe.size, dtype=np.int32),
                                        "processed_item": universe.astype(np.int32)})
    return Split(
        name="strong_generalization",
        parts=parts,
        n_users=n,
        n_items=int(universe.size),
        params={"heldout_users": heldout_users, "test_prop": test_prop, "min_items": min_items, "seed": seed},
        info={"n_train_users": n_train_users},
    )


# ---------------------------------------------------------------------------------
# random ratio (PRISM: PyG RandomLinkSplit 80/10/10 over interactions)
# ---------------------------------------------------------------------------------
def split_random_ratio(data: Interactions, *, seed: int, validation: float = 0.1, test: float = 0.1) -> Split:
    """Global random split of interactions: ``int(validation·E)`` and ``int(test·E)`` rows held out.

    Like PyG's ``RandomLinkSplit`` (which PRISM's code uses): one permutation of the
    edges; the first ``E − n_val − n_test`` are train, the next ``n_val`` validation,
    the last ``n_test`` test. Drawn with ``numpy.random.default_rng(seed)``; rows keep
    the file order inside each part.
    """
    e = len(data.frame)
    n_val, n_test = int(validation * e), int(test * e)
    perm = np.random.default_rng(seed).permutation(e)
    label = np.zeros(e, dtype=np.int8)
    label[perm[e - n_val - n_test:e - n_test]] = 1
    label[perm[e - n_test:]] = 2
    parts = {name: _rows(data.frame, label == code) for code, name in enumerate(("train", "validation", "test"))}
    return Split("random_ratio", parts, data.n_users, data.n_items,
                 params={"seed": seed, "validation": validation, "test": test})


# ---------------------------------------------------------------------------------
# temporal per-user ratio (λOpt's data_loader, split "lro" with random_split=False)
# ---------------------------------------------------------------------------------
def split_temporal_user_ratio(data: Interactions, *, test: float = 0.2, validation: float = 0.25) -> Split:
    """Per user, the latest ``⌊test·n_u⌋`` rows → test, then the latest ``⌊validation·n'_u⌋`` of the rest → validation.

    ``n'_u = n_u − ⌊test·n_u⌋``; with the defaults this is ≈ 60/20/20. Time ties are
    broken by file order (later line = later). Users with fewer than 5 rows get no
    test row (⌊0.2·4⌋ = 0), as in λOpt's code.
    """
    order = _order_by_user_time(data.frame)
    users = data.frame["user"].to_numpy()[order]
    from_end, count = _position_from_end(users)
    n_test = np.floor(test * count).astype(np.int64)
    n_val = np.floor(validation * (count - n_test)).astype(np.int64)
    label = np.zeros(len(order), dtype=np.int8)
    label[(from_end >= n_test) & (from_end < n_test + n_val)] = 1
    label[from_end < n_test] = 2
    row_label = np.empty_like(label)
    row_label[order] = label
    parts = {name: _rows(data.frame, row_label == code) for code, name in enumerate(("train", "validation", "test"))}
    return Split("temporal_user_ratio", parts, data.n_users, data.n_items,
                 params={"test": test, "validation": validation})


# ---------------------------------------------------------------------------------
# leave one out (FedRAP / NCF / PFedRec)
# ---------------------------------------------------------------------------------
def sample_unseen_items(seen: pd.DataFrame, n_users: int, n_items: int, n_negatives: int, seed: int,
                        batch_users: int = 2048) -> np.ndarray:
    """``n_negatives`` distinct items per user, uniform over the items the user never interacted with.

    Vectorised: for a batch of users, draw uniform keys for every item, push seen
    items to +∞ and keep the ``n_negatives`` smallest keys (a uniform sample without
    replacement). Memory is ``batch_users × n_items`` floats.
    """
    rng = np.random.default_rng(seed)
    user_deg = np.bincount(seen["user"].to_numpy(), minlength=n_users)
    if n_items - user_deg.max(initial=0) < n_negatives:
        worst = int(np.argmax(user_deg))
        raise ValueError(f"user {worst} has only {n_items - user_deg[worst]} unseen items; {n_negatives} negatives needed")
    by_user = seen.sort_values("user", kind="stable")
    indptr = np.r_[0, np.cumsum(np.bincount(by_user["user"].to_numpy(), minlength=n_users))]
    seen_items = by_user["item"].to_numpy()
    out = np.empty((n_users, n_negatives), dtype=np.int32)
    for lo in range(0, n_users, batch_users):
        hi = min(lo + batch_users, n_users)
        keys = rng.random((hi - lo, n_items))
        rows = np.repeat(np.arange(hi - lo), np.diff(indptr[lo:hi + 1]))
        keys[rows, seen_items[indptr[lo]:indptr[hi]]] = np.inf
        chosen = np.argpartition(keys, n_negatives - 1, axis=1)[:, :n_negatives]
        out[lo:hi] = np.sort(chosen, axis=1)
    return out


def split_leave_one_out(data: Interactions, *, seed: int, n_negatives: int = 99) -> Split:
    """Per user the latest row → test, the second latest → validation, the rest → train.

    Time ties are broken by file order, the later line counting as later. FedRAP's loader
    breaks them by the order of a non-stable sort instead, which cannot be reproduced exactly
    (``docs/deviations.md#leave-one-out-time-ties``). Users with fewer than 3 rows keep
    everything in train. ``negatives`` holds ``n_negatives`` items per user drawn once
    from the items the user never interacted with in any part, shared by validation
    and test.
    """
    order = _order_by_user_time(data.frame)
    users = data.frame["user"].to_numpy()[order]
    from_end, count = _position_from_end(users)
    label = np.zeros(len(order), dtype=np.int8)
    eligible = count >= 3
    label[eligible & (from_end == 1)] = 1
    label[eligible & (from_end == 0)] = 2
    row_label = np.empty_like(label)
    row_label[order] = label
    parts = {name: _rows(data.frame, row_label == code) for code, name in enumerate(("train", "validation", "test"))}
    negatives = sample_unseen_items(data.frame, data.n_users, data.n_items, n_negatives, seed)
    parts["negatives"] = pd.DataFrame({
        "user": np.repeat(np.arange(data.n_users, dtype=np.int32), n_negatives),
        "item": negatives.ravel(),
    })
    return Split("leave_one_out", parts, data.n_users, data.n_items,
                 params={"seed": seed, "n_negatives": n_negatives})


# ---------------------------------------------------------------------------------
# published train/test (LightGCN releases)
# ---------------------------------------------------------------------------------
def _given_parts(data: Interactions, protocol: str, names: tuple[str, ...]) -> Split:
    """A release's published parts ``names``, as they are, from the frame's ``part`` column."""
    if "part" not in data.frame.columns:
        raise ValueError(f"{protocol} needs a dataset published with its parts {list(names)} "
                         "(a protocol with merge_given_parts: false)")
    part = data.frame["part"].to_numpy()
    parts = {name: _rows(data.frame, part == name) for name in names}
    return Split(protocol, parts, data.n_users, data.n_items)


def split_lightgcn_given(data: Interactions) -> Split:
    """The published ``train.txt`` / ``test.txt`` parts, as they are (needs the ``part`` column)."""
    return _given_parts(data, "lightgcn_given", ("train", "test"))


def split_lightgcn_given_val(data: Interactions, *, seed: int, validation: float = 0.1) -> Split:
    """The published parts, with a validation part carved out of ``train`` for tuning (issue 48).

    The published release has no validation part. Per user, ``⌊validation·n_u⌋`` of her ``n_u``
    published training rows, drawn at random (``numpy.random.default_rng(seed)``), become
    ``validation``; the rest stay ``train``; ``test`` is the published one, untouched. A model is
    tuned fitted on ``train`` and scored on ``validation``, then refitted on ``train`` + ``validation``
    (the published training set) for ``test``, so the test numbers are on LightGCN's own protocol.
    """
    given = split_lightgcn_given(data)
    train = given.parts["train"]
    users = train["user"].to_numpy()
    key = np.random.default_rng(seed).random(len(train))
    order = np.lexsort((key, users))
    sorted_users = users[order]
    starts = np.flatnonzero(np.r_[True, sorted_users[1:] != sorted_users[:-1]])
    counts = np.diff(np.r_[starts, len(order)])
    position = np.arange(len(order)) - np.repeat(starts, counts)
    n_val = np.floor(validation * counts).astype(np.int64)
    held = np.zeros(len(train), dtype=bool)
    held[order[position < np.repeat(n_val, counts)]] = True
    parts = {"train": _rows(train, ~held), "validation": _rows(train, held), "test": given.parts["test"]}
    return Split("lightgcn_given_val", parts, data.n_users, data.n_items,
                 params={"seed": seed, "validation": validation})


def split_exadmm_given(data: Interactions) -> Split:
    """exADMM's published strong-generalisation parts (train, validation_tr/te, test_tr/te), as they are."""
    return _given_parts(data, "exadmm_given", ("train", "validation_tr", "validation_te", "test_tr", "test_te"))


SPLITTERS: dict[str, Callable[..., Split]] = {
    "strong_generalization": split_strong_generalization,
    "random_ratio": split_random_ratio,
    "temporal_user_ratio": split_temporal_user_ratio,
    "leave_one_out": split_leave_one_out,
    "lightgcn_given": split_lightgcn_given,
    "lightgcn_given_val": split_lightgcn_given_val,
    "exadmm_given": split_exadmm_given,
}
SEEDED = {"random_ratio", "leave_one_out", "lightgcn_given_val"}


def make_split(data: Interactions, name: str, params: dict[str, Any], seed: int) -> Split:
    """Dispatch to the ``split_<name>`` function; ``seed`` is passed to the seeded splits only."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= int(seed) <= MAX_SEED:
        raise ValueError(f"split {name!r}: seed {seed!r} is out of range; a split seed is an integer from 0 to "
                         f"{MAX_SEED} (2^32 - 1: numpy's RandomState takes no other)")
    if name not in SPLITTERS:
        raise ValueError(f"unknown split {name!r}; known: {sorted(SPLITTERS)}")
    kwargs = dict(params)
    if name in SEEDED:
        kwargs["seed"] = seed
    return SPLITTERS[name](data, **kwargs)


def write_split(split: Split, out_dir: str | Path, meta: dict[str, Any]) -> Path:
    """Write each part as ``<part>.parquet`` and then ``manifest.json`` (per part: the file's sha256, its
    rows and ``content_sha256``, the digest of its values, :func:`recrepro.io.frame_digest`: two records
    whose files differ only in the parquet writer's settings name the same content)."""
    out_dir = Path(out_dir)
    files = {}
    for part, frame in split.parts.items():
        path = out_dir / f"{part}.parquet"
        write_parquet(path, frame)
        files[path.name] = {"sha256": sha256_file(path), "rows": int(len(frame)),
                            "content_sha256": frame_digest(frame)}
    manifest = {
        **meta,
        "split": split.name,
        "params": split.params,
        "n_users": split.n_users,
        "n_items": split.n_items,
        **split.info,
        "files": files,
    }
    path = out_dir / "manifest.json"
    write_json(path, manifest)
    return path
