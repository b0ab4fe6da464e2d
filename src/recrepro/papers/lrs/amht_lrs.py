"""AMHT-LRS: alternating minimisation with iterative hard thresholding, vectorised over users.

Estimator (the ERM of the linear LRS model, paper §2.1)::

    min_{U, W, B}  sum_i ||y_i - X_i (U w_i + b_i)||^2   s.t.  U^T U = I,  ||b_i||_0 <= k.

One outer iteration ``l`` (our reading of the algorithm; the paper's Algorithm 1 box could not be
read, see ``docs/deviations.md#lrs-algorithm``):

1. **Global step** (the only step that touches other users' data). With ``(w_i, b_i)`` fixed and
   ``r_i = y_i - X_i b_i``, solve ``min_U sum_i ||r_i - X_i U w_i||^2`` either exactly, as the
   ``dr x dr`` normal equations in ``vec(U)`` (``u_step="lstsq"``)::

       [sum_i (w_i w_i^T) kron (X_i^T X_i)] vec(U) = vec(sum_i X_i^T r_i w_i^T),

   or by one preconditioned gradient step (``u_step="gradient"``; ``E[X_i^T X_i] = m I`` makes
   ``I kron sum_i w_i w_i^T`` the expected Hessian)::

       U <- U + (1/m) [sum_i X_i^T (r_i - X_i U w_i) w_i^T] (sum_i w_i w_i^T)^{-1},

   then re-orthonormalise: ``U <- Q`` of ``U = QR``.
2. **Local steps** (each user alone, all users at once). ``inner_steps`` times: least squares for
   ``w_i`` with ``b_i`` fixed (batched ``r x r`` solve), then one IHT step on ``b_i`` with
   ``U w_i`` fixed::

       b_i <- HT_k(b_i + (eta/m) X_i^T (y_i - X_i U w_i - X_i b_i)),

   where ``HT_k`` keeps the ``k`` largest entries in magnitude (top-k; ``sparse_step="iht"``);
   a final ``w_i`` least-squares solve ends the local step (``sparse_step="iht"``). With
   ``sparse_step="htp"`` each IHT step is followed by a joint least-squares refit of
   ``(w_i, b_i|S_i)`` on the selected support ``S_i`` (hard thresholding pursuit, a debiased IHT).
   The default ``sparse_step="cosamp"`` replaces each step by a CoSaMP step: candidates = support
   plus the ``2k`` largest profile-gradient entries, joint least squares, prune to top-``k``, refit.
3. **Swap search** (``swap_search=True``, default): the per-user problem
   ``min_{|S| = k} RSS_i(S)``, ``RSS_i(S) = min_{w, b_S} ||y_i - X_i U w - X_i,S b_S||^2``, is
   combinatorial and the greedy solvers above miss its minimiser when ``m`` is small. Each user's
   support is polished by best-improvement single swaps (drop one index, add one) until no swap
   lowers the RSS (:func:`swap_local_search`), from several starts: the solver's support, the
   previous outer iteration's support and ``restarts`` random supports; the user keeps the
   smallest RSS (:func:`multistart_support`) and ``(w_i, b_i)`` are refitted on it. Keeping the
   previous support among the starts makes the local step never worse than the previous
   iteration's support under the new ``U`` (``docs/deviations.md#lrs-swap-search``).

Initialisation (``init="moments"``): the top-``r`` eigenvectors of
``M = (1/(tm)) sum_ij y_ij^2 x_ij x_ij^T`` (``E[M] = mean_i (||Theta_i||^2 + sigma^2) I + 2 Theta_i Theta_i^T``),
or a random orthonormal ``U`` (``init="random"``).

Cost per outer iteration (``t`` users, ``m`` samples, dimension ``d``, rank ``r``, sparsity ``k``,
``s = inner_steps``)::

    local step   O(t m d r + s t (m d + r^3))          [+ s t (m (r+k)^2 + (r+k)^3) for htp,
                                                        + s t (m (r+3k)^2 + (r+3k)^3) for cosamp]
    U lstsq      O(t m d^2 + t r^2 d^2 + (d r)^3)      (S_i = X_i^T X_i, the Kronecker sum, the solve)
    U gradient   O(t m d r + d r^2 + r^3)
    QR           O(d r^2)
    swap search  O(t m d^2) (Gram X_i^T X_i once) + (2 + restarts) x sweeps x O(t k ((r+k)^3 + (r+k)^2 d))

Memory: the data ``t m d``; the ``lstsq`` step holds ``chunk_users x d x d`` and ``(dr)^2`` extra.
No Python loop runs over users; the only loops are over iterations and user chunks.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import torch

from recrepro.records import check_finite

U_STEPS = ("auto", "lstsq", "gradient")
SPARSE_STEPS = ("iht", "htp", "cosamp")
INITS = ("moments", "random")


@dataclass(frozen=True)
class AMHTConfig:
    """Settings of AMHT-LRS (and of the low-rank-only AltMin, which is ``k = 0``).

    Attributes
    ----------
    r, k:
        Rank of ``U`` and sparsity of each ``b_i``.
    iterations:
        Outer iterations ``L`` (global step + local steps).
    inner_steps:
        IHT steps on ``b_i`` per local step (each preceded by a ``w_i`` solve).
    sparse_step:
        ``"cosamp"`` (default: CoSaMP steps, IHT with a 2k-candidate merge and a pruned refit),
        ``"htp"`` (IHT step + least-squares refit on the chosen support, hard thresholding pursuit)
        or ``"iht"`` (plain IHT steps); ``docs/deviations.md#lrs-sparse-step``.
    iht_step:
        IHT step size ``eta`` (the gradient is scaled by ``1/m``; ``eta = 1`` matches
        ``E[X^T X / m] = I``).
    u_step:
        ``"lstsq"`` (exact ``dr x dr`` solve), ``"gradient"`` or ``"auto"`` (lstsq when
        ``d r <= u_lstsq_max_dr``).
    init:
        ``"moments"`` or ``"random"``.
    warm_start:
        Start each local step's IHT from the previous ``b_i`` (True) or from 0 (False: the support
        is re-selected under the new ``U`` every outer iteration, ``docs/deviations.md#lrs-algorithm``).
    swap_search:
        After the ``sparse_step`` solver, polish every user's support by best-improvement single
        swaps (:func:`swap_local_search`) from several starts and keep the start with the smallest
        residual (:func:`multistart_support`; ``docs/deviations.md#lrs-swap-search``).
    restarts:
        Random supports tried per user and outer iteration by the swap search, besides the
        ``sparse_step`` solution and the previous iteration's support.
    max_swap_sweeps:
        Cap on the swap sweeps per start.
    local_ridge:
        Ridge ``lambda ||.||^2`` added to every per-user least-squares solve (0 in the synthetic
        experiments; the real-data demonstration uses 1 for every method).
    tol:
        Stop early when the subspace moved by less than ``tol`` (``||(I - U U^T) U_prev||_2``); 0 never stops.
    chunk_users:
        Users per chunk in the ``lstsq`` global step and the moment matrix (bounds memory).
    seed:
        Seed of the random initialisation.
    """

    r: int
    k: int
    iterations: int = 30
    inner_steps: int = 3
    sparse_step: str = "cosamp"
    iht_step: float = 1.0
    u_step: str = "auto"
    u_lstsq_max_dr: int = 1000
    init: str = "moments"
    warm_start: bool = False
    local_ridge: float = 0.0
    swap_search: bool = True
    restarts: int = 2
    max_swap_sweeps: int = 10
    tol: float = 0.0
    chunk_users: int = 1024
    seed: int = 0

    def __post_init__(self) -> None:
        if self.u_step not in U_STEPS:
            raise ValueError(f"u_step must be one of {U_STEPS}, got {self.u_step!r}")
        if self.sparse_step not in SPARSE_STEPS:
            raise ValueError(f"sparse_step must be one of {SPARSE_STEPS}, got {self.sparse_step!r}")
        if self.init not in INITS:
            raise ValueError(f"init must be one of {INITS}, got {self.init!r}")
        if (self.r < 0 or self.k < 0 or self.iterations < 0 or self.inner_steps < 1 or self.restarts < 0
                or self.max_swap_sweeps < 0):
            raise ValueError(f"bad AMHT settings {self}")

    def resolved_u_step(self, d: int) -> str:
        if self.u_step != "auto":
            return self.u_step
        return "lstsq" if d * self.r <= self.u_lstsq_max_dr else "gradient"

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class AMHTResult:
    """Fitted parameters and the per-iteration history."""

    U: torch.Tensor   # (d, r)
    W: torch.Tensor   # (t, r)
    B: torch.Tensor   # (t, d)
    history: list[dict] = field(default_factory=list)

    @property
    def theta(self) -> torch.Tensor:
        """``(t, d)``: row ``i`` is ``U w_i + b_i``."""
        return self.W @ self.U.T + self.B


# ----------------------------------------------------------------------- building blocks


def hard_threshold_topk(V: torch.Tensor, k: int) -> torch.Tensor:
    """``HT_k`` row-wise: keep the ``k`` entries of largest magnitude in each row, zero the rest.

    Ties are broken by ``torch.topk`` (lowest index first on CPU in practice); ``k = 0`` gives 0,
    ``k >= d`` returns ``V`` unchanged.
    """
    if k <= 0:
        return torch.zeros_like(V)
    if k >= V.shape[-1]:
        return V.clone()
    idx = torch.topk(V.abs(), k, dim=-1).indices
    out = torch.zeros_like(V)
    return out.scatter_(-1, idx, V.gather(-1, idx))


def hard_threshold_value(V: torch.Tensor, zeta: float) -> torch.Tensor:
    """The paper's ``HT(v, zeta)``: keep entries with ``|v_i| > zeta`` (notation, §2.1)."""
    return torch.where(V.abs() > zeta, V, torch.zeros_like(V))


def batched_lstsq(A: torch.Tensor, b: torch.Tensor, ridge: float = 0.0) -> torch.Tensor:
    """Least squares for every batch entry: ``argmin_x ||A_i x - b_i||^2 + ridge ||x||^2``.

    ``A``: ``(t, m, n)``, ``b``: ``(t, m)``; returns ``(t, n)``. With ``m >= n`` (or a ridge) it
    solves the normal equations ``(A^T A + ridge I) x = A^T b``; with ``m < n`` and no ridge it
    returns the minimum-norm solution ``A^T (A A^T)^{-1} b`` (what ``np.linalg.lstsq`` returns for a
    full-row-rank ``A``). If a batch entry is singular, every entry falls back to the SVD-based
    pseudo-inverse (minimum-norm least squares). Cost ``O(t (m n min(m, n) + min(m, n)^3))``.
    """
    t, m, n = A.shape
    try:
        if m >= n or ridge > 0:
            G = A.transpose(1, 2) @ A
            if ridge > 0:
                G = G + ridge * torch.eye(n, dtype=A.dtype, device=A.device)
            rhs = (A.transpose(1, 2) @ b.unsqueeze(-1))
            return torch.linalg.solve(G, rhs).squeeze(-1)
        K = A @ A.transpose(1, 2)  # (t, m, m)
        alpha = torch.linalg.solve(K, b.unsqueeze(-1))
        return (A.transpose(1, 2) @ alpha).squeeze(-1)
    except torch.linalg.LinAlgError:
        # a rank-deficient design (real data: repeated or all-zero feature rows): the
        # minimum-norm least-squares solution through the SVD-based pseudo-inverse
        if ridge > 0:
            root = torch.full((n,), ridge ** 0.5, dtype=A.dtype, device=A.device)
            A = torch.cat([A, torch.diag(root).expand(t, n, n)], dim=1)
            b = torch.cat([b, torch.zeros(t, n, dtype=b.dtype, device=b.device)], dim=1)
        return (torch.linalg.pinv(A) @ b.unsqueeze(-1)).squeeze(-1)


def orthonormalise(U: torch.Tensor) -> torch.Tensor:
    """Q factor of the reduced QR of ``U`` (re-orthonormalisation after the global step)."""
    return torch.linalg.qr(U).Q


def moment_matrix(X: torch.Tensor, y: torch.Tensor, chunk_users: int = 1024) -> torch.Tensor:
    """``M = (1/(t m)) sum_ij y_ij^2 x_ij x_ij^T`` (``d x d``), accumulated over user chunks."""
    t, m, d = X.shape
    M = torch.zeros(d, d, dtype=X.dtype, device=X.device)
    for lo in range(0, t, chunk_users):
        Xc = X[lo:lo + chunk_users].reshape(-1, d)
        yc = y[lo:lo + chunk_users].reshape(-1)
        M += (Xc * (yc * yc).unsqueeze(1)).T @ Xc
    return M / (t * m)


def top_eigenvectors(M: torch.Tensor, r: int) -> torch.Tensor:
    """The ``r`` eigenvectors of the symmetric ``M`` with the largest eigenvalues, as columns."""
    _, vecs = torch.linalg.eigh((M + M.T) / 2)
    return vecs[:, -r:].flip(-1)


def random_orthonormal(d: int, r: int, seed: int, dtype=torch.float64, device: str | torch.device = "cpu") -> torch.Tensor:
    gen = torch.Generator().manual_seed(int(seed))
    return orthonormalise(torch.randn(d, r, generator=gen, dtype=dtype).to(device))


def init_subspace(X: torch.Tensor, y: torch.Tensor, cfg: AMHTConfig) -> torch.Tensor:
    """``U_0``: method of moments (top-``r`` eigenvectors of :func:`moment_matrix`) or random."""
    d = X.shape[2]
    if cfg.init == "moments":
        return top_eigenvectors(moment_matrix(X, y, cfg.chunk_users), cfg.r)
    return random_orthonormal(d, cfg.r, cfg.seed, X.dtype, X.device)


# ----------------------------------------------------------------------------- steps


def local_step(X: torch.Tensor, y: torch.Tensor, U: torch.Tensor, B: torch.Tensor, cfg: AMHTConfig,
               B_prev: torch.Tensor | None = None, iteration: int = 0,
               ) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-user updates of ``(w_i, b_i)`` with ``U`` fixed, all users at once (see module doc).

    ``B`` is where the ``sparse_step`` solver starts (0: cold start). With ``cfg.swap_search`` the
    solver's support, the support of ``B_prev`` (the previous iteration's estimate, if given and
    non-zero) and ``cfg.restarts`` random supports (seeded by ``cfg.seed`` and ``iteration``) are
    each polished by :func:`swap_local_search`; each user keeps the one with the smallest residual
    and ``(w_i, b_i)`` are refitted on it. Returns ``(W, B)``. ``r = 0`` skips ``w`` (sparse only);
    ``k = 0`` skips ``b`` (low rank only).
    """
    W, B = _sparse_solver(X, y, U, B, cfg)
    t, m, d = X.shape
    k = cfg.k
    if not cfg.swap_search or k == 0 or k >= d or m <= U.shape[1] + k:
        return W, B
    A = X @ U if U.shape[1] else None
    starts = [torch.topk(B.abs(), k, dim=1).indices]
    if B_prev is not None and bool((B_prev != 0).any()):
        starts.append(torch.topk(B_prev.abs(), k, dim=1).indices)
    gen = torch.Generator().manual_seed(int(cfg.seed) * 100_003 + int(iteration))
    for _ in range(cfg.restarts):
        starts.append(torch.topk(torch.rand(t, d, generator=gen, dtype=X.dtype), k, dim=1).indices.to(X.device))
    S = multistart_support(X, y, A, starts, cfg.max_swap_sweeps, cfg.chunk_users)
    return _refit_on_support(X, y, A, torch.zeros_like(B).scatter_(1, S, 1.0), k, cfg.local_ridge)


@dataclass
class _Gram:
    """Per-user sufficient statistics of the profile least squares (``m``-free after building)."""

    G: torch.Tensor          # (n, d, d)  X^T X
    c: torch.Tensor          # (n, d)     X^T y
    yy: torch.Tensor         # (n,)       y^T y
    XA: torch.Tensor | None  # (n, d, r)  X^T A
    AA: torch.Tensor | None  # (n, r, r)  A^T A
    Ay: torch.Tensor | None  # (n, r)     A^T y

    @classmethod
    def build(cls, X, y, A):
        Xt = X.transpose(1, 2)
        if A is None:
            return cls(Xt @ X, (Xt @ y.unsqueeze(-1)).squeeze(-1), (y * y).sum(1), None, None, None)
        return cls(Xt @ X, (Xt @ y.unsqueeze(-1)).squeeze(-1), (y * y).sum(1), Xt @ A,
                   A.transpose(1, 2) @ A, (A.transpose(1, 2) @ y.unsqueeze(-1)).squeeze(-1))

    def subset(self, idx):
        pick = lambda v: None if v is None else v[idx]  # noqa: E731
        return _Gram(self.G[idx], self.c[idx], self.yy[idx], pick(self.XA), pick(self.AA), pick(self.Ay))

    def fit(self, T: torch.Tensor, with_columns: bool = False):
        """Profile least squares on ``[A, X_T]``: ``(RSS, X^T e, ||(I - P) x_l||^2 or None)``."""
        n, p = T.shape
        d = self.G.shape[1]
        if p == 0 and self.XA is None:  # empty design: nothing is fitted
            return self.yy, self.c, (torch.diagonal(self.G, dim1=1, dim2=2) if with_columns else None)
        GT = self.G.gather(1, T.unsqueeze(-1).expand(n, p, d))               # (n, p, d) = X_T^T X
        DX = GT if self.XA is None else torch.cat([self.XA.transpose(1, 2), GT], dim=1)
        DD = DX.gather(2, T.unsqueeze(1).expand(n, DX.shape[1], p))           # (n, q, p) = D^T X_T
        if self.XA is not None:
            r = self.AA.shape[1]
            DA = torch.cat([self.AA, self.XA.gather(1, T.unsqueeze(-1).expand(n, p, r))], dim=1)  # D^T A
            DD = torch.cat([DA, DD], dim=2)
        Dy = self.c.gather(1, T) if self.Ay is None else torch.cat([self.Ay, self.c.gather(1, T)], dim=1)
        rhs = torch.cat([Dy.unsqueeze(-1), DX], dim=2) if with_columns else Dy.unsqueeze(-1)
        sol = _spd_solve(DD, rhs)
        beta = sol[:, :, 0]
        rss = self.yy - (Dy * beta).sum(1)
        corr = self.c - (DX * beta.unsqueeze(-1)).sum(1)
        resid_sq = None
        if with_columns:
            resid_sq = torch.diagonal(self.G, dim1=1, dim2=2) - (DX * sol[:, :, 1:]).sum(1)
        return rss, corr, resid_sq


def _spd_solve(M: torch.Tensor, rhs: torch.Tensor) -> torch.Tensor:
    """Batched solve of the symmetric PSD ``M``; pseudo-inverse for the batch if any entry is singular."""
    L, info = torch.linalg.cholesky_ex(M)
    if bool((info == 0).all()):
        return torch.cholesky_solve(rhs, L)
    return torch.linalg.pinv(M, hermitian=True) @ rhs


def swap_local_search(X: torch.Tensor, y: torch.Tensor, A: torch.Tensor | None, S: torch.Tensor,
                      max_sweeps: int = 10, rtol: float = 1e-10, gram: _Gram | None = None,
                      ) -> tuple[torch.Tensor, torch.Tensor]:
    """Best-improvement single-swap search on every user's support, all users at once.

    Objective: the profile residual ``RSS_i(S) = min_{w, b} ||y_i - A_i w - X_i,S b||^2`` (``A_i =
    X_i U``; ``A = None`` for no low-rank part). One sweep tries every swap "drop ``j`` in ``S_i``,
    add ``l`` not in ``S_i``" exactly: with ``P`` the projection on ``[A_i, X_i,(S minus j)]`` and
    ``e = (I - P) y_i``, adding column ``l`` lowers the residual by
    ``(x_l^T e)^2 / ||(I - P) x_l||^2``. Everything is computed from the per-user Gram statistics
    ``X^T X``, ``X^T y``, ``X^T A``, ``A^T A`` (built once, then ``m``-free). Each user takes its
    best swap if it lowers the RSS by more than ``rtol ||y_i||^2``; the search stops when no user
    improves or after ``max_sweeps`` sweeps; only still-improving users are processed. The result
    is swap-optimal (a "CW-minimum", Beck & Eldar 2013) unless the cap is hit. Returns ``(S, RSS)``.
    Cost: Gram ``O(t m d^2)`` once; per sweep ``O(t k ((r+k)^3 + (r+k)^2 d))``.
    """
    t, m, d = X.shape
    k = S.shape[1]
    gram = _Gram.build(X, y, A) if gram is None else gram
    S = S.clone()
    rss = gram.fit(S)[0]
    diag = torch.diagonal(gram.G, dim1=1, dim2=2)
    active = torch.arange(t, device=X.device)  # users whose last sweep improved
    for _ in range(max_sweeps):
        ga, Sa = gram.subset(active), S[active]
        diag_a = diag[active]
        best = rss[active].clone()
        best_j = torch.full_like(active, -1)
        best_l = torch.zeros_like(active)
        for j in range(k):  # loop over the k support slots, not over users
            keep = torch.cat([Sa[:, :j], Sa[:, j + 1:]], dim=1)
            rss_keep, corr, resid_sq = ga.fit(keep, with_columns=True)
            ok = resid_sq > 1e-10 * diag_a.clamp(min=1e-300)
            gain = torch.where(ok, corr * corr / resid_sq.clamp(min=1e-300), torch.zeros_like(corr))
            if k > 1:
                gain = gain.scatter(1, keep, 0.0)
            val, l = (rss_keep.unsqueeze(1) - gain).min(1)
            better = val < best
            best = torch.where(better, val, best)
            best_j = torch.where(better, torch.full_like(best_j, j), best_j)
            best_l = torch.where(better, l, best_l)
        improve = (best_j >= 0) & (best < rss[active] - rtol * ga.yy)
        if not bool(improve.any()):
            break
        active, best_j, best_l, best = active[improve], best_j[improve], best_l[improve], best[improve]
        S[active, best_j] = best_l
        rss[active] = best
    return S, rss


def multistart_support(X: torch.Tensor, y: torch.Tensor, A: torch.Tensor | None, starts: list[torch.Tensor],
                       max_sweeps: int = 10, chunk_users: int = 1024) -> torch.Tensor:
    """Run :func:`swap_local_search` from each ``(t, k)`` start; per user the support of smallest RSS.

    Ties keep the earlier start (the ``sparse_step`` solution comes first). Users are processed in
    chunks of ``chunk_users`` (the Gram statistics take ``chunk_users x d x d``); Python loops run
    over chunks and the few starts only.
    """
    t = X.shape[0]
    out = []
    for lo in range(0, t, chunk_users):
        sl = slice(lo, lo + chunk_users)
        Ac = None if A is None else A[sl]
        gram = _Gram.build(X[sl], y[sl], Ac)
        best_S, best_rss = None, None
        for S0 in starts:
            S, rss = swap_local_search(X[sl], y[sl], Ac, S0[sl], max_sweeps, gram=gram)
            if best_S is None:
                best_S, best_rss = S, rss
                continue
            better = rss < best_rss
            best_S = torch.where(better.unsqueeze(1), S, best_S)
            best_rss = torch.where(better, rss, best_rss)
        out.append(best_S)
    return torch.cat(out)


def _sparse_solver(X: torch.Tensor, y: torch.Tensor, U: torch.Tensor, B: torch.Tensor, cfg: AMHTConfig,
                   ) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``sparse_step`` solver (IHT, HTP or CoSaMP steps) of :func:`local_step`, from ``B``."""
    t, m, d = X.shape
    r, k = U.shape[1], cfg.k
    A = X @ U if r else None  # (t, m, r)
    W = torch.zeros(t, r, dtype=X.dtype, device=X.device)

    def solve_w(B: torch.Tensor) -> torch.Tensor:
        if not r:
            return W
        target = y - (X @ B.unsqueeze(-1)).squeeze(-1) if k else y
        return batched_lstsq(A, target, cfg.local_ridge)

    if k == 0:
        return solve_w(B), B
    if cfg.sparse_step == "cosamp":
        for _ in range(cfg.inner_steps):
            W, B = _cosamp_step(X, y, A, B, k, first=bool((B == 0).all()), ridge=cfg.local_ridge)
        return W, B
    for _ in range(cfg.inner_steps):
        W = solve_w(B)
        fitted = (X @ B.unsqueeze(-1)).squeeze(-1)
        if r:
            fitted = fitted + (A @ W.unsqueeze(-1)).squeeze(-1)
        grad = (X.transpose(1, 2) @ (y - fitted).unsqueeze(-1)).squeeze(-1) / m
        B = hard_threshold_topk(B + cfg.iht_step * grad, k)
        if cfg.sparse_step == "htp":
            W, B = _refit_on_support(X, y, A, B, k, cfg.local_ridge)
    return solve_w(B), B


