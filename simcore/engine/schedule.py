"""Vectorized in-order list scheduling of a workload graph over a batch of design points.

Model (DESIGN.md, "The vectorized engine"): every resource (a GPU compute stream, a
communication stream, a memory channel) executes its nodes in issue order, one at a time; a node
starts when all its dependencies have finished and every resource it occupies is free::

    start[i]  = max(max(finish[d] for d in deps(i)), max(free[r] for r in resources(i)))
    finish[i] = start[i] + duration[i]

With the previous node on each resource added as an extra predecessor, ``free[r]`` is that
node's finish, so the schedule is exactly the longest path through the DAG of dependencies and
resource-order edges.

Graph reduction: a node whose only predecessor is the node before it on the same stream starts
exactly when that one finishes, so such runs collapse into *chains* scheduled as one unit
(start of the chain + prefix sums of durations give every member's times). A chain member that
another chain waits for ends a *segment*; the engine keeps (S, B) segment end offsets, never
(N, B), unless node times are asked for. :func:`compile_plan` finds chains and cuts the
condensed DAG into topological levels once per structure; :func:`run_chains` evaluates it one
level at a time with numpy, every quantity a (B,) vector over the batch. A single design point
is a batch of one.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, NamedTuple, NoReturn

import numpy as np
from numpy.typing import NDArray

from simcore.engine._chains import chains as _chains
from simcore.engine._chains import predecessors as _predecessors
from simcore.engine._steps import _MAX_PAD, Step
from simcore.errors import InputError
from simcore.ir.dag import depths, find_cycle, levelize
from simcore.ir.graph import Graph

__all__ = ["ChainTimes", "LevelTimes", "NodeLevel", "SchedulePlan", "ScheduleResult", "SegmentTable",
           "TableTimes", "compile_plan", "plan_from_chains", "run_chains", "run_schedule"]

IntArray = NDArray[np.int64]
FloatArray = NDArray[np.float64]


class _Level(NamedTuple):
    chains: IntArray  # (k,) chains at this depth
    pred_segs: IntArray  # (e,) segments (in other chains) those chains wait for
    seg: IntArray  # (k,) offsets of each chain's predecessors within ``pred_segs``
    pred_chains: IntArray  # (e,) chain of each of those segments
    single: bool  # every chain of the level waits for exactly one segment


_LOCK = threading.Lock()
#: schedule workspaces kept between batches by all segment tables of the process together,
#: the least recently used dropped first: a wide span of a large graph takes ~200 MiB
#: (GPT-3 TP8 PP8 ZeRO-3), and a process caches up to 32 compiled structures (simcore.api)
_WORKSPACES_MAX_BYTES = 512 * 2**20
_KEPT_LOCK = threading.Lock()
_KEPT: OrderedDict[tuple[int, tuple[int, int]], tuple[weakref.ref[SegmentTable], int]] = \
    OrderedDict()


def _keep_workspace(table: SegmentTable, key: tuple[int, int], nbytes: int) -> None:
    """Count ``table``'s new workspace ``key`` among the kept ones (most recent last), then
    drop the least recently used of any table while they exceed :data:`_WORKSPACES_MAX_BYTES`
    (the newest is always kept: a caller is about to use it)."""
    with _KEPT_LOCK:
        _KEPT[(id(table), key)] = (weakref.ref(table), nbytes)
        for k in [k for k, (ref, _) in _KEPT.items() if ref() is None]:
            del _KEPT[k]  # tables collected with their compiled structure
        total = sum(n for _, n in _KEPT.values())
        while total > _WORKSPACES_MAX_BYTES and len(_KEPT) > 1:
            (_, old_key), (ref, n) = _KEPT.popitem(last=False)
            owner = ref()
            if owner is not None:
                owner._work.pop(old_key, None)
            total -= n


def _touch_workspace(table: SegmentTable, key: tuple[int, int]) -> None:
    """Mark ``table``'s workspace ``key`` most recently used."""
    with _KEPT_LOCK:
        with_key = (id(table), key)
        if with_key in _KEPT:
            _KEPT.move_to_end(with_key)


def _forget_workspaces(table: SegmentTable) -> None:
    """Stop counting the workspaces ``table`` drops."""
    with _KEPT_LOCK:
        for key in list(table._work):
            _KEPT.pop((id(table), key), None)


@dataclass(frozen=True, eq=False)
class NodeLevel:
    """Node-level part of a plan: the graph and where its nodes sit in chains and segments."""

    graph: Graph
    order: IntArray  # (N,) nodes sorted by chain, then position in the chain
    chain_of: IntArray  # (N,) chain of every node
    seg_ptr: IntArray  # (S+1,) segment boundaries into ``order``


