"""Low-rank plus sparse personalisation (Pal et al., AMHT-LRS, arXiv 2210.03505).

Linear LRS model (paper eq. (1)): user ``i`` has ``m`` samples ``y_ij = <x_ij, U* w*_i + b*_i> + z_ij``
with ``x_ij ~ N(0, I_d)``, ``U*`` a ``d x r`` orthonormal basis shared by all users and ``b*_i``
``k``-sparse. Everything specific to the paper is in this package:

``generator``    the synthetic data model (seeded) and the error metrics;
``amht_lrs``     AMHT-LRS, vectorised over users (batched solves, top-k hard thresholding);
``private``      the billboard-model private variant and its zCDP accountant;
``baselines``    per-user least squares, low-rank only AltMin, sparse only IHT, low-rank + ridge;
``movielens``    the ML-100K regression tasks of our own Figure 6;
``run``          the training driver (sweeps, ML-100K rows, acceptance run records): ``recrepro lrs train``;
``rules``        the rules' helpers (each figure's sweep, the acceptance runs, the targets);
``figures``      Figs. 1-6 from the rows;
``drift``        the acceptance records against today's configuration;
``cli``          the verbs of ``recrepro lrs <verb>`` over them.

No official code exists and the paper's algorithm box could not be read: every design choice
is listed under ``## lrs-...`` in ``docs/deviations.md``.

The package itself imports nothing: the rules' helpers (``rules``) load without torch.
"""
