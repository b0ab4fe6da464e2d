"""λOpt (Chen, Chen, Zhang, Song, Zhang, KDD 2019): personalised, adaptive regularisation for MF.

Submodules
----------
- :mod:`~recrepro.papers.lambdaopt.mf_lambdaopt` — MF-λOpt: BPR-MF whose per-user/item λ is
  learned on the validation set by one hypergradient step after every Θ step (and MF-λFix).
- :mod:`~recrepro.papers.lambdaopt.sgda` — the SGDA baseline (Rendle, WSDM 2012).
- :mod:`~recrepro.papers.lambdaopt.amf` — the AMF baseline (He et al., SIGIR 2018).
- :mod:`~recrepro.papers.lambdaopt.experiments` — runs, table, figures and the rules' helpers.
- :mod:`~recrepro.papers.lambdaopt.cli` — the verbs of ``recrepro lambdaopt <verb>`` the rules call.

NeuMF, the fourth baseline, is a general model shared with other code: :mod:`recrepro.models.neumf`.
"""