@dataclass(frozen=True, eq=False)
class SchedulePlan:
    """A graph compiled for scheduling: chains, segments and topological levels of chains.

    Attributes:
        nodes: the node-level part (:class:`NodeLevel`: graph, ``order``, ``chain_of``,
            ``seg_ptr``, also as properties), or a function building it on first use.
        seg_chain: (S,) chain of each segment.
        chain_seg_ptr: (C+1,) first segment of each chain.
        schedule: the condensed DAG with its depths (:class:`LevelSchedule`); its levels and
            steps are compiled on first use (a single design point is scheduled without them).
    """

    nodes: NodeLevel | Callable[[], NodeLevel]
    seg_chain: IntArray
    chain_seg_ptr: IntArray
    schedule: LevelSchedule
    _work: dict[tuple[int, int], tuple[FloatArray, list[tuple[Any, ...]]]] = field(
        default_factory=dict, repr=False)

    @property
    def levels(self) -> tuple[_Level, ...]:
        """Chains grouped by depth in the condensed DAG."""
        return self.schedule.compiled()[0]

    @property
    def steps(self) -> tuple[Step, ...]:
        """The levels compiled for :func:`run_chains` (chains renumbered in level order)."""
        return self.schedule.compiled()[1]

    @property
    def level_pos(self) -> IntArray:
        """(C,) position of every chain in level order."""
        return self.schedule.compiled()[2]

    def node_level(self) -> NodeLevel:
        """The node-level part (built on first use for a plan compiled from a condensed graph)."""
        nodes = self.nodes
        if not isinstance(nodes, NodeLevel):
            with _LOCK:
                nodes = self.nodes
                if not isinstance(nodes, NodeLevel):
                    nodes = nodes()
                    object.__setattr__(self, "nodes", nodes)
        return nodes

    @property
    def graph(self) -> Graph:
        """The source graph."""
        return self.node_level().graph

    @property
    def order(self) -> IntArray:
        """(N,) nodes sorted by chain, then position in the chain."""
        return self.node_level().order

    @property
    def chain_of(self) -> IntArray:
        """(N,) chain index of every node."""
        return self.node_level().chain_of

    @property
    def seg_ptr(self) -> IntArray:
        """(S+1,) segment boundaries into ``order``."""
        return self.node_level().seg_ptr

    def workspace(self, b: int) -> tuple[FloatArray, list[tuple[Any, ...]]]:
        """Reused (C + S, B) buffer, the chain starts (rows in level order) above the segment
        ends, and the per-level operations on views of it and of a (2E, B) gather buffer, for
        a batch of ``b`` (per thread; fresh pages are expensive, so repeated batches reuse
        them; root rows stay 0). A level gathers its predecessors' starts and segment ends
        with one ``take`` from the joint buffer."""
        key = (threading.get_ident(), b)
        work = self._work.get(key)
        if work is None:
            work = _level_program(self.steps, self.num_chains, self.num_segments, None, b)
            if len(self._work) >= 8:
                self._work.clear()
            self._work[key] = work
        return work

    @cached_property
    def end_chains(self) -> IntArray:
        """Chains whose last segment no other chain waits for: the latest finish is among
        them (a waited-for chain ends before its waiter starts)."""
        waited = np.zeros(self.num_segments, dtype=bool)
        waited[self.schedule.pred_seg] = True  # the segments the levels' steps gather
        return np.flatnonzero(~waited[self.chain_seg_ptr[1:] - 1]).astype(np.int64)

    def makespan(self, times: ChainTimes) -> FloatArray:
        """(B,) :attr:`ChainTimes.makespan` of ``times`` read from :attr:`end_chains` only."""
        ends = self.end_chains
        if ends.size == 0:
            return times.makespan
        finish = times.chain_start.take(ends, axis=0)
        finish += times.chain_dur.take(ends, axis=0)
        return np.asarray(finish.max(axis=0))

    @property
    def num_levels(self) -> int:
        """Depth of the condensed DAG (number of sequential numpy steps per batch)."""
        return self.schedule.num_levels

    @property
    def num_chains(self) -> int:
        """Chains C after collapsing."""
        return int(self.chain_seg_ptr.shape[0] - 1)

    @property
    def num_segments(self) -> int:
        """Segments S (chain pieces that end at a node another chain waits for)."""
        return int(self.seg_chain.shape[0])


@dataclass(frozen=True, eq=False)
class ChainTimes:
    """Chain-level schedule of a batch.

    Attributes:
        chain_start: (C, B) start time of each chain.
        chain_dur: (C, B) total duration of each chain.
        seg_end: (S, B) end of each segment, relative to its chain's start.
    """

    chain_start: FloatArray
    chain_dur: FloatArray
    seg_end: FloatArray

    @property
    def chain_finish(self) -> FloatArray:
        """(C, B) finish time of each chain."""
        return self.chain_start + self.chain_dur

    @property
    def makespan(self) -> FloatArray:
        """(B,) finish time of the last chain."""
        if self.chain_start.shape[0] == 0:
            return np.zeros(self.chain_start.shape[1])
        return np.asarray(self.chain_finish.max(axis=0))


@dataclass(frozen=True, eq=False)
class ScheduleResult:
    """Start and finish times of every node, per design point.

    Attributes:
        start: (N, B) start time of each node, in the duration unit.
        finish: (N, B) finish time of each node.
    """

    start: FloatArray
    finish: FloatArray

    @property
    def makespan(self) -> FloatArray:
        """(B,) finish time of the last node."""
        if self.finish.shape[0] == 0:
            return np.zeros(self.finish.shape[1])
        return np.asarray(self.finish.max(axis=0))


