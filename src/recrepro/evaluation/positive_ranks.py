"""The rank of every positive among its row's negatives, without materialising pairs (the rank metrics
of :func:`recrepro.evaluation.ranking.evaluate_full_ranking`: AUC and λOpt's per-positive HR/NDCG)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

__all__ = ["RankTies", "rank_positives"]

RankTies = Literal["item_id", "optimistic", "pessimistic"]

# Rows per chunk in rank_positives: bounds its temporaries to a few tens of MB whatever the batch size.
_RANK_CHUNK_ROWS = 128


def _ordered_int(values: np.ndarray, out: np.ndarray | None = None, scratch: np.ndarray | None = None) -> np.ndarray:
    """Map float32 to int32 so that integer order equals float order (equal floats → equal ints).

    The standard trick: reinterpret the bits as a signed int and flip the 31 magnitude
    bits of negatives.  Adding 1 to negatives then makes ``-0.0`` (which would land on
    -1) equal to ``+0.0`` (0), as float comparison has it; no other float lies between
    them, so the order is otherwise unchanged.  ``out``/``scratch`` (int32, same shape)
    avoid allocations in the hot loop; ``values`` is not modified.
    """
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.int32)
    if out is None:
        out = bits.copy()
    else:
        np.copyto(out, bits)
    if scratch is None:
        scratch = np.empty_like(out)
    np.right_shift(out, 31, out=scratch)  # -1 for negatives, 0 otherwise
    np.bitwise_and(scratch, 0x7FFFFFFF, out=scratch)  # magnitude mask of negatives
    np.bitwise_xor(out, scratch, out=out)  # flip the magnitude bits of negatives
    np.right_shift(out, 31, out=scratch)  # the flip left the sign bit alone
    np.subtract(out, scratch, out=out)  # +1 for negatives: -0.0 meets +0.0
    return out



@dataclass(frozen=True)
class _KeyLayout:
    """How :func:`rank_positives` packs a score into an int64 key, ``row · 2**(32+B) + ordered_float · 2**B +
    reversed_item_id`` with ``B`` bits for item ids: its fields are bounds that must hold together for the
    keys to stay exact, so they are derived in one place (:func:`_key_layout`)."""

    shift: np.int64  # B, the bits of an item id
    chunk: int  # rows per chunk, so that a chunk's keys fit an int64
    id_part: np.ndarray  # reversed item ids: among equal scores the lower id gets the larger key
    row_step: np.int64  # 2**(32+B): rows apart
    lowest: int  # the ordered int of -inf
    first_finite: np.int64  # smallest key of a finite score


def _key_layout(n: int) -> _KeyLayout:
    """The key layout for rows of ``n`` items."""
    id_bits = max(1, int(n - 1).bit_length())
    row_shift = 32 + id_bits
    if row_shift > 60:
        raise ValueError("too many items for 64-bit rank keys")
    # Keys of a row lie in [-2**(31+B), 2**(31+B)); rows are 2**(32+B) apart, so the row
    # count r needs (r + 1) * 2**(32+B) < 2**63.
    chunk = max(1, min(_RANK_CHUNK_ROWS, (1 << (62 - row_shift)) - 1))
    id_part = np.int64((1 << id_bits) - 1) - np.arange(n, dtype=np.int64)
    row_step = np.int64(1) << np.int64(row_shift)
    lowest = int(_ordered_int(np.array([-np.inf], dtype=np.float32))[0])
    first_finite = np.int64(lowest + 1) << np.int64(id_bits)  # smallest key of a finite score
    return _KeyLayout(shift=np.int64(id_bits), chunk=chunk, id_part=id_part, row_step=row_step, lowest=lowest,
                      first_finite=first_finite)


def _sorted_keys(scores: np.ndarray, layout: _KeyLayout, ordered_buf: np.ndarray, scratch_buf: np.ndarray,
                 keys_buf: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A chunk of rows' keys, each row sorted and offset by its row (in ``keys_buf``, flattened), each row's
    end in that flat array and its number of candidates (finite scores)."""
    r, n = scores.shape
    ordered = _ordered_int(scores, ordered_buf[:r], scratch_buf[:r])
    keys = keys_buf[:r]
    np.copyto(keys, ordered, casting="safe")
    np.left_shift(keys, layout.shift, out=keys)
    np.bitwise_or(keys, layout.id_part, out=keys)
    keys.sort(axis=1)
    row_base = np.arange(r, dtype=np.int64) * layout.row_step
    keys += row_base[:, None]
    flat = keys.reshape(-1)
    row_end = np.arange(1, r + 1, dtype=np.int64) * n
    n_candidates = row_end - np.searchsorted(flat, row_base + layout.first_finite, side="left")
    return flat, row_end, n_candidates