def _refit_on_support(X, y, A, B, k, ridge=0.0):
    """Joint least squares of ``(w_i, b_i|S_i)`` on the support ``S_i`` of ``B`` (HTP refit)."""
    t, m, d = X.shape
    S = torch.topk(B.abs(), k, dim=1).indices  # (t, k): the support HT_k chose
    Xs = X.gather(2, S.unsqueeze(1).expand(t, m, k))  # (t, m, k)
    design = Xs if A is None else torch.cat([A, Xs], dim=2)
    coef = batched_lstsq(design, y, ridge)
    r = 0 if A is None else A.shape[2]
    B_new = torch.zeros_like(B).scatter_(1, S, coef[:, r:])
    return coef[:, :r], B_new


def _cosamp_step(X, y, A, B, k, first=False, ridge=0.0):
    """One CoSaMP step per user (Needell & Tropp 2009), with ``w_i`` solved jointly throughout.

    Candidate set = the current support of ``b_i`` plus the ``2k`` largest entries of the profile
    gradient ``X_i^T (y_i - A_i w_i - X_i b_i)`` outside it; joint least squares of ``(w_i, b_i|cand)``;
    prune ``b_i`` to its ``k`` largest entries; least-squares refit of ``(w_i, b_i|S_i)``.
    Needs ``m >= r + 3k``. Cost ``O(t (m d + m (r+3k)^2 + (r+3k)^3))``.
    """
    t, m, d = X.shape
    r = 0 if A is None else A.shape[2]
    fitted = (X @ B.unsqueeze(-1)).squeeze(-1)
    W0 = batched_lstsq(A, y - fitted, ridge) if r else None
    if r:
        fitted = fitted + (A @ W0.unsqueeze(-1)).squeeze(-1)
    grad = (X.transpose(1, 2) @ (y - fitted).unsqueeze(-1)).squeeze(-1).abs()
    on_support = B != 0
    n_new = 3 * k if first else 2 * k
    score = torch.where(on_support, torch.full_like(grad, -1.0), grad)
    new = torch.topk(score, min(n_new, d), dim=1).indices
    cand = new if first else torch.cat([new, torch.topk(B.abs(), k, dim=1).indices], dim=1)
    c = cand.shape[1]
    Xc = X.gather(2, cand.unsqueeze(1).expand(t, m, c))
    design = Xc if A is None else torch.cat([A, Xc], dim=2)
    coef = batched_lstsq(design, y, ridge)
    B_wide = torch.zeros_like(B).scatter_(1, cand, coef[:, r:])
    return _refit_on_support(X, y, A, hard_threshold_topk(B_wide, k), k, ridge)