def compile_plan(graph: Graph) -> SchedulePlan:
    """Compile ``graph`` for :func:`run_schedule` / :func:`run_chains`.

    Raises:
        InputError: the dependencies (with resource issue order) contain a cycle; the message
            names the node ids on it.
    """
    n = graph.num_nodes
    ptr, idx = _predecessors(graph)
    chained = _chains(graph, ptr, idx)
    if chained is None:
        _raise_cycle(graph, ptr, idx)
        raise AssertionError("unreachable")
    head, pos = chained
    order = np.lexsort((pos, head)).astype(np.int64)
    heads, chain_of = np.unique(head, return_inverse=True)
    chain_of = chain_of.astype(np.int64)
    c = heads.shape[0]
    # segment ends: chain tails and nodes some other chain waits for
    dst = np.repeat(np.arange(n, dtype=np.int64), np.diff(ptr))
    external = chain_of[idx] != chain_of[dst]
    is_end = np.zeros(n, dtype=bool)
    is_end[idx[external]] = True
    last_in_chain = np.ones(n, dtype=bool)
    if n:
        last_in_chain[order[:-1]] = chain_of[order[:-1]] != chain_of[order[1:]]
    is_end |= last_in_chain
    ends_sorted = is_end[order]
    seg_of_sorted = np.concatenate([[0], np.cumsum(ends_sorted)[:-1]]).astype(np.int64)
    s = int(ends_sorted.sum())
    seg_ptr = np.zeros(s + 1, dtype=np.int64)
    seg_ptr[1:] = np.flatnonzero(ends_sorted) + 1
    seg_of = np.empty(n, dtype=np.int64)
    seg_of[order] = seg_of_sorted
    seg_chain = chain_of[order[seg_ptr[:-1]]] if s else np.zeros(0, dtype=np.int64)
    chain_seg_ptr = np.zeros(c + 1, dtype=np.int64)
    np.cumsum(np.bincount(seg_chain, minlength=c), out=chain_seg_ptr[1:])
    # condensed DAG: chain -> segments of other chains its head waits for
    head_preds_ptr = ptr[heads]
    counts = ptr[heads + 1] - head_preds_ptr
    cptr = np.zeros(c + 1, dtype=np.int64)
    np.cumsum(counts, out=cptr[1:])
    gather = np.repeat(head_preds_ptr - cptr[:-1], counts) + np.arange(cptr[-1], dtype=np.int64)
    pred_nodes = idx[gather]
    sched = LevelSchedule.of(cptr, seg_of[pred_nodes], seg_chain, c)
    if sched is None:
        _raise_cycle(graph, ptr, idx)
        raise AssertionError("unreachable")
    return SchedulePlan(nodes=NodeLevel(graph, order, chain_of, seg_ptr),
                        seg_chain=seg_chain, chain_seg_ptr=chain_seg_ptr, schedule=sched)


def compile_levels(cptr: IntArray, pred_seg: IntArray, seg_chain: IntArray, c: int
                   ) -> tuple[list[_Level], tuple[Step, ...], IntArray] | None:
    """Levels of the condensed DAG and their compiled steps (:func:`compile_steps`), with a
    constant number of numpy calls for all levels together (plus slicing per level); equal to
    :func:`levels_by_peel` followed by :func:`compile_steps`. None if the DAG has a cycle.

    Args:
        cptr: (C+1,) offsets: chain ``i`` waits for segments ``pred_seg[cptr[i]:cptr[i+1]]``.
        pred_seg: predecessor segments (per chain by ascending predecessor node).
        seg_chain: (S,) chain of every segment.
        c: chains C.
    """
    pred_chain = seg_chain[pred_seg] if pred_seg.size else pred_seg
    depth = depths(cptr, pred_chain, c)
    if depth is None:
        return None
    return _compile_levels_at(cptr, pred_seg, pred_chain, depth, c)


def _compile_levels_at(cptr: IntArray, pred_seg: IntArray, pred_chain: IntArray,
                       depth: IntArray, c: int
                       ) -> tuple[list[_Level], tuple[Step, ...], IntArray]:
    """:func:`compile_levels` given the chains' depths (``pred_chain``: chain of each
    ``pred_seg``)."""
    i64 = np.int64
    if c == 0:
        return [], (), np.zeros(0, dtype=i64)
    perm = np.argsort(depth, kind="stable").astype(i64)  # level order, chains ascending
    pos = np.empty(c, dtype=i64)
    pos[perm] = np.arange(c, dtype=i64)
    sizes = np.bincount(depth)
    lo = np.zeros(sizes.size + 1, dtype=i64)
    np.cumsum(sizes, out=lo[1:])
    kp = (cptr[1:] - cptr[:-1])[perm]
    gptr = np.zeros(c + 1, dtype=i64)
    np.cumsum(kp, out=gptr[1:])
    gather = np.repeat(cptr[perm] - gptr[:-1], kp) + np.arange(gptr[-1], dtype=i64)
    p_all = pred_seg[gather]
    pc_all = pred_chain[gather]
    ppos_all = pos[pc_all]
    nl = sizes.size
    n_l = gptr[lo[1:]] - gptr[lo[:-1]]  # predecessors per level
    k_l = np.maximum.reduceat(kp, lo[:-1])
    uniform = (n_l > 0) & (sizes * k_l <= _MAX_PAD * n_l)
    # uniform levels: block j of chain i = its j-th predecessor (or its first one)
    ul = np.flatnonzero(uniform)
    ku = k_l[ul]
    lp = np.repeat(ul, ku)
    jp = np.arange(lp.size, dtype=i64) - np.repeat(np.cumsum(ku) - ku, ku)
    mp = sizes[lp]
    le = np.repeat(lp, mp)
    je = np.repeat(jp, mp)
    q = lo[le] + np.arange(le.size, dtype=i64) - np.repeat(np.cumsum(mp) - mp, mp)
    rows = gptr[q] + np.minimum(je, kp[q] - 1)
    u_segs, u_chains = p_all[rows], ppos_all[rows]
    u_off = np.zeros(nl + 1, dtype=i64)
    u_off[ul + 1] = ku * sizes[ul]
    np.cumsum(u_off, out=u_off)
    levels, steps = [], []
    lo_l, k_list, unif = lo.tolist(), k_l.tolist(), uniform.tolist()
    g_lo = gptr[lo]
    g_l, uo = g_lo.tolist(), u_off.tolist()
    seg_all = gptr[:-1] - np.repeat(g_lo[:-1], sizes)  # offsets within each level, all at once
    for lv in range(nl):
        a, b = lo_l[lv], lo_l[lv + 1]
        ga, gb = g_l[lv], g_l[lv + 1]
        segs = p_all[ga:gb]
        seg = seg_all[a:b]
        levels.append(_Level(perm[a:b], segs, seg, pc_all[ga:gb], gb - ga == b - a))
        if gb == ga:
            steps.append(Step(a, b, -1, segs, segs, seg))
        elif unif[lv]:
            u0, u1 = uo[lv], uo[lv + 1]
            steps.append(Step(a, b, k_list[lv], u_chains[u0:u1], u_segs[u0:u1], seg))
        else:
            steps.append(Step(a, b, 0, ppos_all[ga:gb], segs, seg))
    return levels, tuple(steps), pos


