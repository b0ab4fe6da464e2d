"""Grid search helpers shared by the tuned simple baselines (:mod:`recrepro.baselines.strong`) and the papers'
validation grids: the points of a grid, the pick, the edges a pick sits on, and the walk past them.

Pure functions over settings dicts and validation scores; nothing here fits or reads a model.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["beyond_edges", "check_beyond", "expand_grid", "grid_edges", "pick_point"]


def expand_grid(grid: Mapping[str, Sequence[Any]] | None, fixed: Mapping[str, Any] | None = None
                ) -> list[dict[str, Any]]:
    """The grid's points in a fixed order: the Cartesian product of ``grid``'s lists (keys sorted),
    each merged over ``fixed``.  An empty grid is one point, ``fixed``."""
    grid = dict(grid or {})
    fixed = dict(fixed or {})
    clash = sorted(set(grid) & set(fixed))
    if clash:
        raise ValueError(f"settings both fixed and searched: {clash}")
    keys = sorted(grid)
    for key in keys:
        if not isinstance(grid[key], (list, tuple)) or not grid[key]:
            raise ValueError(f"grid entry {key!r} must be a non-empty list, got {grid[key]!r}")
    return [{**fixed, **dict(zip(keys, values))} for values in itertools.product(*(grid[k] for k in keys))]


def pick_point(scores: Sequence[float]) -> int:
    """Index of the best validation score; the first in grid order wins a tie.  NaN never wins."""
    arr = np.asarray(scores, dtype=np.float64)
    if arr.size == 0 or np.all(np.isnan(arr)):
        raise ValueError("no grid point has a finite validation score")
    return int(np.nanargmax(arr))


def grid_edges(points: Sequence[Mapping[str, Any]], pick: Mapping[str, Any],
               floors: Mapping[str, float] | None = None) -> list[str]:
    """The keys at whose searched range's end ``pick`` sits, e.g. ``["lam (smallest)"]``: a
    pick on an edge may have a better point beyond it (keys with one searched value are not edges).
    ``floors``: settings' smallest allowed values (a model's ``SETTING_FLOORS``); a smallest value
    equal to its floor has nothing beyond it and is not an edge.

    >>> grid_edges([{"lam": 0.1, "mu": 1.0}, {"lam": 0.01, "mu": 1.0}, {"lam": 0.001, "mu": 1.0}],
    ...            {"lam": 0.001, "mu": 1.0})
    ['lam (smallest)']
    >>> grid_edges([{"shrink": 0.0}, {"shrink": 10.0}], {"shrink": 0.0}, floors={"shrink": 0.0})
    []
    """
    floors = floors or {}
    edges = []
    for key, value in pick.items():
        values = sorted({p[key] for p in points if isinstance(p.get(key), (int, float))})
        if len(values) < 2 or not isinstance(value, (int, float)):
            continue
        if value == values[0]:
            if floors.get(key) != value:
                edges.append(f"{key} (smallest)")
        elif value == values[-1]:
            edges.append(f"{key} (largest)")
    return edges


def check_beyond(grid: Mapping[str, Sequence[Any]] | None, beyond: Mapping[str, Sequence[Any]] | None) -> None:
    """Refuse a ``beyond`` list that names a setting the grid does not search, or a value inside the
    grid's range (a walk step lies past an edge: below the smallest searched value or above the largest)."""
    grid = dict(grid or {})
    for key, values in dict(beyond or {}).items():
        if key not in grid or len(grid[key]) < 2:
            raise ValueError(f"beyond names {key!r}, which the grid does not search over two or more values")
        lo, hi = min(grid[key]), max(grid[key])
        inside = [v for v in values if not isinstance(v, (int, float)) or lo <= v <= hi]
        if inside:
            raise ValueError(f"beyond's {key!r} values must lie outside the grid's {lo:g}..{hi:g}, not {inside}")


def beyond_edges(points: Sequence[Mapping[str, Any]], scores: Sequence[float],
                 beyond: Mapping[str, Sequence[Any]] | None) -> list[dict[str, Any]]:
    """The next points of the walk past the grid's edges: for each setting of ``beyond`` at whose
    searched range's end the pick of ``points`` (scored ``scores``) sits, the pick with that setting
    moved one listed value further out (the nearest value of ``beyond[key]`` past the edge); none once
    the pick is inside on every such setting or the list has no value further out.

    A coordinate walk, not a wider grid: each step changes one setting of the current pick, so a grid
    picked on an edge in two settings costs two points a step, not a new Cartesian product. Run until
    it returns nothing, the pick ends inside the searched range of every walked setting or at the end
    of its list, where :func:`grid_edges` still names it.

    >>> pts = [{"lam": 1.0}, {"lam": 10.0}]
    >>> beyond_edges(pts, [0.1, 0.2], {"lam": [0.1, 100.0, 1000.0]})
    [{'lam': 100.0}]
    >>> beyond_edges(pts + [{"lam": 100.0}], [0.1, 0.2, 0.15], {"lam": [0.1, 100.0, 1000.0]})
    []
    """
    if not beyond or not points:
        return []
    pick = dict(points[pick_point(scores)])
    scored = [dict(p) for p in points]
    steps: list[dict[str, Any]] = []
    for key in sorted(beyond):
        value = pick.get(key)
        searched = sorted({p[key] for p in points if isinstance(p.get(key), (int, float))})
        if len(searched) < 2 or not isinstance(value, (int, float)):
            continue
        if value == searched[0]:
            further = [v for v in beyond[key] if v < value]
            step = max(further) if further else None
        elif value == searched[-1]:
            further = [v for v in beyond[key] if v > value]
            step = min(further) if further else None
        else:
            continue
        point = {**pick, key: step}
        if step is not None and point not in scored and point not in steps:
            steps.append(point)
    return steps
