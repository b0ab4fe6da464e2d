"""Each paper's small training run for tests/test_gpu.py, one module per paper key (``gpu_runs.<key>``).

``run(train, val, device)`` trains on the planted ``train``/``val`` matrices on ``device`` from fixed seeds
and returns the learned scores (all users × all items) or, for a paper without a user-item model, its
learned parameters: the GPU test compares them with the CPU's at the registry's ``gpu_tolerance``.
"""
