"""Deterministic synthetic interaction data for the smoke tier.

The generator plants the two phenomena the papers study, so that the smoke tier
exercises them on a laptop in seconds:

* **long-tailed popularity** — item ``i`` (in a random order) gets a popularity
  prior proportional to ``rank(i) ** -zipf_exponent``;
* **low-rank preferences** — user/item factors ``P ∈ R^{n×r}``, ``Q ∈ R^{m×r}`` with
  N(0, 1) entries give an affinity ``P Qᵀ / √r``.

Each user's interacted items are drawn *without replacement* from
``softmax(affinity_scale · PQᵀ/√r + log prior)`` by the Gumbel-top-k trick
(vectorised over all users). Ratings 1–5 are a noisy monotone function of the
affinity (so rating thresholds such as ``> 3.5`` keep the better-liked items), and
timestamps increase within each user (so temporal splits are meaningful).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class SyntheticSpec:
    """Parameters of :func:`generate_synthetic` (the ``data.synthetic`` config section)."""

    seed: int = 20240501
    users: int = 600
    items: int = 400
    density: float = 0.08
    zipf_exponent: float = 1.0
    latent_rank: int = 8
    affinity_scale: float = 2.0
    min_user_interactions: int = 12
    start_timestamp: int = 1_500_000_000
    time_span_seconds: int = 3 * 365 * 86_400

    def to_dict(self) -> dict:
        return asdict(self)


def generate_synthetic(spec: SyntheticSpec) -> pd.DataFrame:
    """Generate the synthetic interaction table.

    Parameters
    ----------
    spec:
        Sizes, density and the shape of the popularity and preference structure.

    Returns
    -------
    pandas.DataFrame
        Columns ``user`` (int64), ``item`` (int64), ``rating`` (float32, 1–5) and
        ``timestamp`` (int64), sorted by user then timestamp. The same ``spec``
        always gives the same frame.
    """
    if spec.users < 1 or spec.items < 2:
        raise ValueError("synthetic data needs at least 1 user and 2 items")
    if not 0.0 < spec.density < 1.0:
        raise ValueError(f"synthetic density must be in (0, 1), got {spec.density}")
    rng = np.random.default_rng(spec.seed)
    n, m, r = spec.users, spec.items, spec.latent_rank

    # Popularity prior: a Zipf law over a random permutation of item ids, so that
    # item id carries no information about popularity.
    popularity_rank = rng.permutation(m) + 1
    log_prior = -spec.zipf_exponent * np.log(popularity_rank)

    user_factors = rng.standard_normal((n, r))
    item_factors = rng.standard_normal((m, r))
    affinity = (user_factors @ item_factors.T) / np.sqrt(r)

    # User activity: log-normal around the target density, at least the minimum
    # (the FedRAP protocol drops users with fewer than 10 interactions).
    mean_activity = spec.density * m
    activity = rng.lognormal(np.log(mean_activity) - 0.125, 0.5, size=n)
    activity = np.clip(np.rint(activity), spec.min_user_interactions, m - 1).astype(np.int64)

    # Gumbel-top-k: the first k items by (logit + Gumbel noise) are a sample of k
    # items without replacement from softmax(logit).
    logits = spec.affinity_scale * affinity + log_prior
    keys = logits + rng.gumbel(size=(n, m))
    order = np.argsort(-keys, axis=1, kind="stable")
    take = np.arange(m)[None, :] < activity[:, None]
    users = np.broadcast_to(np.arange(n)[:, None], (n, m))[take]
    items = order[take]

    # Ratings: a noisy monotone function of the affinity, cut into 1..5.
    a = affinity[users, items]
    noisy = a + 0.5 * rng.standard_normal(a.shape)
    rating = np.digitize(noisy, np.quantile(noisy, [0.1, 0.25, 0.5, 0.75])) + 1

    # Timestamps: increasing within a user, users interleaved over the time span.
    ts = spec.start_timestamp + rng.integers(0, spec.time_span_seconds, size=users.size)
    frame = pd.DataFrame(
        {
            "user": users.astype(np.int64),
            "item": items.astype(np.int64),
            "rating": rating.astype(np.float32),
            "timestamp": ts.astype(np.int64),
        }
    )
    return frame.sort_values(["user", "timestamp", "item"], kind="stable").reset_index(drop=True)
