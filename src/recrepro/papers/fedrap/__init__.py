"""FedRAP (Li, Long, Zhou, ICLR 2024): federated recommendation with additive personalization.

Submodules
----------
- :mod:`~recrepro.papers.fedrap.fedrap` — FedRAP, FedMF and PFedRec: one vectorised federated
  simulation (``FederatedRecommender``) on :mod:`recrepro.models.federated`, with its three local
  training paths :mod:`~recrepro.papers.fedrap.rows` (code mode, FedMF, PFedRec),
  :mod:`~recrepro.papers.fedrap.lazy` (paper mode, exact lazy regularisers) and
  :mod:`~recrepro.papers.fedrap.dense` (the dense reference; DP, prox, L2 ablation).
- :mod:`~recrepro.papers.fedrap.fedncf` — FedNCF (NeuMF, private user embeddings, FedAvg).
- :mod:`~recrepro.papers.fedrap.central` — the centralised MF and NCF upper bounds.
- :mod:`~recrepro.papers.fedrap.ncf` — the NeuMF network FedNCF and the NCF upper bound share.
- :mod:`~recrepro.papers.fedrap.config` — ``FederatedConfig`` and the curricula of λ, μ.
- :mod:`~recrepro.papers.fedrap.variants` — ``make_variant``: a run's settings -> a model.
- :mod:`~recrepro.papers.fedrap.experiments` — one run, dataset statistics, the results table, the
  figures and the rules' helpers.
- :mod:`~recrepro.papers.fedrap.cli` — the verbs of ``recrepro fedrap <verb>`` the rules call.
"""
