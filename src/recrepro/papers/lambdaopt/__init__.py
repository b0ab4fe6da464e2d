"""λOpt (Chen, Chen, Zhang, Song, Zhang, KDD 2019): personalised, adaptive regularisation for MF.

Submodules
----------
- :mod:`~recrepro.papers.lambdaopt.mf_lambdaopt` — MF-λOpt: BPR-MF whose per-user/item λ is
  learned on the validation set by one hypergradient step after every Θ step (and MF-λFix).
- :mod:`~recrepro.papers.lambdaopt.sgda` — the SGDA baseline (Rendle, WSDM 2012).
- :mod:`~recrepro.papers.lambdaopt.amf` — the AMF baseline (He et al., SIGIR 2018).
- :mod:`~recrepro.papers.lambdaopt.stopping` — the converging budget's stopping rule.
- :mod:`~recrepro.papers.lambdaopt.grid` — MF-λFix's λ grid as one job per λ, its record assembled.
- :mod:`~recrepro.papers.lambdaopt.run` — one variant's run and the sensitivity sweep: what
  ``recrepro lambdaopt train`` calls.
- :mod:`~recrepro.papers.lambdaopt.rules` — the rules' helpers (splits, runs, settings from the config).
- :mod:`~recrepro.papers.lambdaopt.tables` — the results table and its paired tests.
- :mod:`~recrepro.papers.lambdaopt.figures` — the λ-trajectory, sensitivity and frequency-group figures.
- :mod:`~recrepro.papers.lambdaopt.official` — the released code's curves beside our records.
- :mod:`~recrepro.papers.lambdaopt.drift` — the records against today's configuration.
- :mod:`~recrepro.papers.lambdaopt.cli` — the verbs of ``recrepro lambdaopt <verb>`` the rules call.

NeuMF, the fourth baseline, is a general model shared with other code: :mod:`recrepro.models.neumf`.
"""
