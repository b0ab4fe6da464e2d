"""PRISM (Loveland, Ju, Zhao, Shah, Koutra, KDD 2025): weight decay, popularity and embedding magnitudes.

Submodules
----------
- :mod:`~recrepro.papers.prism.trainer` — the shared trainer (Adam, weight decay modes, PRISM init,
  early stopping on validation NDCG@20).
- :mod:`~recrepro.papers.prism.methods` — run names <-> settings.
- :mod:`~recrepro.papers.prism.experiments` — one run, Fig. 1/2/3 and Table 1 drivers.
- :mod:`~recrepro.papers.prism.cli` — ``python -m recrepro.papers.prism <command>`` for the rules.
"""