class LevelSchedule:
    """A condensed DAG: chain ``i`` waits for segments ``pred_seg[cptr[i]:cptr[i+1]]``
    (``pred_chain``: their chains). The longest-path depth of every chain and the levels and
    steps of :func:`compile_levels` are computed on first use: a single design point is
    scheduled without them (:func:`chain_starts_one`). Shared between plans with the same DAG
    (:func:`level_schedule_cached`) and only read.

    Attributes:
        on_cycle: called when the DAG turns out to have a cycle (raises the error naming it);
            None: a cycle is reported by :meth:`of` returning None.
        recurring: set when another plan found this DAG in the cache: its single points are
            then scheduled on the compiled levels too (compiled once, reused by every plan).
        min_levels: a lower bound on the number of levels (0: none known): the most chains
            of one stream (each chain waits for the one before it on its stream).
    """

    def __init__(self, cptr: IntArray, pred_seg: IntArray, pred_chain: IntArray, c: int,
                 depth: IntArray | None = None,
                 on_cycle: Callable[[], None] | None = None) -> None:
        self.cptr, self.pred_seg, self.pred_chain, self.c = cptr, pred_seg, pred_chain, c
        self.on_cycle = on_cycle
        self.recurring = False  # another plan has the same DAG (its levels pay off)
        self.min_levels = 0  # a lower bound on the depth known without computing it
        self._depth = depth
        self._compiled: tuple[tuple[_Level, ...], tuple[Step, ...], IntArray] | None = None

    @classmethod
    def of(cls, cptr: IntArray, pred_seg: IntArray, seg_chain: IntArray, c: int,
           on_cycle: Callable[[], None] | None = None) -> LevelSchedule | None:
        """The schedule of a condensed DAG (``seg_chain``: chain of every segment). Without
        ``on_cycle`` the depths are computed now and a cycle gives None; with it they wait
        for first use, which calls ``on_cycle`` on a cycle."""
        pred_chain = seg_chain[pred_seg] if pred_seg.size else pred_seg
        if on_cycle is not None:
            return cls(cptr, pred_seg, pred_chain, c, on_cycle=on_cycle)
        depth = depths(cptr, pred_chain, c)
        if depth is None:
            return None
        return cls(cptr, pred_seg, pred_chain, c, depth)

    def cycle(self) -> NoReturn:
        """Report the DAG's cycle (``on_cycle``, else a generic error)."""
        if self.on_cycle is not None:
            self.on_cycle()
        raise InputError("graph", "cycle", "dependencies and stream order must be acyclic")

    @property
    def depth(self) -> IntArray:
        """(C,) longest-path depth of every chain."""
        d = self._depth
        if d is None:
            d = depths(self.cptr, self.pred_chain, self.c)
            if d is None:
                self.cycle()
            self._depth = d
        return d

    @property
    def num_levels(self) -> int:
        """Depth of the DAG (levels)."""
        return int(self.depth.max()) + 1 if self.c else 0

    @property
    def is_compiled(self) -> bool:
        """Whether the levels and steps exist already."""
        return self._compiled is not None

    def compiled(self) -> tuple[tuple[_Level, ...], tuple[Step, ...], IntArray]:
        """(levels, steps, level_pos) of :func:`compile_levels`, compiled once."""
        got = self._compiled
        if got is None:
            depth = self.depth
            with _LEVELS_LOCK:
                got = self._compiled
                if got is None:
                    levels, steps, pos = _compile_levels_at(self.cptr, self.pred_seg,
                                                            self.pred_chain, depth, self.c)
                    got = self._compiled = (tuple(levels), steps, pos)
        return got


def chain_starts_one(sched: LevelSchedule, seg_end: list[float]) -> list[float]:
    """Chain starts of one design point (``seg_end``: each segment's end relative to its
    chain's start): start = max over the chain's predecessors of (predecessor chain's start +
    segment end), roots at 0. One Kahn peel (Kahn 1962) pushes every finished chain's
    (start + segment end) to the chains waiting for it; max is exact and Python floats are
    IEEE doubles, so every start equals the level loop's bit for bit (inputs without NaN:
    ``>`` and ``np.maximum`` differ only there). Raises the DAG's cycle error if it has one."""
    c = sched.c
    counts = np.diff(sched.cptr)
    pc = sched.pred_chain
    by_pred = np.argsort(pc, kind="stable")
    sp = np.zeros(c + 1, dtype=np.int64)
    np.cumsum(np.bincount(pc, minlength=c), out=sp[1:])
    succ = np.repeat(np.arange(c, dtype=np.int64), counts)[by_pred].tolist()
    succ_seg = sched.pred_seg[by_pred].tolist()
    ptr = sp.tolist()
    pending = counts.tolist()
    start = np.where(counts > 0, -np.inf, 0.0).tolist()  # waiting chains: the max of their preds
    order = np.flatnonzero(counts == 0).tolist()
    push = order.append
    for i in order:  # grows while it runs
        si = start[i]
        for k in range(ptr[i], ptr[i + 1]):
            j = succ[k]
            t = si + seg_end[succ_seg[k]]
            if t > start[j]:
                start[j] = t
            left = pending[j] - 1
            pending[j] = left
            if not left:
                push(j)
    if len(order) != c:
        sched.cycle()
    return start