def u_step_lstsq(X: torch.Tensor, R: torch.Tensor, W: torch.Tensor, chunk_users: int = 1024) -> torch.Tensor:
    """Exact global step: ``argmin_U sum_i ||R_i - X_i U w_i||^2`` via the ``dr x dr`` normal equations.

    ``R``: ``(t, m)`` responses with the sparse part removed. ``vec`` stacks columns, so block
    ``(a, b)`` of the system is ``sum_i w_ia w_ib X_i^T X_i``. Cost ``O(t m d^2 + t r^2 d^2 + (dr)^3)``.
    """
    t, m, d = X.shape
    r = W.shape[1]
    H = torch.zeros(r * r, d * d, dtype=X.dtype, device=X.device)
    for lo in range(0, t, chunk_users):
        Xc, Wc = X[lo:lo + chunk_users], W[lo:lo + chunk_users]
        S = Xc.transpose(1, 2) @ Xc                              # (c, d, d)
        WW = (Wc.unsqueeze(2) * Wc.unsqueeze(1)).reshape(-1, r * r)  # (c, r*r)
        H += WW.T @ S.reshape(-1, d * d)
    H = H.reshape(r, r, d, d).permute(0, 2, 1, 3).reshape(r * d, r * d)
    G = (X.transpose(1, 2) @ R.unsqueeze(-1)).squeeze(-1).T @ W   # (d, r) = sum_i X_i^T R_i w_i^T
    vec = torch.linalg.solve(H, G.T.reshape(-1))
    return vec.reshape(r, d).T


