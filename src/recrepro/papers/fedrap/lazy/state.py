"""The lazy paper path's state: what a round computes from, carries to the next and hands back.

Plain dataclasses, no behaviour beyond trivial accessors; the notation is
:meth:`~recrepro.papers.fedrap.lazy.path.LazyPath.local_train`'s: ``C0`` the server's table at the
start of the round, ``s = sign C0``, ``D0`` a client's private table, ``X = D + C``, ``E = D − C``,
and the per-client affine map ``C_T = α C0 + β D0 − γ s``, ``D_T = α D0 + β C0 + δ s`` of the
entries whose sign cannot change.  "Permuted order" is the clients' order in the round's row layout
(:class:`~recrepro.models.federated.clients.RowLayout`), "caller's order" that of the participants.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np
import torch

__all__ = ["CarriedStatistics", "ExactWrites", "LazyUploads", "MapCoefficients", "MappedSums", "NextNorms",
           "RegulariserMap", "ReplayEntries", "RoundContext", "RoundStatistics", "ServerColumns", "SignBound",
           "SortedWrites", "TableStats"]

Entries = tuple[torch.Tensor, torch.Tensor, torch.Tensor]  # (client, flat position, value) of single entries


def _to_device(value: Any, dev: torch.device) -> Any:
    """``value`` (tensors in dicts, lists and tuples) with its tensors on ``dev``."""
    if isinstance(value, torch.Tensor):
        return value.to(dev)
    if isinstance(value, dict):
        return {k: _to_device(v, dev) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_to_device(v, dev) for v in value)
    return value


def _shallow_dict(obj: Any) -> dict[str, Any]:
    return {f.name: getattr(obj, f.name) for f in fields(obj)}


@dataclass
class ServerColumns:
    """The server's table as the passes over the private tables read it (:func:`~.kernels.server_columns`).

    The screens read the small ``|C0|`` in ascending order: :func:`~.kernels.sorted_abs` sorts a
    prefix of them on demand and caches it here (``abs_sorted``, ``abs_order``, ``sorted_upto``).
    """

    C0: torch.Tensor           #: ``[n_items, d]``
    S0: torch.Tensor           #: ``sign C0``
    C0f: torch.Tensor          #: ``C0`` flat ``[n d]``
    S0f: torch.Tensor          #: ``S0`` flat
    CS: torch.Tensor           #: ``[2, n d]``: ``C0f`` and ``S0f`` stacked
    absC0f: torch.Tensor       #: ``|C0|`` flat
    n_zero: int                #: entries with ``C0 = 0``
    sorted_upto: float = -np.inf               #: every ``|C0| ≤ sorted_upto`` is in the sorted prefix
    abs_sorted: torch.Tensor | None = None     #: the sorted prefix of ``|C0|``
    abs_order: torch.Tensor | None = None      #: its flat positions


@dataclass
class SignBound:
    """The bound on sign changes over each client's longest schedule: an entry of client i may change
    sign unless ``|C0| U_i > |stored D0| V_i + Q_i`` (``Q = −1``: never at risk)."""

    U: np.ndarray
    V: np.ndarray
    Q: np.ndarray
    can_flip: bool             #: false: no entry can (``μ = 0`` or fewer than two steps)


@dataclass
class RegulariserMap:
    """The composed regulariser map of each client (float64): while ``s`` is constant,
    ``X_k = PX_k X_0 − s QX_k`` and ``E_k = PE_k E_0 + s QE_k``."""

    PX: np.ndarray
    PE: np.ndarray
    QX: np.ndarray
    QE: np.ndarray

    def coefficients(self, scale: np.ndarray) -> MapCoefficients:
        """``α, β, γ, δ`` of the map and the lazy scales it leaves (``scale`` the ones before)."""
        alpha, beta = (self.PX + self.PE) / 2, (self.PX - self.PE) / 2
        gamma, delta = (self.QX + self.QE) / 2, (self.QE - self.QX) / 2
        return MapCoefficients(alpha, beta, gamma, delta, scale * alpha)


@dataclass
class MapCoefficients:
    """Per client (permuted order): ``C_T = α C0 + β D0 − γ s``, ``D_T = α D0 + β C0 + δ s``, and the
    lazy scale ``new_scale`` (α folded into it: the stored table keeps ``D0``'s units)."""

    alpha: np.ndarray
    beta: np.ndarray
    gamma: np.ndarray
    delta: np.ndarray
    new_scale: np.ndarray


@dataclass
class RoundContext:
    """What a round's start-of-round statistics depend on, and what they need
    (:func:`~.start.round_context`).  Per-user tensors are indexed by user id (others: never at
    risk, in no group)."""

    cols: ServerColumns        #: the round's server table
    users: np.ndarray          #: its participants
    counts: np.ndarray         #: their samples
    scale: np.ndarray          #: their lazy scales at its start
    lam: float
    mu: float
    lr_args: float
    can_flip: bool             #: :attr:`SignBound.can_flip`
    U: torch.Tensor            #: the sign bound (float32 per user id)
    V: torch.Tensor
    Q: torch.Tensor
    gweight: torch.Tensor      #: weight in its group sum (the lazy scale: the sums are of true ``D0``)
    group: torch.Tensor        #: schedule group, an index into ``group_steps`` (-1: not a participant)
    group_steps: np.ndarray    #: the distinct ``K_i`` (local epochs × batches)
    member: np.ndarray         #: bool per user id: a participant
    position: torch.Tensor     #: position among ``users`` (-1: not a participant)
    C: torch.Tensor | None = None          #: a next round's context: its server table, checked then
    round: int | None = None               #: and its round
    #: the group sums where known without a pass (:func:`~.next_round.next_group_sums`)
    group_sums: torch.Tensor | None = None

    def to_state(self) -> dict[str, Any]:
        return {**_shallow_dict(self), "cols": _shallow_dict(self.cols)}

    @classmethod
    def from_state(cls, state: dict[str, Any], dev: torch.device) -> RoundContext:
        state = _to_device(state, dev)
        return cls(**{**state, "cols": ServerColumns(**state["cols"])})


@dataclass
class TableStats:
    """Start-of-round statistics of the private tables (per user id, stored units; :func:`~.start.block_stats`)."""

    sq: torch.Tensor           #: ``‖D‖²`` (float64, CPU)
    dots: torch.Tensor         #: ``(⟨C, D⟩, ⟨sign C, D⟩)`` (float64 ``[n_users, 2]``, CPU)
    amax: torch.Tensor         #: a bound on ``max |D|`` (float64, CPU)
    ref: torch.Tensor          #: the last exact ``max |D|``, against which the carried bound is checked
    G: torch.Tensor            #: group sums ``Σ_{i ∈ K} scale_i · stored_i`` (true ``D``; ``[groups, n d]``)
    risk: list[Entries] = field(default_factory=list)  #: entries that may change sign, the client its position
    risk_n: int = 0            #: how many
    overflow: bool = False     #: more than the budget allows: ``risk`` dropped (the round runs dense)

    #: the per-user sums that stay on the CPU when a checkpoint is loaded
    ON_CPU = ("sq", "dots", "amax", "ref")

    def to_state(self) -> dict[str, Any]:
        return _shallow_dict(self)

    @classmethod
    def from_state(cls, state: dict[str, Any], dev: torch.device) -> TableStats:
        return cls(**{k: v if k in cls.ON_CPU else _to_device(v, dev) for k, v in state.items()})


@dataclass
class RoundStatistics:
    """A round's start-of-round statistics and what they were taken for."""

    context: RoundContext
    tables: TableStats


@dataclass
class CarriedStatistics:
    """The next round's statistics, taken by this round's pass: valid while the private tables are this
    tensor at this version (then checked against the round's other inputs, :meth:`~.path.LazyPath.cached_stats`)."""

    stats: RoundStatistics
    D: torch.Tensor
    D_version: int

    def belongs_to(self, D: torch.Tensor | None) -> bool:
        return D is not None and self.D is D and self.D_version == D._version


@dataclass
class ReplayEntries:
    """The entries replayed step by step (their ``C`` may cross zero), grouped by permuted client."""

    own: torch.Tensor          #: ``[m]`` permuted client
    pos: torch.Tensor          #: ``[m]`` flat position in ``[n_items · d]``
    D0: torch.Tensor           #: ``[m]`` true ``D`` at the start of the round
    C0: torch.Tensor           #: ``[m]`` ``C0`` there
    crow: torch.Tensor         #: ``[B + 1]`` pointer by permuted client
    X: torch.Tensor = field(init=False)  #: ``D + C``, stepped in place
    E: torch.Tensor = field(init=False)  #: ``D − C``, stepped in place

    def __post_init__(self) -> None:
        self.X, self.E = self.D0 + self.C0, self.D0 - self.C0


@dataclass
class MappedSums:
    """Per-client sums over the lazily mapped entries (permuted order, true units; :func:`~.kernels.mapped_sums`)."""

    DD: np.ndarray             #: ``Σ D0²``
    DC: np.ndarray             #: ``Σ D0 C0``
    Ds: np.ndarray             #: ``Σ s D0``
    CC: np.ndarray             #: ``Σ C0²``
    Cs: np.ndarray             #: ``Σ |C0|``
    ss: np.ndarray             #: ``Σ s²``
    E2: np.ndarray = field(init=False)   #: ``Σ (D0 − C0)²``
    sE: np.ndarray = field(init=False)   #: ``Σ s (D0 − C0)``
    sX: np.ndarray = field(init=False)   #: ``Σ s (D0 + C0)``

    def __post_init__(self) -> None:
        self.E2 = self.DD - 2 * self.DC + self.CC
        self.sE, self.sX = self.Ds - self.Cs, self.Ds + self.Cs

    @property
    def n(self) -> np.ndarray:
        """Entries with ``s ≠ 0``."""
        return self.ss


@dataclass
class SortedWrites:
    """Exact values for the end-of-round pass, sorted by the caller's client."""

    client: torch.Tensor       #: caller's client of each value
    index: torch.Tensor        #: its item (rows) or flat position (entries)
    values: torch.Tensor       #: stored units: ``[m, d]`` (rows) or ``[m]`` (entries)
    ptr: list[int]             #: ``[B + 1]`` pointer by caller's client


@dataclass
class ExactWrites:
    """The exact rows and replayed entries the end-of-round pass writes over the map
    (:func:`~.kernels.exact_writes`)."""

    rows: SortedWrites
    entries: SortedWrites


@dataclass
class NextNorms:
    """``‖D‖²`` and a bound on ``max |D|`` of the tables the end-of-round pass leaves (caller's order,
    the next round's stored units; :func:`~.kernels.next_norms`)."""

    sq: np.ndarray
    amax: np.ndarray
    ref: np.ndarray            #: the last exact ``max |D|``, rescaled


@dataclass
class LazyUploads:
    """The uploads ``C_i`` of the lazy path's clients (caller's order) in compact form: the lazy map's
    coefficients, with the exact rows and replayed entries over it (:meth:`dense`)."""

    users: np.ndarray
    C0: torch.Tensor
    alpha: np.ndarray
    beta: np.ndarray
    gamma: np.ndarray
    delta: np.ndarray
    rows: Entries              #: ``(client, item, C values [m, d])``
    entries: Entries           #: ``(client, flat position, C value)``

    def slice(self, lo: int, hi: int) -> LazyUploads:
        """The uploads of clients ``lo:hi``."""
        parts = []
        for owner, where, values in (self.rows, self.entries):
            keep = (owner >= lo) & (owner < hi)
            parts.append((owner[keep] - lo, where[keep], values[keep]))
        return LazyUploads(self.users[lo:hi], self.C0, self.alpha[lo:hi], self.beta[lo:hi], self.gamma[lo:hi],
                           self.delta[lo:hi], *parts)

    def dense(self, D: torch.Tensor, D_scale: torch.Tensor) -> torch.Tensor:
        """The uploads as ``[B, n_items, d]``, from the private tables ``D`` (stored units, scales
        ``D_scale``) as this round's end-of-round pass left them.

        ``C_T = α C0 + β D0 − γ s`` with ``D0`` recovered from the stored ``D_T = α D0 + β C0 + δ s``
        (valid until the private tables change) and the exact entries substituted over it:
        ``C_T = (α − β²/α) C0 + (β/α) D_T − (γ + βδ/α) s``, per-client scalars (float64), so one
        gather and three in-place passes form the uploads (no temporaries).
        """
        C0 = self.C0
        S0 = torch.sign(C0)
        al, be, ga, de = (torch.as_tensor(v, dtype=torch.float64) for v in (self.alpha, self.beta, self.gamma,
                                                                             self.delta))
        u = torch.as_tensor(np.asarray(self.users, np.int64))

        def per_client(x: torch.Tensor) -> torch.Tensor:
            return x.to(C0.device, torch.float32).view(-1, 1, 1)

        up = D[u].to(C0.device)                                     # stored units: D_T = scale × stored
        up.mul_(per_client(be / al * D_scale[u].to(torch.float64)))
        up.addcmul_(per_client(al - be * be / al), C0)
        up.addcmul_(per_client(-(ga + be * de / al)), S0)
        owner, item, rows = self.rows
        up[owner, item] = rows
        owner, pos, values = self.entries
        up.view(up.shape[0], -1)[owner, pos] = values
        return up
