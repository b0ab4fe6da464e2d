"""Recommender models: the shared :class:`Recommender` interface and the baselines."""

from recrepro.models.base import NotFittedError, Recommender
from recrepro.models.baselines import MostPopular, RandomRecommender

__all__ = ["MostPopular", "NotFittedError", "RandomRecommender", "Recommender"]
