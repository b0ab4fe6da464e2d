"""Datasets: the registry, verified fetching, safe extraction and one parser per format.

Typical use::

    from recrepro.datasets import fetch_dataset, load_raw

    fetch_dataset("gowalla", Path("data/raw/gowalla"), mirror=Path("../shared/datasets"))
    raw = load_raw("gowalla", Path("data/raw/gowalla"))
"""

from recrepro.datasets.archives import safe_extract
from recrepro.datasets.container import DataFormatError, RawInteractions
from recrepro.datasets.download import fetch_dataset
from recrepro.datasets.errors import ChecksumError, DatasetUnavailableError, UnsafeArchiveError
from recrepro.datasets.registry import DATASETS, DatasetSpec, get_dataset, load_raw

__all__ = [
    "DATASETS",
    "ChecksumError",
    "DataFormatError",
    "DatasetSpec",
    "DatasetUnavailableError",
    "RawInteractions",
    "UnsafeArchiveError",
    "fetch_dataset",
    "get_dataset",
    "load_raw",
    "safe_extract",
]
