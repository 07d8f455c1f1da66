"""Topological levels of a DAG given as predecessor CSR (Kahn's algorithm, one numpy step per
level), and cycle extraction for error messages."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

IntArray = NDArray[np.int64]


def _peel(ptr: IntArray, idx: IntArray, n: int) -> tuple[list[IntArray], NDArray[np.bool_]]:
    """Kahn's algorithm: levels peeled so far and the mask of nodes never freed (on or behind a
    cycle; all False for a DAG)."""
    dst = np.repeat(np.arange(n, dtype=np.int64), np.diff(ptr))
    key = np.unique(dst * max(n, 1) + idx)
    dst, src = key // max(n, 1), key % max(n, 1)
    indeg = np.bincount(dst, minlength=n)
    succ_order = np.argsort(src, kind="stable")
    succ_dst = dst[succ_order]
    succ_ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=n), out=succ_ptr[1:])
    levels: list[IntArray] = []
    remaining = np.ones(n, dtype=bool)
    frontier = np.flatnonzero(indeg == 0).astype(np.int64)
    while frontier.size:
        levels.append(frontier)
        remaining[frontier] = False
        counts = succ_ptr[frontier + 1] - succ_ptr[frontier]
        off = np.repeat(succ_ptr[frontier] - np.concatenate([[0], np.cumsum(counts)[:-1]]),
                        counts)
        succs = succ_dst[off + np.arange(counts.sum(), dtype=np.int64)]
        np.subtract.at(indeg, succs, 1)
        cand = np.unique(succs)
        frontier = cand[indeg[cand] == 0]
    return levels, remaining


def levelize(ptr: IntArray, idx: IntArray, n: int) -> list[IntArray] | None:
    """Nodes grouped by longest-path depth; None if the graph has a cycle.

    Args:
        ptr: (n+1,) CSR offsets of each node's predecessors in ``idx``.
        idx: predecessor node indices (duplicates allowed).
        n: number of nodes.
    """
    levels, remaining = _peel(ptr, idx, n)
    return None if remaining.any() else levels


def find_cycle(ptr: IntArray, idx: IntArray, n: int) -> list[int]:
    """Node indices on one cycle (in dependency order) of a graph known to have one."""
    remaining = _peel(ptr, idx, n)[1]
    node = int(np.flatnonzero(remaining)[0])
    seen: dict[int, int] = {}
    path: list[int] = []
    while node not in seen:
        seen[node] = len(path)
        path.append(node)
        preds = idx[ptr[node] : ptr[node + 1]]
        node = int(preds[remaining[preds]][0])
    return path[seen[node] :][::-1]
