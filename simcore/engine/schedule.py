"""Vectorized in-order list scheduling of a workload graph over a batch of design points.

Model (DESIGN.md, "The vectorized engine"): every resource (a GPU compute stream, a
communication stream, a memory channel) executes its nodes in issue order, one at a time; a node
starts when all its dependencies have finished and every resource it occupies is free::

    start[i]  = max(max(finish[d] for d in deps(i)), max(free[r] for r in resources(i)))
    finish[i] = start[i] + duration[i]

With the previous node on each resource added as an extra predecessor, ``free[r]`` is that
node's finish, so the schedule is exactly the longest path through the DAG of dependencies and
resource-order edges. :func:`compile_plan` builds that DAG once per graph structure and cuts it
into topological levels; :func:`run_schedule` then evaluates one level at a time with numpy, every
quantity a (B,) vector over the batch. A single design point is a batch of one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from simcore.errors import InputError
from simcore.workload.graph import Graph

__all__ = ["SchedulePlan", "ScheduleResult", "compile_plan", "run_schedule"]


@dataclass(frozen=True, eq=False)
class _Level:
    nodes: NDArray[np.int64]  # (k,) nodes whose longest-path depth is this level
    preds: NDArray[np.int64]  # (e,) predecessors of those nodes, concatenated
    seg: NDArray[np.int64]  # (k,) offsets of each node's predecessors within ``preds``


@dataclass(frozen=True, eq=False)
class SchedulePlan:
    """A graph compiled for scheduling: predecessor lists and topological levels.

    Build it once per graph structure with :func:`compile_plan` and reuse it for every batch.
    """

    graph: Graph
    levels: tuple[_Level, ...]
    pred_ptr: NDArray[np.int64]
    pred_idx: NDArray[np.int64]

    @property
    def num_levels(self) -> int:
        """Depth of the DAG (number of sequential numpy steps per batch)."""
        return len(self.levels)


@dataclass(frozen=True, eq=False)
class ScheduleResult:
    """Start and finish times of every node, per design point.

    Attributes:
        start: (N, B) start time of each node, in the duration unit.
        finish: (N, B) finish time of each node.
    """

    start: NDArray[np.float64]
    finish: NDArray[np.float64]

    @property
    def makespan(self) -> NDArray[np.float64]:
        """(B,) finish time of the last node."""
        if self.finish.shape[0] == 0:
            return np.zeros(self.finish.shape[1])
        return np.asarray(self.finish.max(axis=0))


def _predecessors(graph: Graph) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """CSR of dependencies plus, per resource, the previous node in issue order."""
    n = graph.num_nodes
    res_counts = np.diff(graph.res_ptr)
    owner = np.repeat(np.arange(n, dtype=np.int64), res_counts)
    res = graph.res_idx
    order = np.lexsort((owner, res))  # by resource, then issue order (= node index)
    res_sorted, owner_sorted = res[order], owner[order]
    same = res_sorted[1:] == res_sorted[:-1]
    chain_dst = owner_sorted[1:][same]
    chain_src = owner_sorted[:-1][same]
    dep_counts = np.diff(graph.dep_ptr)
    dep_dst = np.repeat(np.arange(n, dtype=np.int64), dep_counts)
    dst = np.concatenate([dep_dst, chain_dst])
    src = np.concatenate([graph.dep_idx, chain_src])
    # a node may both depend on and follow the same predecessor: drop duplicate edges
    key = np.unique(dst * max(n, 1) + src)
    dst, src = key // max(n, 1), key % max(n, 1)
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(dst, minlength=n), out=ptr[1:])
    return ptr, src.astype(np.int64)


def _find_cycle(remaining: NDArray[np.bool_], ptr: NDArray[np.int64], idx: NDArray[np.int64]) -> list[int]:
    """Follow unfinished predecessors from an unfinished node until a node repeats."""
    node = int(np.flatnonzero(remaining)[0])
    seen: dict[int, int] = {}
    path: list[int] = []
    while node not in seen:
        seen[node] = len(path)
        path.append(node)
        preds = idx[ptr[node] : ptr[node + 1]]
        node = int(preds[remaining[preds]][0])
    return path[seen[node] :][::-1]


def compile_plan(graph: Graph) -> SchedulePlan:
    """Compile ``graph`` for :func:`run_schedule`.

    Raises:
        InputError: the dependencies (with resource issue order) contain a cycle; the message
            names the node ids on it.
    """
    n = graph.num_nodes
    ptr, idx = _predecessors(graph)
    indeg = np.diff(ptr).copy()
    succ_order = np.argsort(idx, kind="stable")
    succ_dst = np.repeat(np.arange(n, dtype=np.int64), np.diff(ptr))[succ_order]
    succ_ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(idx, minlength=n), out=succ_ptr[1:])
    levels: list[_Level] = []
    frontier = np.flatnonzero(indeg == 0).astype(np.int64)
    done = 0
    while frontier.size:
        counts = ptr[frontier + 1] - ptr[frontier]
        seg = np.zeros(frontier.size, dtype=np.int64)
        np.cumsum(counts[:-1], out=seg[1:])
        gather = np.repeat(ptr[frontier] - seg, counts) + np.arange(counts.sum(), dtype=np.int64)
        levels.append(_Level(nodes=frontier, preds=idx[gather], seg=seg))
        done += frontier.size
        s_counts = succ_ptr[frontier + 1] - succ_ptr[frontier]
        s_off = np.repeat(succ_ptr[frontier] - np.concatenate([[0], np.cumsum(s_counts)[:-1]]), s_counts)
        succs = succ_dst[s_off + np.arange(s_counts.sum(), dtype=np.int64)]
        np.subtract.at(indeg, succs, 1)
        cand = np.unique(succs)
        frontier = cand[indeg[cand] == 0]
    if done != n:
        remaining = indeg > 0
        cycle = _find_cycle(remaining, ptr, idx)
        ids = " -> ".join(str(int(graph.node_ids[i])) for i in cycle[:12])
        raise InputError("graph", f"cycle {ids}", "dependencies and stream order must be acyclic")
    return SchedulePlan(graph=graph, levels=tuple(levels), pred_ptr=ptr, pred_idx=idx)


def run_schedule(plan: SchedulePlan, durations: NDArray[np.float64]) -> ScheduleResult:
    """Schedule every design point of a batch.

    Args:
        plan: the compiled graph.
        durations: (N, B) duration of each node for each design point (or (N,) for B = 1),
            in any time unit; results come back in the same unit.

    Returns:
        Start and finish times, each (N, B).
    """
    dur = np.asarray(durations, dtype=np.float64)
    if dur.ndim == 1:
        dur = dur[:, None]
    n = plan.graph.num_nodes
    if dur.shape[0] != n:
        raise InputError("durations.shape[0]", dur.shape[0], f"must equal the node count {n}")
    start = np.zeros_like(dur)
    finish = np.empty_like(dur)
    for level in plan.levels:
        nodes = level.nodes
        if level.preds.size:
            s = np.maximum.reduceat(finish[level.preds], level.seg, axis=0)
            start[nodes] = s
            finish[nodes] = s + dur[nodes]
        else:
            finish[nodes] = dur[nodes]
    return ScheduleResult(start=start, finish=finish)