# above this many chains the condensed DAGs measured (bench_structures, 530B with 35 stages:
# ~100 predecessors per level) schedule one point faster on their levels (numpy per level)
# than by the Python peel (per edge)
_ONE_POINT_MAX_CHAINS = 25_000
# ... unless the DAG is narrow: fewer edges than this per level (``min_levels``) make the
# levels' per-level Python (compiling ~4 us, the program ~7 us, the run ~2 us per level) cost
# more than the peel's ~0.4 us per edge. GPT-3 175B tp8 pp8 with TP overlap: 482,007 chains,
# 1,058,044 edges, 48,042 levels (37,629 chains on one stream: 28 edges per bound level),
# the levels 0.62 s after the depths against the peel's 0.37 s; with cp 2: 32 edges per
# bound level; 530B at pp 35: 136 (the levels win there)
_ONE_POINT_MAX_EDGES_PER_LEVEL = 40

_LEVELS_CACHE: OrderedDict[tuple[int, bytes, bytes, bytes], LevelSchedule] = OrderedDict()
_LEVELS_CACHE_SIZE = 32
_LEVELS_LOCK = threading.Lock()


def level_schedule_cached(cptr: IntArray, pred_seg: IntArray, seg_chain: IntArray, c: int,
                          on_cycle: Callable[[], None] | None = None) -> LevelSchedule | None:
    """:meth:`LevelSchedule.of`, reused for a condensed DAG equal to one seen before (the key
    is the input arrays' bytes: equal inputs, the same depths, levels and steps). Plans that
    change only what runs inside the chains (recompute, sequence parallelism, ZeRO 0/1, layer
    shapes) share their DAG. None for a cycle found now (not cached)."""
    key = (c, np.ascontiguousarray(cptr, dtype=np.int64).tobytes(),
           np.ascontiguousarray(pred_seg, dtype=np.int64).tobytes(),
           np.ascontiguousarray(seg_chain, dtype=np.int64).tobytes())
    with _LEVELS_LOCK:
        hit = _LEVELS_CACHE.get(key)
        if hit is not None:
            _LEVELS_CACHE.move_to_end(key)
            hit.recurring = True
            return hit
    sched = LevelSchedule.of(cptr, pred_seg, seg_chain, c, on_cycle)
    if sched is not None:
        with _LEVELS_LOCK:
            _LEVELS_CACHE[key] = sched
            while len(_LEVELS_CACHE) > _LEVELS_CACHE_SIZE:
                _LEVELS_CACHE.popitem(last=False)
    return sched


def compile_levels_cached(cptr: IntArray, pred_seg: IntArray, seg_chain: IntArray, c: int
                          ) -> tuple[tuple[_Level, ...], tuple[Step, ...], IntArray] | None:
    """:func:`compile_levels` of the cached :func:`level_schedule_cached` (equal DAGs: the
    same objects)."""
    sched = level_schedule_cached(cptr, pred_seg, seg_chain, c)
    return None if sched is None else sched.compiled()


def levels_by_peel(cptr: IntArray, pred_seg: IntArray, seg_chain: IntArray, c: int
                   ) -> list[_Level] | None:
    """Topological levels of the condensed DAG by the numpy peel (:func:`levelize`), one level
    at a time (the reference of :func:`compile_levels`); None if it has a cycle."""
    pred_chain = seg_chain[pred_seg] if pred_seg.size else pred_seg
    levels_raw = levelize(cptr, pred_chain, c)
    if levels_raw is None:
        return None
    levels = []
    for chains in levels_raw:
        k = cptr[chains + 1] - cptr[chains]
        seg = np.zeros(chains.size, dtype=np.int64)
        np.cumsum(k[:-1], out=seg[1:])
        g = np.repeat(cptr[chains] - seg, k) + np.arange(k.sum(), dtype=np.int64)
        pred_segs = pred_seg[g]
        levels.append(_Level(chains=chains, pred_segs=pred_segs, seg=seg,
                             pred_chains=seg_chain[pred_segs] if seg_chain.size else pred_segs,
                             single=bool(pred_segs.size == chains.size)))
    return levels


@dataclass(frozen=True)
class _NamesCycle:
    """Raises the error naming a cycle of the node graph ``nodes`` builds (picklable)."""

    nodes: Callable[[], NodeLevel]

    def __call__(self) -> None:
        compile_plan(self.nodes().graph)


def plan_from_chains(cptr: IntArray, pred_seg: IntArray, seg_chain: IntArray,
                     chain_seg_ptr: IntArray, nodes: Callable[[], NodeLevel],
                     chain_stream: IntArray | None = None) -> SchedulePlan:
    """A plan from an already condensed graph (:class:`simcore.ir.runs.CondensedGraph`): chain
    ``i`` waits for segments ``pred_seg[cptr[i]:cptr[i+1]]``; ``nodes`` builds the node-level
    part on first use. Equal to :func:`compile_plan` of the node graph with the same chains.
    ``chain_stream`` (each chain's stream) bounds the depth from below
    (:attr:`LevelSchedule.min_levels`).

    The DAG is checked for cycles on first use (scheduling it, its depths or levels), which
    then raises an InputError naming the cycle's nodes.
    """
    c = int(chain_seg_ptr.shape[0] - 1)
    sched = level_schedule_cached(cptr, pred_seg, seg_chain, c, _NamesCycle(nodes))
    assert sched is not None  # a cycle is reported on first use
    if chain_stream is not None and chain_stream.size:
        sched.min_levels = max(sched.min_levels, int(np.bincount(chain_stream).max()))
    return SchedulePlan(nodes=nodes, seg_chain=seg_chain, chain_seg_ptr=chain_seg_ptr,
                        schedule=sched)


