"""exADMM (Togashi, Abe, Saito, WWW 2024): fair exposure control for iALS.

Submodules
----------
- :mod:`~recrepro.papers.exadmm.experiments` — operating points from the config, one run (iALS,
  exADMM or FairRec on a strong-generalisation split), Figures 1-3, Table 4 and the rules' helpers.
- :mod:`~recrepro.papers.exadmm.cli` — the verbs of ``recrepro exadmm <verb>``.

The models are in :mod:`recrepro.models`: :mod:`~recrepro.models.ials`,
:mod:`~recrepro.papers.exadmm.exadmm` and :mod:`~recrepro.papers.exadmm.fairrec`.
"""
