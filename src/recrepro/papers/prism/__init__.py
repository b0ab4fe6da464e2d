"""PRISM (Loveland, Ju, Zhao, Shah, Koutra, KDD 2025): weight decay, popularity and embedding magnitudes.

Submodules
----------
- :mod:`~recrepro.papers.prism.trainer` — the shared trainer (Adam, weight decay modes, PRISM init,
  early stopping on validation NDCG@20).
- :mod:`~recrepro.papers.prism.debias` — the debiasing baselines of App. D.2 (IPL, ReSN, MACR).
- :mod:`~recrepro.papers.prism.recommender` — the backbones as a ``Recommender`` trained by the trainer.
- :mod:`~recrepro.papers.prism.methods` — run names <-> settings.
- :mod:`~recrepro.papers.prism.run` — one training run: what ``recrepro prism train`` calls.
- :mod:`~recrepro.papers.prism.rules` — the rules' targets and figure specs from the config.
- :mod:`~recrepro.papers.prism.tables` — reading runs back, Table 1's selection, Table 1 and its
  learning-rate search table.
- :mod:`~recrepro.papers.prism.figures` — every figure, drawn from run records (Fig. 7 from Theorem 3.1).
- :mod:`~recrepro.papers.prism.drift` — the records against today's configuration.
- :mod:`~recrepro.papers.prism.cli` — the verbs of ``recrepro prism <verb>`` the rules call.
"""
