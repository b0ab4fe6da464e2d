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
- :mod:`~recrepro.papers.fedrap.tuning` — the validation grids: points, run names, picks, the tuning table.
- :mod:`~recrepro.papers.fedrap.run` — one variant's run (validation-selected record, curves, projection):
  what ``recrepro fedrap train`` calls.
- :mod:`~recrepro.papers.fedrap.rules` — the rules' helpers (splits, runs, settings from the config).
- :mod:`~recrepro.papers.fedrap.tables` — dataset statistics and the results table.
- :mod:`~recrepro.papers.fedrap.figures` — learning curves, ablation/DP and embeddings figures.
- :mod:`~recrepro.papers.fedrap.comparison` — the comparison block of the table and the released code's
  curves beside ours.
- :mod:`~recrepro.papers.fedrap.drift` — the records against today's configuration.
- :mod:`~recrepro.papers.fedrap.cli` — the verbs of ``recrepro fedrap <verb>`` the rules call.
"""
