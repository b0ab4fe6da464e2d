"""The federated simulation core: many clients (users) trained at once, rounds, aggregation.

Submodules
----------
- :mod:`~recrepro.models.federated.simulation` — :class:`~recrepro.models.federated.simulation.FederatedSimulation`,
  the base of a vectorised federated recommender: the round loop with evaluation and resumable
  checkpoints, and the state carried from one round to the next.
- :mod:`~recrepro.models.federated.sampling` — client sampling, a round's training samples, negatives
  (also the pointwise data stream of the centralised upper bounds).
- :mod:`~recrepro.models.federated.clients` — local training of all clients at once: mini-batches per
  client, the local early stop, the compact (client, item) row layout of a round.
- :mod:`~recrepro.models.federated.aggregation` — the server's sum of row-wise uploads (FedAvg) and
  the number of non-zero uploaded entries, without forming the dense uploads.
- :mod:`~recrepro.models.federated.privacy` — the Gaussian mechanism on clients' uploads and its (ε, δ).
- :mod:`~recrepro.models.federated.storage` — per-client private item tables: in RAM under a memory
  budget, else a disk-backed memmap; a lazy per-client weight-decay scale.

The methods built on it (FedRAP, FedMF, PFedRec, FedNCF) live in :mod:`recrepro.papers.fedrap`.
"""