def u_gradient(X: torch.Tensor, R: torch.Tensor, U: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
    """Per-user gradients ``G_i = (1/m) X_i^T (R_i - X_i U w_i) w_i^T`` as ``(t, d, r)`` (descent direction)."""
    m = X.shape[1]
    res = R - ((X @ U) @ W.unsqueeze(-1)).squeeze(-1)
    return (X.transpose(1, 2) @ res.unsqueeze(-1)) * W.unsqueeze(1) / m


def u_step_gradient(X: torch.Tensor, R: torch.Tensor, U: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
    """One preconditioned gradient step (module doc). Cost ``O(t m d r + d r^2 + r^3)``."""
    m = X.shape[1]
    res = R - ((X @ U) @ W.unsqueeze(-1)).squeeze(-1)
    G = (X.transpose(1, 2) @ res.unsqueeze(-1)).squeeze(-1).T @ W / m   # (d, r)
    return U + torch.linalg.solve(W.T @ W, G.T).T


# ------------------------------------------------------------------------------ driver


def amht_lrs(X: torch.Tensor, y: torch.Tensor, cfg: AMHTConfig, *,
             U0: torch.Tensor | None = None,
             monitor: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], dict] | None = None,
             u_update: Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, int], torch.Tensor] | None = None,
             ) -> AMHTResult:
    """Fit AMHT-LRS (``cfg.k = 0`` gives low-rank-only AltMin).

    Parameters
    ----------
    X, y:
        ``(t, m, d)`` designs and ``(t, m)`` responses (float64 recommended).
    cfg:
        :class:`AMHTConfig`.
    U0:
        Initial subspace; default :func:`init_subspace`.
    monitor:
        Called as ``monitor(U, W, B)`` after the initial local step (iteration 0) and after each
        outer iteration; its dict (e.g. errors against the truth) goes into ``history``.
    u_update:
        Replaces the global step: ``u_update(X, R, U, W, iteration) -> U`` (before QR). The private
        variant plugs its noisy step in here.

    Returns
    -------
    AMHTResult
        ``history`` rows hold ``iteration``, ``train_mse`` and the monitor's keys.
    """
    t, m, d = X.shape
    U = init_subspace(X, y, cfg) if U0 is None else orthonormalise(U0)
    B = torch.zeros(t, d, dtype=X.dtype, device=X.device)
    W, B = local_step(X, y, U, B, cfg)
    history = [_record(0, X, y, U, W, B, monitor)]
    u_step = cfg.resolved_u_step(d)
    for it in range(1, cfg.iterations + 1):
        R = y - (X @ B.unsqueeze(-1)).squeeze(-1) if cfg.k else y
        if u_update is not None:
            U_new = u_update(X, R, U, W, it)
        elif u_step == "lstsq":
            U_new = u_step_lstsq(X, R, W, cfg.chunk_users)
        else:
            U_new = u_step_gradient(X, R, U, W)
        check_finite("U", U_new, f"AMHT-LRS iteration {it} (global step)")
        U_new = orthonormalise(U_new)
        moved = float(torch.linalg.matrix_norm(U - U_new @ (U_new.T @ U), ord=2))
        U = U_new
        W, B = local_step(X, y, U, B if cfg.warm_start else torch.zeros_like(B), cfg, B_prev=B, iteration=it)
        check_finite("W", W, f"AMHT-LRS iteration {it} (local step)")
        check_finite("B", B, f"AMHT-LRS iteration {it} (local step)")
        history.append({**_record(it, X, y, U, W, B, monitor), "subspace_move": moved})
        if cfg.tol > 0 and moved < cfg.tol:
            break
    return AMHTResult(U, W, B, history)


def _record(it, X, y, U, W, B, monitor) -> dict:
    pred = (X @ (W @ U.T + B).unsqueeze(-1)).squeeze(-1)
    row = {"iteration": it, "train_mse": float(((y - pred) ** 2).mean())}
    if monitor is not None:
        row.update(monitor(U, W, B))
    return row
