"""The one topological peel of the project (Kahn's algorithm) and what is built on it.

A DAG is given as predecessor CSR (``ptr``, ``idx``, ``n``: node ``i`` waits for
``idx[ptr[i]:ptr[i+1]]``; duplicates allowed). :func:`levelize` peels it one numpy step per
level (longest-path depth; the engine's schedule levels), :func:`blocked` gives the nodes a peel
never frees (on or behind a cycle), :func:`find_cycle` one cycle for error messages, and
:func:`priority_order` the topological order that always takes the lowest ready index next
(ASTRA-sim's issue rule, a heap on the same successor lists) (Kahn, "Topological sorting of
large networks", CACM 1962).
"""

from __future__ import annotations

import heapq

import numpy as np
from numpy.typing import NDArray

from simcore.ir.intsets import unique_sorted

__all__ = ["blocked", "depths", "find_cycle", "levelize", "priority_order", "successors"]

IntArray = NDArray[np.int64]


def successors(ptr: IntArray, idx: IntArray, n: int) -> tuple[IntArray, IntArray, IntArray]:
    """(succ_ptr, succ_idx, indegree) of the deduplicated edges of a predecessor CSR."""
    dst = np.repeat(np.arange(n, dtype=np.int64), np.diff(ptr))
    key = unique_sorted(dst * max(n, 1) + idx)
    dst, src = key // max(n, 1), key % max(n, 1)
    indeg = np.bincount(dst, minlength=n)
    succ_order = np.argsort(src, kind="stable")
    succ_ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=n), out=succ_ptr[1:])
    return succ_ptr, dst[succ_order].astype(np.int64), indeg.astype(np.int64)


def _peel(ptr: IntArray, idx: IntArray, n: int) -> tuple[list[IntArray], NDArray[np.bool_]]:
    """Kahn's algorithm: levels peeled so far and the mask of nodes never freed (on or behind a
    cycle; all False for a DAG)."""
    succ_ptr, succ_dst, indeg = successors(ptr, idx, n)
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
        cand = unique_sorted(succs)
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


def depths(ptr: IntArray, idx: IntArray, n: int) -> IntArray | None:
    """(n,) longest-path depth of every node (the index of its :func:`levelize` level); None if
    the graph has a cycle. The same peel, one Python step per edge instead of numpy calls per
    level (cheaper for the deep, narrow DAGs of pipelines)."""
    counts = np.diff(ptr)  # duplicate edges count twice on both sides: no dedup needed
    dst = np.repeat(np.arange(n, dtype=np.int64), counts)
    succ_ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(idx, minlength=n), out=succ_ptr[1:])
    sp, si = succ_ptr.tolist(), dst[np.argsort(idx, kind="stable")].tolist()
    pending = counts.tolist()
    depth = [0] * n
    frontier = np.flatnonzero(counts == 0).tolist()
    done = len(frontier)
    d = 0
    while frontier:
        nxt: list[int] = []
        push = nxt.append
        for i in frontier:
            depth[i] = d
            for j in si[sp[i]:sp[i + 1]]:
                left = pending[j] - 1
                pending[j] = left
                if not left:
                    push(j)
        done += len(nxt)
        frontier = nxt
        d += 1
    return np.asarray(depth, dtype=np.int64) if done == n else None


def blocked(ptr: IntArray, idx: IntArray, n: int) -> NDArray[np.bool_]:
    """(n,) mask of the nodes the peel never frees: on a cycle or waiting for one (all False
    for a DAG)."""
    return _peel(ptr, idx, n)[1]


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


def priority_order(ptr: IntArray, idx: IntArray, n: int) -> IntArray:
    """Topological order that always takes the lowest-index ready node next (a heap instead of
    levels); the nodes of a cycle are left out. The identity when index order is topological."""
    succ_ptr, succ_idx, indeg = successors(ptr, idx, n)
    pending = indeg.tolist()
    sp, si = succ_ptr.tolist(), succ_idx.tolist()
    ready = [i for i in range(n) if pending[i] == 0]
    heapq.heapify(ready)
    out: list[int] = []
    while ready:
        i = heapq.heappop(ready)
        out.append(i)
        for j in si[sp[i]:sp[i + 1]]:
            pending[j] -= 1
            if pending[j] == 0:
                heapq.heappush(ready, j)
    return np.asarray(out, dtype=np.int64)
