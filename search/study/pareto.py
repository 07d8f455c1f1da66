"""Pareto fronts and hypervolume for minimization problems (points as an (N, M) array).

A point dominates another when it is no worse in every objective and better in one (Deb et al.
2002, NSGA-II §II). The hypervolume of a set is the measure of the region it dominates up to a
reference point (Zitzler & Thiele 1999); in two dimensions it is a sum of rectangles over the
front sorted by the first objective. Maximized objectives are negated by the caller.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["hypervolume_2d", "pareto_mask"]


def pareto_mask(points: ArrayLike) -> NDArray[np.bool_]:
    """(N,) True for the non-dominated rows of ``points`` (N, M), minimization."""
    p = np.asarray(points, dtype=np.float64)
    n = p.shape[0]
    mask = np.ones(n, dtype=bool)
    for i in range(n):
        if not mask[i]:
            continue
        no_worse = np.all(p <= p[i], axis=1)
        better = np.any(p < p[i], axis=1)
        if np.any(no_worse & better):
            mask[i] = False
    return mask


def hypervolume_2d(points: ArrayLike, reference: ArrayLike) -> float:
    """Area dominated by ``points`` (N, 2) and bounded by ``reference`` (2,), minimization."""
    p = np.asarray(points, dtype=np.float64).reshape(-1, 2)
    ref = np.asarray(reference, dtype=np.float64)
    p = p[np.all(p < ref, axis=1)]
    if p.shape[0] == 0:
        return 0.0
    front = p[pareto_mask(p)]
    front = front[np.argsort(front[:, 0])]
    widths = np.diff(np.append(front[:, 0], ref[0]))
    return float(np.sum(widths * (ref[1] - front[:, 1])))
