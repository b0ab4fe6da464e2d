"""recrepro: reproduce five recommender-system papers on regularisation and personalisation.

All logic lives in this package; Snakemake rules call the small entry points in
:mod:`recrepro.cli.main` (or the functions they wrap).
"""

__version__ = "0.1.0"