def _raise_cycle(graph: Graph, ptr: IntArray, idx: IntArray) -> None:
    cycle = find_cycle(ptr, idx, graph.num_nodes)
    ids = " -> ".join(str(int(graph.node_ids[i])) for i in cycle[:12])
    raise InputError("graph", f"cycle {ids}", "dependencies and stream order must be acyclic")


def _level_program(steps: tuple[Step, ...], c: int, below: int, seg_row: IntArray | None,
                   b: int) -> tuple[FloatArray, list[tuple[Any, ...]]]:
    """A (C + ``below``, B) buffer (chain starts in level order, then segment-end rows; root
    rows stay 0) and the per-level operations of :func:`_run_program` on views of it and of a
    (2E, B) gather buffer: a level gathers its predecessors' starts and segment ends with one
    ``take`` from the joint buffer. Segment ``s``'s end is row ``c + seg_row[s]`` (``c + s``
    with ``seg_row`` None)."""
    live = [st for st in steps if st.k >= 0]
    sizes = [st.pred_segs.size for st in live]
    e = max([*sizes, 1])
    joint = np.zeros((c + below, b))
    gather = np.empty((2 * e, b))
    prog: list[tuple[Any, ...]] = []
    # every level's gather rows [its pred chains, c + its pred segments' rows], built at once
    both_all = np.concatenate([x for st in live for x in (
        st.pred_chains, st.pred_segs if seg_row is None else seg_row[st.pred_segs])]
        or [np.zeros(0, dtype=np.int64)])
    both_all += np.repeat(np.tile(np.array([0, c], dtype=np.int64), len(live)),
                          np.repeat(np.asarray(sizes, dtype=np.int64), 2))
    o = 0
    for st, n in zip(live, sizes, strict=True):
        m, k = st.hi - st.lo, st.k
        blocks = [gather[j * m:(j + 1) * m] for j in range(max(k, 1))]
        prog.append((k, both_all[o:o + 2 * n], joint[st.lo:st.hi], gather[:n],
                     gather[n:2 * n], gather[:2 * n], blocks, st.seg))
        o += 2 * n
    return joint, prog


def _run_program(joint: FloatArray, prog: list[tuple[Any, ...]]) -> None:
    """The level loop: each level's chain starts = max over its predecessors of (their
    chain's start + their segment end), written in place into ``joint``.

    The gathers use ``mode="clip"``: the rows are in range by construction, and numpy
    buffers the output of a ``take`` into ``out`` in its default ``raise`` mode (an extra
    copy that took ~40% of the loop)."""
    take, add, maximum, reduceat = joint.take, np.add, np.maximum, np.maximum.reduceat
    for k, both, rows, ta, tb, tab, blocks, seg in prog:
        take(both, 0, tab, "clip")
        if k == 1:
            add(ta, tb, rows)
        elif k > 1:
            add(ta, tb, ta)
            maximum(blocks[0], blocks[1], out=rows)
            for blk in blocks[2:]:
                maximum(rows, blk, out=rows)
        else:
            add(ta, tb, ta)
            reduceat(ta, seg, 0, None, rows)


def _segmented_cumsum(values: FloatArray, group_ptr: IntArray) -> FloatArray:
    """Cumulative sums along axis 0 restarting at every ``group_ptr`` boundary."""
    cs = np.cumsum(values, axis=0)
    if cs.shape[0] == 0:
        return cs
    base = np.zeros((group_ptr.shape[0] - 1, cs.shape[1]))
    starts = group_ptr[:-1]
    nz = starts > 0
    base[nz] = cs[starts[nz] - 1]
    sizes = np.diff(group_ptr)
    return np.asarray(cs - np.repeat(base, sizes, axis=0))


def _segmented_cumsum_into(values: FloatArray, group_ptr: IntArray, out: FloatArray) -> None:
    """:func:`_segmented_cumsum` written into ``out`` (the same floats: the running sum of all
    rows, less the running sum before each group that does not start at row 0), without its
    (rows, B) temporaries."""
    np.cumsum(values, axis=0, out=out)
    starts = group_ptr[:-1]
    first = int(np.searchsorted(starts, 0, side="right"))  # groups from row 0 keep their sums
    if first < starts.size:
        before = np.repeat(starts[first:] - 1, np.diff(group_ptr)[first:])
        out[int(starts[first]):] -= out[before]


def _segment_ends(plan: SchedulePlan, seg_dur: FloatArray, overwrite: bool = False
                  ) -> FloatArray:
    """(S, B) end of each segment relative to its chain's start; cumulative sums are taken
    only over the chains that have more than one segment (in ``seg_dur`` itself when
    ``overwrite``)."""
    counts = np.diff(plan.chain_seg_ptr)
    multi = np.flatnonzero(counts > 1)
    if multi.size == 0:
        return seg_dur
    rows = np.flatnonzero(np.repeat(counts > 1, counts))  # segments are ordered by chain
    sub_ptr = np.zeros(multi.size + 1, dtype=np.int64)
    np.cumsum(counts[multi], out=sub_ptr[1:])
    out = seg_dur if overwrite else seg_dur.copy()
    out[rows] = _segmented_cumsum(seg_dur[rows], sub_ptr)
    return out


