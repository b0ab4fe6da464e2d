"""The check both released-code harnesses make of their faster batch fetch (benchmarks/official_*.py)."""

from __future__ import annotations


def assert_batched_fetch_is_bit_for_bit(fetch_source: str, getitems: str, attrs: tuple[str, str, str], third) -> None:
    """``fetch_source`` (a harness's batch-fetch code, defining ``getitems`` and ``batched_loader``) on a
    stand-in of a released dataset class (three tensors under the names ``attrs``, one sample per index,
    the third ``third``): under the same seed its shuffled batches are the per-sample loader's tensors,
    dtypes included."""
    import torch
    from torch.utils.data import DataLoader, Dataset

    class Triples(Dataset):
        def __init__(self, *tensors):
            for name, tensor in zip(attrs, tensors, strict=True):
                setattr(self, name, tensor)

        def __getitem__(self, index):
            return tuple(getattr(self, name)[index] for name in attrs)

        def __len__(self):
            return getattr(self, attrs[0]).size(0)

    class Batched(Triples):
        pass

    namespace = {"torch": torch}
    exec(fetch_source, namespace)
    Batched.__getitems__ = namespace[getitems]
    tensors = (torch.arange(11) % 3, torch.arange(100, 111), third)
    torch.manual_seed(7)
    plain = list(DataLoader(Triples(*tensors), batch_size=4, shuffle=True))
    torch.manual_seed(7)
    fast = list(namespace["batched_loader"](Batched(*tensors), batch_size=4, shuffle=True))
    assert [len(b[0]) for b in fast] == [4, 4, 3] and len(plain) == len(fast)
    for a, b in zip(plain, fast, strict=True):
        for x, y in zip(a, b, strict=True):
            assert x.dtype == y.dtype and torch.equal(x, y)
