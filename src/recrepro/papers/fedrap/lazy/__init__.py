"""FedRAP's lazy paper path: the paper's full-matrix regularisers, exact, in one pass over the private
tables per round.

Submodules
----------
- :mod:`~recrepro.papers.fedrap.lazy.path` — :class:`~recrepro.papers.fedrap.lazy.path.LazyPath`, the
  training path (the round's control flow, its end-of-round pass) and what it hands back.
- :mod:`~recrepro.papers.fedrap.lazy.state` — the path's state as dataclasses: the round's context and
  statistics, the regulariser map, the carried statistics, the compact uploads.
- :mod:`~recrepro.papers.fedrap.lazy.start` — the start-of-round statistics: the sign bound, the pass
  that takes them, the entries to replay.
- :mod:`~recrepro.papers.fedrap.lazy.next_round` — the next round's statistics, taken during this
  round's pass.
- :mod:`~recrepro.papers.fedrap.lazy.steps` — the paper-mode steps of the sampled rows and replayed
  entries, and the local epochs.
- :mod:`~recrepro.papers.fedrap.lazy.kernels` — the arithmetic the path calls (sums, norms, writes).
"""