@dataclass(frozen=True, eq=False)
class LevelTimes:
    """Chain-level schedule of a batch with the starts left in level order, as the level loop
    writes them: rows are read on demand instead of permuting the whole (C, B) array.

    ``start_by_level`` is the plan's reused workspace buffer, valid until the next run of the
    same plan with the same batch width on the same thread: read what you need first.
    """

    start_by_level: FloatArray
    level_pos: IntArray
    chain_dur: FloatArray
    seg_end: FloatArray

    def start_rows(self, rows: IntArray) -> FloatArray:
        """(len(rows), B) start time of the chains ``rows`` (a fresh array)."""
        return np.asarray(self.start_by_level.take(self.level_pos.take(rows), axis=0))

    def dur_rows(self, rows: IntArray) -> FloatArray:
        """(len(rows), B) duration of the chains ``rows`` (a fresh array)."""
        return np.asarray(self.chain_dur.take(rows, axis=0))

    def makespan(self, plan: SchedulePlan) -> FloatArray:
        """(B,) finish time of the last chain, read from the plan's :attr:`end_chains`."""
        return _makespan(self, plan, self.start_by_level.shape[1])


@dataclass(frozen=True, eq=False)
class TableTimes:
    """:class:`LevelTimes` of :meth:`SegmentTable.run`: starts in level order, and chain
    durations read from the segment-end table (no (C, B) or (S, B) array is built).

    Both arrays are views of the table's reused workspace, valid until the next run of the
    same table with the same batch width on the same thread: read what you need first.
    """

    start_by_level: FloatArray
    level_pos: IntArray
    ends: FloatArray  # (R + M, B) segment-end table
    chain_row: IntArray  # (C,) row of ``ends`` holding each chain's duration

    def start_rows(self, rows: IntArray) -> FloatArray:
        """(len(rows), B) start time of the chains ``rows`` (a fresh array; indexing, not
        ``take``, which copies a column slice whole first)."""
        return np.asarray(self.start_by_level[self.level_pos.take(rows)])

    def dur_rows(self, rows: IntArray) -> FloatArray:
        """(len(rows), B) duration of the chains ``rows`` (a fresh array)."""
        return np.asarray(self.ends[self.chain_row.take(rows)])

    def columns(self, lo: int, hi: int) -> TableTimes:
        """The times of the batch columns ``lo:hi`` (views of the same workspace)."""
        return TableTimes(start_by_level=self.start_by_level[:, lo:hi],
                          level_pos=self.level_pos, ends=self.ends[:, lo:hi],
                          chain_row=self.chain_row)

    def makespan(self, plan: SchedulePlan) -> FloatArray:
        """(B,) finish time of the last chain, read from the plan's :attr:`end_chains`."""
        return _makespan(self, plan, self.ends.shape[1])


def _makespan(times: LevelTimes | TableTimes, plan: SchedulePlan, b: int) -> FloatArray:
    ends = plan.end_chains
    if ends.size == 0:
        ends = np.arange(plan.num_chains)
    if ends.size == 0:
        return np.zeros(b)
    finish = times.start_rows(ends)
    finish += times.dur_rows(ends)
    return np.asarray(finish.max(axis=0))


@dataclass(frozen=True, eq=False)
class SegmentTable:
    """Segment ends of a plan whose segment durations are the rows of a small (R, B) table
    (``row_of[s]``: the row of segment ``s``; a training iteration repeats a few segment
    shapes thousands of times).

    A chain of one segment ends its segment at that segment's duration, so only the M
    segments of multi-segment chains need their own end rows (their running sums,
    computed exactly as :func:`run_chains_by_level` does); the level loop gathers every
    other segment end from the R table rows. The schedule is the same floating-point
    operations on the same values as :func:`run_chains_by_level` on the (S, B) durations
    ``table[row_of]``, without building that array.
    """

    plan: SchedulePlan
    num_rows: int  # R
    seg_row: IntArray  # (S,) row of each segment's end in the (R + M) end table
    multi_src: IntArray  # (M,) table row of each segment of a multi-segment chain, in order
    multi_ptr: IntArray  # (K+1,) boundaries of those K chains among the M segments
    chain_row: IntArray  # (C,) end-table row of each chain's last segment: its duration
    _work: dict[tuple[int, int], tuple[FloatArray, list[tuple[Any, ...]]]] = field(
        default_factory=dict, repr=False)

    @classmethod
    def build(cls, plan: SchedulePlan, row_of: IntArray, num_rows: int) -> SegmentTable:
        """The table of ``plan`` for segment ``s`` of duration row ``row_of[s]`` of R."""
        counts = np.diff(plan.chain_seg_ptr)
        in_multi = np.repeat(counts > 1, counts)  # segments are ordered by chain
        multi = np.flatnonzero(in_multi)
        seg_row = np.asarray(row_of, dtype=np.int64).copy()
        seg_row[multi] = num_rows + np.arange(multi.size, dtype=np.int64)
        multi_ptr = np.zeros(int((counts > 1).sum()) + 1, dtype=np.int64)
        np.cumsum(counts[counts > 1], out=multi_ptr[1:])
        return cls(plan=plan, num_rows=num_rows, seg_row=seg_row,
                   multi_src=np.asarray(row_of, dtype=np.int64)[multi], multi_ptr=multi_ptr,
                   chain_row=seg_row[plan.chain_seg_ptr[1:] - 1])

    def workspace(self, b: int) -> tuple[FloatArray, list[tuple[Any, ...]]]:
        """Reused (C + R + M, B) buffer (chain starts in level order, the R duration rows, the
        M running sums) and the level operations on it, per thread and batch width."""
        key = (threading.get_ident(), b)
        work = self._work.get(key)
        if work is not None:
            _touch_workspace(self, key)
            return work
        work = _level_program(self.plan.steps, self.plan.num_chains,
                              self.num_rows + self.multi_src.size, self.seg_row, b)
        if len(self._work) >= 8:
            _forget_workspaces(self)
            self._work.clear()
        self._work[key] = work
        _keep_workspace(self, key, work[0].nbytes)
        return work

    def rows_buffer(self, b: int) -> FloatArray:
        """The (R, B) rows of the workspace that :meth:`run` reads the durations from: write
        them here (valid until the next run with the same B on this thread)."""
        joint, _ = self.workspace(b)
        c = self.plan.num_chains
        return joint[c:c + self.num_rows]

    def run(self, b: int, column_tiles: list[tuple[int, int]] | None = None) -> TableTimes:
        """Schedule the batch of width ``b`` whose (R, B) duration rows were written into
        :meth:`rows_buffer`; the running sums of multi-segment chains are taken per column
        tile ``(lo, hi)`` of ``column_tiles`` (default: all columns at once; columns are
        summed alone, so the tiles only keep the arrays in cache)."""
        joint, prog = self.workspace(b)
        c, r = self.plan.num_chains, self.num_rows
        ends = joint[c:]
        if self.multi_src.size:
            for lo, hi in column_tiles or [(0, b)]:
                _segmented_cumsum_into(ends[:r, lo:hi][self.multi_src], self.multi_ptr,
                                       ends[r:, lo:hi])
        if c:
            _run_program(joint, prog)
        return TableTimes(start_by_level=joint[:c], level_pos=self.plan.level_pos, ends=ends,
                          chain_row=self.chain_row)


