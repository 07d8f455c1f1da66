"""Topological levels of a DAG given as predecessor CSR (Kahn's algorithm, one numpy step per
level), and cycle extraction for error messages."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

IntArray = NDArray[np.int64]


def levelize(ptr: IntArray, idx: IntArray, n: int) -> list[IntArray] | None:
    """Nodes grouped by longest-path depth; None if the graph has a cycle.

    Args:
        ptr: (n+1,) CSR offsets of each node's predecessors in ``idx``.
        idx: predecessor node indices (duplicates allowed).
        n: number of nodes.
    """
    dst = np.repeat(np.arange(n, dtype=np.int64), np.diff(ptr))
    key = np.unique(dst * max(n, 1) + idx)
    dst, src = key // max(n, 1), key % max(n, 1)
    indeg = np.bincount(dst, minlength=n)
    succ_order = np.argsort(src, kind="stable")
    succ_dst = dst[succ_order]
    succ_ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=n), out=succ_ptr[1:])
    levels: list[IntArray] = []
    frontier = np.flatnonzero(indeg == 0).astype(np.int64)
    done = 0
    while frontier.size:
        levels.append(frontier)
        done += frontier.size
        counts = succ_ptr[frontier + 1] - succ_ptr[frontier]
        off = np.repeat(succ_ptr[frontier] - np.concatenate([[0], np.cumsum(counts)[:-1]]),
                        counts)
        succs = succ_dst[off + np.arange(counts.sum(), dtype=np.int64)]
        np.subtract.at(indeg, succs, 1)
        cand = np.unique(succs)
        frontier = cand[indeg[cand] == 0]
    return levels if done == n else None


def find_cycle(ptr: IntArray, idx: IntArray, n: int) -> list[int]:
    """Node indices on one cycle (in dependency order) of a graph known to have one."""
    dst = np.repeat(np.arange(n, dtype=np.int64), np.diff(ptr))
    indeg = np.bincount(dst, minlength=n)
    remaining = np.ones(n, dtype=bool)
    # peel nodes with no unfinished predecessors
    succ_order = np.argsort(idx, kind="stable")
    succ_dst = dst[succ_order]
    succ_ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(idx, minlength=n), out=succ_ptr[1:])
    frontier = np.flatnonzero(indeg == 0)
    while frontier.size:
        remaining[frontier] = False
        counts = succ_ptr[frontier + 1] - succ_ptr[frontier]
        off = np.repeat(succ_ptr[frontier] - np.concatenate([[0], np.cumsum(counts)[:-1]]),
                        counts)
        succs = succ_dst[off + np.arange(counts.sum(), dtype=np.int64)]
        np.subtract.at(indeg, succs, 1)
        cand = np.unique(succs)
        frontier = cand[(indeg[cand] == 0) & remaining[cand]]
    node = int(np.flatnonzero(remaining)[0])
    seen: dict[int, int] = {}
    path: list[int] = []
    while node not in seen:
        seen[node] = len(path)
        path.append(node)
        preds = idx[ptr[node] : ptr[node + 1]]
        node = int(preds[remaining[preds]][0])
    return path[seen[node] :][::-1]
