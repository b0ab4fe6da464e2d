"""Local training of all of a round's clients at once: mini-batches, early stop, row layout.

A round's clients train as one batched computation: their samples are kept flat and sorted
by client, mini-batch ``t`` of every client is one step, and a client whose batches are
exhausted (or that stopped early) is masked out of a step.  These helpers hold what every
such trainer needs, whatever its model.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

__all__ = ["ChunkDraws", "LocalEpochs", "RoundDraws", "RowLayout", "client_batches", "local_convergence",
           "row_layout"]


def local_convergence(loss_acc: np.ndarray, n_acc: np.ndarray, prev_mean: np.ndarray | None,
                      active: np.ndarray, epoch: int, tol: float) -> tuple[np.ndarray, np.ndarray]:
    """Per-client mean local loss of this epoch and the clients still training.

    The official client loop stops a client's local epochs once its mean loss changes by less
    than ``tol`` relative to the previous epoch; clients without batches this epoch get NaN
    (never "converged").  Returns ``(mean, active)``.
    """
    mean = np.divide(loss_acc, n_acc, out=np.full(loss_acc.shape[0], np.nan), where=n_acc > 0)
    if epoch > 0:
        with np.errstate(invalid="ignore", divide="ignore"):
            converged = np.abs(mean - prev_mean) / np.abs(prev_mean) < tol
        active = active & ~converged
    return mean, active


class LocalEpochs:
    """The lockstep schedule of a round's local training and the clients' running losses.

    Mini-batch ``t`` of every client is step ``t`` of an epoch; a client steps while it has a
    ``t``-th batch and has not stopped early (:func:`local_convergence` after every epoch).
    The trainer draws each epoch's batches itself (:func:`client_batches`) and runs the steps::

        schedule = LocalEpochs(counts, cfg.batch_size, cfg.local_epochs, cfg.tol, cfg.batch_decay)
        for epoch in schedule.epochs():
            batch_of = client_batches(owner, counts, cfg.batch_size, rng)
            for t, n_t, step_on in schedule.steps():
                lr_scale = schedule.lr_scale(step_on)
                ...                                   # the step: per-client mean losses
                schedule.record(step_on, batch_loss, n_t)

    ``prev_mean`` is each client's mean loss of its last epoch (NaN: no batch yet).
    """

    def __init__(self, counts: np.ndarray, batch_size: int, local_epochs: int, tol: float,
                 batch_decay: float) -> None:
        B = counts.size
        self.counts, self.batch_size, self.local_epochs = counts, batch_size, local_epochs
        self.tol, self.batch_decay = tol, batch_decay
        self.max_batches = int(-(-counts.max() // batch_size)) if B and counts.max() > 0 else 0
        self.steps_done = np.zeros(B, np.int64)
        self.active = counts > 0
        self.loss_acc, self.n_acc = np.zeros(B), np.zeros(B)
        self.prev_mean = np.full(B, np.nan)

    def epochs(self) -> Iterator[int]:
        """The local epochs while some client still trains; after each, the early stop."""
        for epoch in range(self.local_epochs):
            if not self.active.any():
                break
            yield epoch
            self.prev_mean, self.active = local_convergence(self.loss_acc, self.n_acc, self.prev_mean, self.active,
                                                            epoch, self.tol)

    def steps(self) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
        """``(t, n_t, step_on)`` for each step of the epoch in which some client steps: ``n_t`` the
        clients' batch sizes (0: no ``t``-th batch), ``step_on`` the clients that step."""
        for t in range(self.max_batches):
            n_t = np.clip(self.counts - t * self.batch_size, 0, self.batch_size)
            step_on = self.active & (n_t > 0)
            if not step_on.any():
                continue
            yield t, n_t, step_on

    def lr_scale(self, step_on: np.ndarray) -> np.ndarray:
        """The clients' learning-rate factors of this step: ``batch_decay ** steps_done`` (0: not stepping)."""
        return np.where(step_on, self.batch_decay ** self.steps_done, 0.0)

    def record(self, step_on: np.ndarray, batch_loss: np.ndarray, n: np.ndarray, first: int = 0) -> None:
        """Add a step's mean losses ``batch_loss`` over ``n`` samples of the clients ``first:`` to their
        running sums, and count the step of every client in ``step_on``."""
        on = step_on[first:]
        self.loss_acc[first:] += np.where(on, batch_loss * n, 0.0)
        self.n_acc[first:] += np.where(on, n, 0)
        self.steps_done += step_on


