"""PRISM (Loveland, Ju, Zhao, Shah, Koutra, KDD 2025): weight decay, popularity and embedding magnitudes.

Submodules
----------
- :mod:`~recrepro.papers.prism.trainer` — the shared trainer (Adam, weight decay modes, PRISM init,
  early stopping on validation NDCG@20).
- :mod:`~recrepro.papers.prism.debias` — the debiasing baselines of App. D.2 (IPL, ReSN, MACR).
- :mod:`~recrepro.papers.prism.recommender` — the backbones as a ``Recommender`` trained by the trainer.
- :mod:`~recrepro.papers.prism.methods` — run names <-> settings.
- :mod:`~recrepro.papers.prism.experiments` — one run, reading runs back, Table 1 drivers.
- :mod:`~recrepro.papers.prism.figures` — every figure, drawn from run records (Fig. 7 from Theorem 3.1).
- :mod:`~recrepro.papers.prism.workflow` — the rules' targets and figure specs from the config.
- :mod:`~recrepro.papers.prism.cli` — the verbs of ``recrepro prism <verb>`` the rules call.
"""
