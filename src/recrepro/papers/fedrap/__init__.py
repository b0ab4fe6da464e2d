"""FedRAP (Li, Long, Zhou, ICLR 2024): federated recommendation with additive personalization.

Submodules
----------
- :mod:`~recrepro.papers.fedrap.fedrap` — FedRAP, FedMF and PFedRec: one vectorised federated
  simulation (``FederatedRecommender``) on :mod:`recrepro.models.federated`.  The model holds the
  state; each round runs on one of three training paths, objects behind one small interface
  (:mod:`~recrepro.papers.fedrap.training_path`): :mod:`~recrepro.papers.fedrap.rows` (code mode,
  FedMF, PFedRec), :mod:`~recrepro.papers.fedrap.lazy` (paper mode, exact lazy regularisers; a
  package) and :mod:`~recrepro.papers.fedrap.dense` (the dense reference; prox, L2 ablation).
- :mod:`~recrepro.papers.fedrap.fedncf` — FedNCF (NeuMF, private user embeddings, FedAvg), a
  federated simulation of its own.
- :mod:`~recrepro.papers.fedrap.central` — the centralised MF and NCF upper bounds.
- :mod:`~recrepro.papers.fedrap.ncf` — the NeuMF network FedNCF and the NCF upper bound share.
- :mod:`~recrepro.papers.fedrap.config` — ``FederatedConfig`` and the curricula of λ, μ.
- :mod:`~recrepro.papers.fedrap.variants` — ``make_variant``: a run's settings -> a model.
- :mod:`~recrepro.papers.fedrap.experiments` — one run, the figures and the rules' helpers.
- :mod:`~recrepro.papers.fedrap.tables` — dataset statistics and the results table.
- :mod:`~recrepro.papers.fedrap.cli` — the verbs of ``recrepro fedrap <verb>`` the rules call.
"""