def client_batches(owner: np.ndarray, counts: np.ndarray, batch_size: int,
                   rng: np.random.Generator) -> np.ndarray:
    """Mini-batch index of every sample for one local epoch (``DataLoader(shuffle=True)``).

    ``owner`` is sorted (samples grouped by client), ``counts`` the samples per client.
    A client with at most ``batch_size`` samples has a single batch, whose order does not
    change an SGD step (no random draw); the samples of the other clients are shuffled
    within the client and cut into batches of ``batch_size``.
    """
    batch_of = np.zeros(owner.size, np.int64)
    multi = counts > batch_size
    if multi.any():
        S = np.flatnonzero(multi[owner])
        o = owner[S]
        perm = np.lexsort((rng.random(S.size), o))
        first = np.searchsorted(o, o, side="left")  # o sorted: start of each client's block
        batch_of[S[perm]] = (np.arange(S.size) - first) // batch_size
    return batch_of


class RoundDraws:
    """A round's samples and local-epoch shuffles drawn for all its participants at once, in the
    order one chunk of all of them would draw them, then handed to each chunk as its slice.

    A trainer that splits a round's clients into memory-sized chunks (FedRAP's dense path) would
    otherwise draw each chunk's negatives and shuffles from the round's stream in chunk order, so
    a different ``memory_budget_mb`` would hand the clients other draws.  Here the negatives of
    every participant come from one :func:`~recrepro.models.federated.sampling.round_samples`
    call and epoch ``e``'s shuffle keys from one ``rng.random`` over every multi-batch client's
    samples, drawn when a chunk first asks for that epoch: a client gets the draws it would get
    in one chunk, whatever the chunks (a client's local training depends on its own draws only).

    ``owner``/``item``/``label`` are the round's samples sorted by owner (an index into the
    participants), ``counts`` the samples per participant.
    """

    def __init__(self, owner: np.ndarray, item: np.ndarray, label: np.ndarray, counts: np.ndarray,
                 batch_size: int, rng: np.random.Generator) -> None:
        self.owner, self.item, self.label, self.rng = owner, item, label, rng
        self.sample_start = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        # the shuffled samples of a client are its own only when it has more than one batch
        shuffled = np.where(counts > batch_size, counts, 0)
        self.key_start = np.concatenate([[0], np.cumsum(shuffled)]).astype(np.int64)
        self._epoch_keys: list[np.ndarray] = []

    def samples(self, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Samples of participants ``[lo, hi)``, owners renumbered from 0 (sorted by owner)."""
        a, b = self.sample_start[lo], self.sample_start[hi]
        return self.owner[a:b] - lo, self.item[a:b], self.label[a:b]

    def keys(self, epoch: int, lo: int, hi: int) -> np.ndarray:
        """Epoch ``epoch``'s shuffle keys of participants ``[lo, hi)``."""
        while len(self._epoch_keys) <= epoch:
            self._epoch_keys.append(self.rng.random(int(self.key_start[-1])))
        return self._epoch_keys[epoch][self.key_start[lo]:self.key_start[hi]]

    def draw_all_keys(self, epochs: int) -> int:
        """Draw the shuffle keys of every epoch ``< epochs`` not drawn yet (a fixed point in the
        round's stream after which its other draws, e.g. DP noise seeds, may come); returns how
        many epochs' keys this drew that took numbers from the stream."""
        drawn = 0
        while len(self._epoch_keys) < epochs:
            self._epoch_keys.append(self.rng.random(int(self.key_start[-1])))
            drawn += int(self.key_start[-1] > 0)
        return drawn

    def chunk(self, lo: int, hi: int) -> ChunkDraws:
        """The stand-in for the round's generator that participants ``[lo, hi)`` train with."""
        return ChunkDraws(self, lo, hi)


class ChunkDraws:
    """What :func:`client_batches` draws from, for one chunk of a :class:`RoundDraws` round: its
    ``random(n)`` returns the chunk's slice of the next epoch's keys (``n`` must match)."""

    def __init__(self, draws: RoundDraws, lo: int, hi: int) -> None:
        self.draws, self.lo, self.hi, self.epoch = draws, lo, hi, 0

    def random(self, size: int) -> np.ndarray:
        keys = self.draws.keys(self.epoch, self.lo, self.hi)
        if keys.size != size:
            raise RuntimeError(f"chunk draws: {size} shuffle keys asked for, the chunk has {keys.size}")
        self.epoch += 1
        return keys


@dataclass(frozen=True)
class RowLayout:
    """The compact row layout of a round's samples (:func:`row_layout`).

    The distinct (client, item) pairs of the samples are the *rows*; clients are in *permuted* order,
    those with a single mini-batch first (``cperm[k]`` = the caller's index of permuted client ``k``),
    so the later batches of the big clients are a contiguous tail ``[M1, M)`` of rows and ``[B1, B)``
    of clients.
    """

    s_row: np.ndarray           #: sample -> row
    s_owner: np.ndarray         #: sample -> permuted client
    r_owner: np.ndarray         #: row -> permuted client (rows sorted by it)
    r_item: np.ndarray          #: row -> item
    r_label: np.ndarray         #: row -> label (float32; a client's samples of one item share it)
    r_mult: np.ndarray          #: row -> its number of samples (float32)
    counts: np.ndarray          #: samples per permuted client
    cperm: np.ndarray           #: permuted position -> caller's client index
    rows_per: np.ndarray        #: rows per permuted client
    M: int                      #: rows
    B1: int                     #: clients with a single mini-batch (the first ``B1`` permuted clients)
    M1: int                     #: their rows (the first ``M1`` rows)
    s_sorted: np.ndarray        #: samples grouped by permuted client (stable), for :func:`client_batches`
    s_owner_sorted: np.ndarray  #: their permuted clients

    def row_pointer(self) -> np.ndarray:
        """The CSR row pointer of the rows by permuted client (``[B + 1]``)."""
        return np.concatenate([[0], np.cumsum(self.rows_per)])


def row_layout(owner: np.ndarray, item: np.ndarray, label: np.ndarray, B: int, n_items: int,
               batch_size: int) -> RowLayout:
    """The compact row layout of a round's samples (FedRAP's row and lazy paths,
    :mod:`recrepro.papers.fedrap.rows`): see :class:`RowLayout`.

    ``owner`` (sorted; an index into the round's ``B`` clients), ``item`` and ``label`` are the
    samples; a client's mini-batches hold ``batch_size`` samples.
    """
    counts = np.bincount(owner, minlength=B)           # samples per client
    key = owner.astype(np.int64) * n_items + item.astype(np.int64)
    uniq, first, inv, mult = np.unique(key, return_index=True, return_inverse=True, return_counts=True)
    multi = counts > batch_size
    cperm = np.argsort(multi, kind="stable")          # single-batch clients first
    crank = np.empty(B, np.int64)
    crank[cperm] = np.arange(B)
    r_owner0 = uniq // n_items
    order = np.argsort(crank[r_owner0], kind="stable")
    new_pos = np.empty(order.size, np.int64)
    new_pos[order] = np.arange(order.size)
    s_row = new_pos[inv.ravel()]                      # sample -> row
    s_owner = crank[owner]                            # sample -> client (permuted order)
    r_owner = crank[r_owner0[order]]                  # row -> client (permuted order)
    r_item = (uniq - r_owner0 * n_items)[order]
    r_label = label[first[order]].astype(np.float32)
    r_mult = mult[order].astype(np.float32)
    counts = counts[cperm]
    rows_per = np.bincount(r_owner, minlength=B)
    B1 = int((~multi).sum())
    M1 = int(rows_per[:B1].sum())
    s_sorted = np.argsort(s_owner, kind="stable")     # samples grouped by permuted client
    return RowLayout(s_row=s_row, s_owner=s_owner, r_owner=r_owner, r_item=r_item, r_label=r_label, r_mult=r_mult,
                     counts=counts, cperm=cperm, rows_per=rows_per, M=int(r_owner.size), B1=B1, M1=M1,
                     s_sorted=s_sorted, s_owner_sorted=s_owner[s_sorted])
