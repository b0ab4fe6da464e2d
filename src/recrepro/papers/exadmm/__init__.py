"""exADMM (Togashi, Abe, Saito, WWW 2024): fair exposure control for iALS.

Submodules
----------
- :mod:`~recrepro.papers.exadmm.exadmm` — the exADMM solver; :mod:`~recrepro.papers.exadmm.fairrec` —
  the FairRec post-processing (the iALS they extend is :mod:`recrepro.models.ials`).
- :mod:`~recrepro.papers.exadmm.run` — one run (iALS, exADMM or FairRec on a strong-generalisation split)
  and Fig. 2's timings: what ``recrepro exadmm train`` calls.
- :mod:`~recrepro.papers.exadmm.rules` — the operating points from the config and the rules' helpers.
- :mod:`~recrepro.papers.exadmm.tables` — the run records read back, Table 4.
- :mod:`~recrepro.papers.exadmm.figures` — Figures 1-3 from the records.
- :mod:`~recrepro.papers.exadmm.drift` — the records against today's configuration.
- :mod:`~recrepro.papers.exadmm.cli` — the verbs of ``recrepro exadmm <verb>``.
"""
