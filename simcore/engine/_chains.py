"""Predecessor lists and chain detection of a workload graph (the engine's graph reduction).

Predecessors of a node are its dependencies plus, for each in-order resource it occupies, the
node issued before it there. A node whose only predecessor is the previous node of the same
single stream starts when that one finishes: such runs are *chains* (DESIGN.md, "The vectorized
engine": collapse chains). Chains are found with numpy only: a link per node, then pointer
jumping for each node's chain head and position.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from simcore.ir.graph import Graph
from simcore.ir.intsets import unique_first, unique_sorted

__all__ = ["chains", "predecessors", "stream_signature"]

IntArray = NDArray[np.int64]


def predecessors(graph: Graph) -> tuple[IntArray, IntArray]:
    """CSR of dependencies plus, per resource, the previous node in issue order."""
    n = graph.num_nodes
    res_counts = np.diff(graph.res_ptr)
    owner = np.repeat(np.arange(n, dtype=np.int64), res_counts)
    res = graph.res_idx
    order = np.lexsort((owner, res))  # by resource, then issue order (= node index)
    res_sorted, owner_sorted = res[order], owner[order]
    same = res_sorted[1:] == res_sorted[:-1]
    dep_dst = np.repeat(np.arange(n, dtype=np.int64), np.diff(graph.dep_ptr))
    dst = np.concatenate([dep_dst, owner_sorted[1:][same]])
    src = np.concatenate([graph.dep_idx, owner_sorted[:-1][same]])
    key = unique_sorted(dst * max(n, 1) + src)  # drop duplicate edges
    dst, src = key // max(n, 1), key % max(n, 1)
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(dst, minlength=n), out=ptr[1:])
    return ptr, src.astype(np.int64)


def stream_signature(graph: Graph) -> IntArray:
    """Per node: its single resource id, -1 with none, a unique negative id with several."""
    n = graph.num_nodes
    counts = np.diff(graph.res_ptr)
    sig = np.full(n, -1, dtype=np.int64)
    one = counts == 1
    sig[one] = graph.res_idx[graph.res_ptr[:-1][one]]
    many = counts > 1
    sig[many] = -2 - np.flatnonzero(many)
    return sig


def chains(graph: Graph, ptr: IntArray, idx: IntArray) -> tuple[IntArray, IntArray] | None:
    """(head, position) of every node; None if the links contain a cycle."""
    n = graph.num_nodes
    indeg = np.diff(ptr)
    sig = stream_signature(graph)
    cand = np.flatnonzero(indeg == 1)
    u = idx[ptr[cand]]
    ok = (sig[cand] == sig[u]) & (sig[cand] >= -1)
    cand, u = cand[ok], u[ok]
    first = unique_first(u)[1]  # one continuation per node: the earliest
    prev = np.full(n, -1, dtype=np.int64)
    prev[cand[first]] = u[first]
    anc = np.where(prev >= 0, prev, np.arange(n))
    dist = (prev >= 0).astype(np.int64)
    for _ in range(max(1, int(np.ceil(np.log2(max(n, 2))))) + 1):
        dist = dist + dist[anc] * (anc != np.arange(n))
        anc_next = anc[anc]
        if np.array_equal(anc_next, anc):
            break
        anc = anc_next
    if np.any(prev[anc] >= 0):
        return None
    return anc, dist
