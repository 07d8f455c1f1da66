"""Compiled per-level steps of :func:`simcore.engine.schedule.run_chains`.

The longest path over the condensed DAG (DESIGN.md, "The vectorized engine") is evaluated one
topological level at a time. To keep the numpy work per level small, chains are renumbered in
level order (a level's chains are the contiguous rows ``lo:hi`` of the start array, so results
are written in place, no scatter) and each chain's predecessor segments are laid out as ``k``
blocks of ``m`` rows (chains with fewer than ``k`` predecessors repeat their first one; ``max``
is idempotent). A level is then two row gathers into reused buffers, one add and ``k - 1``
element-wise maxima with ``out=``, exactly the same floating-point operations as a
gather + ``maximum.reduceat`` (max is exact), so the results are bit-identical.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

IntArray = NDArray[np.int64]

_MAX_PAD = 1.5  # pad a level to uniform predecessor counts only if it adds at most 50% rows


class Step(NamedTuple):
    """One level: chains ``lo:hi`` (level order) wait for ``pred_chains``/``pred_segs``.

    ``k`` > 0: the predecessors are ``k`` blocks of ``hi - lo`` rows (uniform layout);
    ``k`` == 0: a ragged level reduced with ``maximum.reduceat`` at offsets ``seg``;
    ``k`` == -1: roots (start at 0).
    """

    lo: int
    hi: int
    k: int
    pred_chains: IntArray  # in level order
    pred_segs: IntArray
    seg: IntArray


def compile_steps(levels: list[tuple[IntArray, IntArray, IntArray, IntArray]], c: int
                  ) -> tuple[tuple[Step, ...], IntArray]:
    """Steps for ``levels`` = [(chains, pred_segs, seg offsets, pred_chains)] and the (C,)
    position of every chain in level order."""
    perm = np.concatenate([lv[0] for lv in levels]) if levels else np.zeros(0, dtype=np.int64)
    pos = np.empty(c, dtype=np.int64)
    pos[perm] = np.arange(perm.size, dtype=np.int64)
    steps = []
    lo = 0
    for chains, pred_segs, seg, pred_chains in levels:
        m = chains.size
        hi = lo + m
        if pred_segs.size == 0:
            steps.append(Step(lo, hi, -1, pred_segs, pred_segs, seg))
            lo = hi
            continue
        counts = np.diff(np.append(seg, pred_segs.size))
        k = int(counts.max())
        if m * k <= _MAX_PAD * pred_segs.size:
            # block j holds the j-th predecessor of every chain (or its first one)
            j = np.minimum(np.arange(k)[:, None], counts[None, :] - 1)
            rows = (seg[None, :] + j).ravel()
            steps.append(Step(lo, hi, k, pos[pred_chains[rows]], pred_segs[rows], seg))
        else:
            steps.append(Step(lo, hi, 0, pos[pred_chains], pred_segs, seg))
        lo = hi
    return tuple(steps), pos