def segment_buffer(plan: SchedulePlan, b: int) -> FloatArray:
    """The (S, B) rows of the plan's reused workspace that hold the segment ends: segment
    durations written here and passed to :func:`run_chains_by_level` with ``overwrite`` are
    not copied (valid until the next run of the plan with the same B on this thread)."""
    joint, _ = plan.workspace(b)
    return joint[plan.num_chains:]


def run_chains_by_level(plan: SchedulePlan, seg_dur: FloatArray, overwrite: bool = False
                        ) -> LevelTimes:
    """Schedule a batch given the (S, B) duration of every segment; starts in level order.
    With ``overwrite`` the segment ends are accumulated in ``seg_dur`` itself (a float64
    array the caller gives up; :func:`segment_buffer` avoids one copy)."""
    seg_end = _segment_ends(plan, np.asarray(seg_dur, dtype=np.float64), overwrite)
    c = plan.num_chains
    b = seg_end.shape[1]
    if c == 0:
        return LevelTimes(start_by_level=np.zeros((0, b)), level_pos=plan.level_pos,
                          chain_dur=np.zeros((0, b)), seg_end=seg_end)
    chain_dur = seg_end[plan.chain_seg_ptr[1:] - 1]
    sched = plan.schedule
    narrow = sched.pred_seg.size < _ONE_POINT_MAX_EDGES_PER_LEVEL * sched.min_levels
    if (b == 1 and not (sched.is_compiled or sched.recurring)
            and (c <= _ONE_POINT_MAX_CHAINS or narrow) and not np.isnan(seg_end).any()):
        # one point of a DAG seen once and never batched: chain by chain (no depths, levels
        # or workspace); a DAG that recurs (other plans share it) compiles its levels once
        starts = chain_starts_one(plan.schedule, seg_end[:, 0].tolist())
        return LevelTimes(start_by_level=np.asarray(starts, dtype=np.float64).reshape(c, 1),
                          level_pos=np.arange(c, dtype=np.int64), chain_dur=chain_dur,
                          seg_end=seg_end)
    joint, prog = plan.workspace(b)
    start = joint[:c]
    below = joint[c:]
    if not (seg_end.ctypes.data == below.ctypes.data and seg_end.shape == below.shape
            and seg_end.strides == below.strides):  # else written in place (segment_buffer)
        below[...] = seg_end
    _run_program(joint, prog)
    return LevelTimes(start_by_level=start, level_pos=plan.level_pos, chain_dur=chain_dur,
                      seg_end=seg_end)


def run_chains(plan: SchedulePlan, seg_dur: FloatArray) -> ChainTimes:
    """Schedule a batch given the (S, B) duration of every segment."""
    lt = run_chains_by_level(plan, seg_dur)
    if plan.num_chains == 0:
        return ChainTimes(chain_start=lt.start_by_level, chain_dur=lt.chain_dur,
                          seg_end=lt.seg_end)
    return ChainTimes(chain_start=lt.start_by_level.take(lt.level_pos, axis=0),
                      chain_dur=lt.chain_dur, seg_end=lt.seg_end)


def run_schedule(plan: SchedulePlan, durations: FloatArray) -> ScheduleResult:
    """Schedule every design point of a batch, returning per-node times.

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
    if n == 0:
        return ScheduleResult(start=dur.copy(), finish=dur.copy())
    sorted_dur = dur[plan.order]
    seg_dur = np.add.reduceat(sorted_dur, plan.seg_ptr[:-1], axis=0)
    times = run_chains(plan, seg_dur)
    chain_ptr = plan.seg_ptr[plan.chain_seg_ptr]
    within = _segmented_cumsum(sorted_dur, chain_ptr)
    finish = np.empty_like(dur)
    finish[plan.order] = times.chain_start[plan.chain_of[plan.order]] + within
    return ScheduleResult(start=finish - dur, finish=finish)