def rank_positives(
    scores: np.ndarray,
    positive_rows: np.ndarray,
    positive_items: np.ndarray,
    ties: RankTies = "item_id",
) -> tuple[np.ndarray, np.ndarray]:
    """Rank of every positive among the row's negatives, without materialising pairs.

    For user row ``r`` the *negatives* are the candidates (finite score) that are not
    positives of ``r``.  Each positive is ranked alone against them (λOpt,
    ``measure_user_wise_vectorized``): ``rank = 1 + #negatives ranked above it``, where
    "above" follows ``ties``:

    - ``"item_id"`` (default): the global tie rule — equal score and lower item id;
    - ``"optimistic"``: only strictly higher scores (λOpt HR/NDCG: ties favour the positive);
    - ``"pessimistic"``: higher or equal scores (ties count against the positive).

    Parameters
    ----------
    scores:
        float32 ``[b, n_items]`` masked scores (``-inf`` = not a candidate).  Not modified.
    positive_rows, positive_items:
        ``[m]`` row index (into ``scores``) and item id of every positive.  Each (row,
        item) pair must appear once.
    ties:
        See above.

    Returns
    -------
    ranks:
        float64 ``[m]``; ``np.inf`` for a positive whose own score is ``-inf`` (excluded).
    n_negatives:
        int64 ``[b]`` number of negatives of each row.

    Notes
    -----
    Scores are turned into int64 keys ``row · 2**(32+B) + ordered_float · 2**B +
    reversed_item_id`` (``B`` bits for item ids), whose order is the tie-rule order; each
    row of keys is sorted once and every count is a ``searchsorted`` on the flattened
    chunk (``O(n log n)`` per row instead of ``O(n · |T_u|)`` comparisons).  The same
    counts among the positives themselves are subtracted.
    """
    scores = np.asarray(scores)
    if ties not in ("item_id", "optimistic", "pessimistic"):
        raise ValueError(f"ties must be 'item_id', 'optimistic' or 'pessimistic', got {ties!r}")
    b, n = scores.shape
    rows = np.asarray(positive_rows, dtype=np.int64)
    items = np.asarray(positive_items, dtype=np.int64)
    ranks = np.full(rows.size, np.inf)
    n_negatives = np.zeros(b, dtype=np.int64)
    if b == 0 or n == 0:
        return ranks, n_negatives
    layout = _key_layout(n)
    chunk, row_step, shift = layout.chunk, layout.row_step, layout.shift
    order = np.argsort(rows, kind="stable")
    bounds = np.searchsorted(rows[order], np.arange(0, b + chunk, chunk))
    rows_cap = min(chunk, b)
    ordered_buf = np.empty((rows_cap, n), dtype=np.int32)
    scratch_buf = np.empty((rows_cap, n), dtype=np.int32)
    keys_buf = np.empty((rows_cap, n), dtype=np.int64)
    for c, start in enumerate(range(0, b, chunk)):
        stop = min(b, start + chunk)
        r = stop - start
        flat, row_end, n_candidates = _sorted_keys(scores[start:stop], layout, ordered_buf, scratch_buf, keys_buf)

        sel = order[bounds[c] : bounds[c + 1]]
        local = rows[sel] - start
        pos_ordered = _ordered_int(scores[rows[sel], items[sel]]).astype(np.int64)
        finite = pos_ordered > layout.lowest
        base = local * row_step
        key_self = base + ((pos_ordered << shift) | layout.id_part[items[sel]])
        key_ge = base + (pos_ordered << shift)
        key_gt = base + ((pos_ordered + 1) << shift)
        positives_sorted = np.sort(key_self[finite])
        n_finite_pos = np.bincount(local[finite], minlength=r)
        n_negatives[start:stop] = n_candidates - n_finite_pos

        end_all = row_end[local]
        end_pos = np.searchsorted(positives_sorted, (local + 1) * row_step - (row_step >> 1), side="left")
        if ties == "item_id":
            query, side = key_self, "right"
        elif ties == "optimistic":
            query, side = key_gt, "left"
        else:  # pessimistic; ">=" counts the positive itself on both sides, so it cancels
            query, side = key_ge, "left"
        above = (end_all - np.searchsorted(flat, query, side=side)) - (
            end_pos - np.searchsorted(positives_sorted, query, side=side))
        ranks[sel[finite]] = 1.0 + above[finite]
    return ranks, n_negatives
