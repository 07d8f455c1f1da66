"""A condensed workload graph, built directly as chains of runs instead of one object per node.

The engine collapses a graph into *chains* (DESIGN.md, "The vectorized engine";
:mod:`simcore.engine._chains`): a node whose only predecessor is the node issued before it on
its single in-order stream continues that node's chain; chains are cut into *segments* at the
nodes another chain waits for. A training iteration has ~1e5 nodes but a few thousand chains,
and a generator knows while it emits where a chain continues: a run of ops on one stream whose
first op may wait for other nodes and whose other ops wait for nothing else.

:class:`RunBuilder` records those runs (a *unit* of templates repeated ``repeat`` times) and
single nodes with the node rules of :class:`simcore.ir.graph.GraphBuilder` (issue order = call
order, node ids = insertion index unless given, dependencies may name later nodes) and the chain
rule of :func:`simcore.engine._chains.chains`, so :meth:`RunBuilder.build` yields the same
chains, segments, template counts and condensed DAG as compiling the node graph, numbered the
same way (chains by head index, segments by chain then position), without materialising nodes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sps
from numpy.typing import NDArray

from simcore.errors import InputError
from simcore.ir.graph import Graph
from simcore.ir.intsets import unique_sorted
from simcore.ir.streams import Stream, StreamKind

__all__ = ["Condensed", "CondensedGraph", "RunBuilder"]

IntArray = NDArray[np.int64]
FloatArray = NDArray[np.float64]


@dataclass(frozen=True, eq=False)
class CondensedGraph:
    """Chains and segments of a workload graph (what :func:`compile_plan` derives from nodes).

    Attributes:
        num_nodes: nodes N of the equivalent node graph.
        seg_counts: (S, U) template occurrences per segment (CSR, canonical).
        seg_chain: (S,) chain of each segment; segments ordered by chain, then position.
        seg_stage: (S,) ``stage`` attribute of each segment's first node.
        chain_seg_ptr: (C+1,) first segment of each chain.
        pred_ptr: (C+1,) CSR offsets of each chain head's predecessors.
        pred_seg: (E,) segment of each predecessor (by ascending predecessor node index).
        chain_stream: (C,) resource id of each chain's first node (its first resource).
        chain_first_template: (C,) template of each chain's first node.
        streams: typed stream of every resource id.
        resource_counts: (R, U) template occurrences of the nodes whose first resource is ``r``.
        stage_other_counts: (P', U) template occurrences of the nodes off compute streams, by
            ``stage`` attribute (rows up to the largest stage seen).
    """

    num_nodes: int
    seg_counts: sps.csr_matrix
    seg_chain: IntArray
    seg_stage: IntArray
    chain_seg_ptr: IntArray
    pred_ptr: IntArray
    pred_seg: IntArray
    chain_stream: IntArray
    chain_first_template: IntArray
    streams: tuple[Stream, ...]
    resource_counts: FloatArray
    stage_other_counts: FloatArray

    @property
    def num_chains(self) -> int:
        """Chains C."""
        return int(self.chain_seg_ptr.shape[0] - 1)


class RunBuilder:
    """Accumulates runs and single nodes in issue order; :meth:`build` condenses them.

    Example:
        >>> b = RunBuilder(num_templates=2)
        >>> u = b.unit((0, 1))
        >>> s = b.stream(Stream.compute(0))
        >>> last = b.run(s, u, repeat=3, deps=(), stage=0)  # 6 nodes, one chain
    """

    def __init__(self, num_templates: int = 0, source: str = "graph") -> None:
        self._source = source
        self.num_templates = num_templates
        self._stream_ids: dict[Stream, int] = {}
        self.streams: list[Stream] = []
        self._units: dict[tuple[int, ...], int] = {}
        self.unit_templates: list[tuple[int, ...]] = []
        self._unit_len: list[int] = []
        self._n = 0
        self._last: list[int] = []  # per resource: index of its last node (-1: none)
        self._last_id: list[int] = []  # ... and that node's id
        self._chain: list[int] = []  # ... and the chain it continues (-1: not continuable)
        self._explicit: dict[int, int] = {}  # explicit node id -> index
        self._single: dict[int, int] = {}  # template -> unit of that one op
        # pieces: (chain, unit, repeat, last node index, stage attr, resource)
        self._pieces: list[tuple[int, int, int, int, int, int]] = []
        self._c_res: list[int] = []
        self._c_unit: list[int] = []
        self._edges: list[tuple[int, int]] = []  # (chain, node id its head waits for)
        self._piece_blocks: list[IntArray] = []  # pieces and edges issued by :meth:`runs`
        self._edge_blocks: list[IntArray] = []

    def __len__(self) -> int:
        return self._n

    def stream(self, stream: Stream) -> int:
        """Resource id of a typed stream (created on first use)."""
        rid = self._stream_ids.get(stream)
        if rid is None:
            rid = len(self.streams)
            self._stream_ids[stream] = rid
            self.streams.append(stream)
            self._last.append(-1)
            self._last_id.append(-1)
            self._chain.append(-1)
        return rid

    def unit(self, templates: Sequence[int]) -> int:
        """Id of the op sequence ``templates`` (interned)."""
        key = tuple(int(t) for t in templates)
        uid = self._units.get(key)
        if uid is None:
            if not key:
                raise InputError(f"{self._source}: unit", key, "a run needs at least one op")
            uid = len(self.unit_templates)
            self._units[key] = uid
            self.unit_templates.append(key)
            self._unit_len.append(len(key))
            self.num_templates = max(self.num_templates, max(key) + 1)
        return uid

    def single_unit(self, template: int) -> int:
        """Id of the unit of the one op ``template``."""
        unit = self._single.get(template)
        if unit is None:
            unit = self._single[template] = self.unit((template,))
        return unit

    def last_id(self, res: int) -> int | None:
        """Id of the last op issued on resource ``res`` (None: none yet)."""
        return self._last_id[res] if self._last[res] >= 0 else None

    def _head(self, res: int, unit: int, deps: Iterable[int], extra: Iterable[int]) -> int:
        """A new chain headed by the next op; duplicate edges are dropped in :meth:`build`."""
        c = len(self._c_res)
        self._c_res.append(res)
        self._c_unit.append(unit)
        edges = self._edges
        for d in deps:
            edges.append((c, d))
        for d in extra:
            edges.append((c, d))
        return c

    def run(self, res: int, unit: int, repeat: int, deps: Sequence[int], stage: int,
            node_id: int | None = None) -> int:
        """Issue ``repeat`` x unit ``unit`` on resource ``res``; the first op also waits for
        ``deps``. Returns the id of the last op (``node_id`` if given: a run of one op)."""
        last_id = self._last_id[res]
        chain = self._chain[res]
        head = chain < 0
        if not head:
            for d in deps:
                if d != last_id:
                    head = True
                    break
        if head:
            chain = self._head(res, unit, deps, (last_id,) if self._last[res] >= 0 else ())
        end = self._n + self._unit_len[unit] * repeat - 1
        self._pieces.append((chain, unit, repeat, end, stage, res))
        self._n = end + 1
        nid = end
        if node_id is not None:
            if self._unit_len[unit] * repeat != 1 or node_id in self._explicit:
                raise InputError(f"{self._source}: node id", node_id,
                                 "explicit ids name single, unique nodes")
            self._explicit[node_id] = end
            nid = node_id
        self._last[res] = end
        self._last_id[res] = nid
        self._chain[res] = chain
        return nid

    def node(self, resources: Sequence[int], template: int, deps: Sequence[int], stage: int,
             node_id: int | None = None) -> int:
        """Issue one op; on several resources it heads its own chain and no op continues it."""
        unit = self.single_unit(template)
        if len(resources) == 1:
            return self.run(resources[0], unit, 1, deps, stage, node_id)
        prev = [self._last_id[r] for r in resources if self._last[r] >= 0]
        chain = self._head(resources[0], unit, deps, prev)
        end = self._n
        self._pieces.append((chain, unit, 1, end, stage, resources[0]))
        self._n += 1
        nid = end if node_id is None else node_id
        if node_id is not None:
            self._explicit[node_id] = end
        for r in resources:
            self._last[r], self._last_id[r], self._chain[r] = end, nid, -1
        return nid

    def runs(self, res: IntArray, unit: IntArray, repeat: IntArray, dep: IntArray,
             dep_ref: IntArray, node_id: IntArray, stage: int | IntArray,
             extra: tuple[IntArray, IntArray, IntArray] | None = None) -> IntArray:
        """Issue k single-resource runs at once, as k calls of :meth:`run` would, with numpy.

        Args:
            res, unit, repeat: (k,) resource, unit and repeat count of each run.
            dep: (k,) the id the run's first op waits for, -1 for none.
            dep_ref: (k,) index of an earlier run of the batch whose last op the run waits for
                instead (-1: ``dep``).
            node_id: (k,) explicit id of a one-op run, -1 for none.
            stage: ``stage`` attribute of every op, or (k,) of each run's ops.
            extra: more dependencies of the runs' first ops, as (row, ref, id) arrays: run
                ``row`` also waits for the last op of the earlier run ``ref`` (>= 0) or else
                for the op ``id``.

        Returns:
            (k,) the id of each run's last op.
        """
        k = int(res.size)
        if k == 0:
            return np.zeros(0, dtype=np.int64)
        i64 = np.int64
        lens = np.asarray(self._unit_len, dtype=i64)[unit] * repeat
        ends = self._n - 1 + np.cumsum(lens)
        ids = np.where(node_id >= 0, node_id, ends)
        if (dep_ref >= np.arange(k)).any():
            raise InputError(f"{self._source}: runs", "dep_ref", "must name an earlier run")
        dep = np.where(dep_ref >= 0, ids[dep_ref], dep)
        order = np.argsort(res, kind="stable")
        rs = res[order]
        same = rs[1:] == rs[:-1]
        prev_in = np.full(k, -1, dtype=i64)
        prev_in[order[1:][same]] = order[:-1][same]
        inside = prev_in >= 0
        s_last = np.asarray(self._last, dtype=i64)[res]
        s_last_id = np.asarray(self._last_id, dtype=i64)[res]
        s_chain = np.asarray(self._chain, dtype=i64)[res]
        prev_id = np.where(inside, ids[np.maximum(prev_in, 0)], s_last_id)
        has_prev = inside | (s_last >= 0)
        head = ~(inside | (s_chain >= 0)) | ((dep >= 0) & (dep != prev_id))
        if extra is not None:
            x_row, x_ref, x_id = extra
            if (x_ref >= x_row).any():
                raise InputError(f"{self._source}: runs", "extra", "must name an earlier run")
            x_dep = np.where(x_ref >= 0, ids[x_ref], x_id)
            head[x_row[x_dep != prev_id[x_row]]] = True
        c0 = len(self._c_res)
        new_chain = c0 - 1 + np.cumsum(head)
        # a run that continues takes the chain of the last head before it on its stream
        first = np.ones(k, dtype=bool)
        first[1:] = ~same
        mark = (head[order] | first)
        val = np.where(head[order], new_chain[order], s_chain[order])
        src = np.maximum.accumulate(np.where(mark, np.arange(k), 0))
        chain = np.empty(k, dtype=i64)
        chain[order] = val[src]
        hs = np.flatnonzero(head)
        self._c_res.extend(res[hs].tolist())
        self._c_unit.extend(unit[hs].tolist())
        e1 = hs[dep[hs] >= 0]
        e2 = hs[has_prev[hs]]
        blocks = [np.stack([chain[e1], dep[e1]], axis=1),
                  np.stack([chain[e2], prev_id[e2]], axis=1)]
        if extra is not None:
            e3 = head[x_row]
            blocks.append(np.stack([chain[x_row[e3]], x_dep[e3]], axis=1))
        self._edge_blocks.append(np.concatenate(blocks))
        self._piece_blocks.append(np.stack(
            [chain, unit, repeat, ends, np.broadcast_to(np.asarray(stage, dtype=i64), (k,)), res],
            axis=1))
        named = np.flatnonzero(node_id >= 0)
        if named.size:
            if (lens[named] != 1).any():
                raise InputError(f"{self._source}: node id", int(node_id[named[0]]),
                                 "explicit ids name single, unique nodes")
            before = len(self._explicit)
            self._explicit.update(zip(node_id[named].tolist(), ends[named].tolist(),
                                      strict=True))
            if len(self._explicit) != before + named.size:
                raise InputError(f"{self._source}: node id", "duplicate",
                                 "explicit ids name single, unique nodes")
        lasts = order[np.append(~same, True)]
        for i in lasts.tolist():
            r = int(res[i])
            self._last[r], self._last_id[r], self._chain[r] = int(ends[i]), int(ids[i]), int(chain[i])
        self._n = int(ends[-1]) + 1
        return ids

    # --- condensation ---------------------------------------------------------------------------
    def build(self) -> CondensedGraph:
        """Chains, segments, template counts and the condensed DAG.

        Raises:
            InputError: a dependency names a missing node.
        """
        i64 = np.int64
        pieces = np.concatenate([np.array(self._pieces, dtype=i64).reshape(-1, 6),
                                 *self._piece_blocks])
        p_chain, p_unit, p_end = pieces[:, 0], pieces[:, 1], pieces[:, 3]
        p_stage, p_res = pieces[:, 4], pieces[:, 5]
        p_rep = pieces[:, 2].astype(np.float64)
        c = len(self._c_res)
        # predecessor node ids -> node indices
        edges = np.concatenate([np.array(self._edges, dtype=i64).reshape(-1, 2),
                                *self._edge_blocks])
        e_chain, ids = edges[:, 0], edges[:, 1]
        keys = np.fromiter(self._explicit.keys(), dtype=i64, count=len(self._explicit))
        vals = np.fromiter(self._explicit.values(), dtype=i64, count=len(self._explicit))
        by_key = np.argsort(keys)
        keys, vals = keys[by_key], vals[by_key]
        e_idx = ids.copy()
        if keys.size:  # only ids from the smallest explicit one up can name one
            big = np.flatnonzero(ids >= keys[0])
            at = np.minimum(np.searchsorted(keys, ids[big]), keys.size - 1)
            hit = keys[at] == ids[big]
            e_idx[big[hit]] = vals[at[hit]]
        # the piece ending at each dependency (runs end at distinct nodes): its rank among the
        # sorted piece ends, which orders dependencies as their node indices do
        by_end = np.argsort(p_end)
        ends_sorted = p_end[by_end]
        rank = np.searchsorted(ends_sorted, e_idx)
        bad = (rank >= ends_sorted.size) | (e_idx < 0)
        bad[~bad] = ends_sorted[rank[~bad]] != e_idx[~bad]
        if bad.any():
            j = int(np.flatnonzero(bad)[0])
            raise InputError(f"{self._source}: dependency", int(ids[j]),
                             "every dependency must name a node of the same graph (a run's end)")
        e_piece = by_end[rank]
        # segments: pieces sorted by chain then position, cut after referenced pieces
        order = np.lexsort((p_end, p_chain))
        referenced = np.zeros(p_end.size, dtype=bool)
        referenced[e_piece] = True
        sc = p_chain[order]
        last = np.ones(order.size, dtype=bool)
        last[:-1] = sc[:-1] != sc[1:]
        is_end = referenced[order] | last
        seg_sorted = np.zeros(order.size, dtype=i64)
        np.cumsum(is_end[:-1], out=seg_sorted[1:])
        s = int(is_end.sum())
        seg_of_piece = np.empty(order.size, dtype=i64)
        seg_of_piece[order] = seg_sorted
        first = np.ones(order.size, dtype=bool)
        first[1:] = is_end[:-1]
        seg_chain = sc[first]
        seg_stage = p_stage[order][first]
        chain_seg_ptr = np.zeros(c + 1, dtype=i64)
        np.cumsum(np.bincount(seg_chain, minlength=c), out=chain_seg_ptr[1:])
        # condensed DAG: per chain, predecessors by ascending node index
        n_p = max(p_end.size, 1)
        key = unique_sorted(e_chain * n_p + rank)
        k_chain, k_rank = key // n_p, key % n_p
        pred_ptr = np.zeros(c + 1, dtype=i64)
        np.cumsum(np.bincount(k_chain, minlength=c), out=pred_ptr[1:])
        pred_seg = seg_of_piece[by_end[k_rank]]
        # template counts per piece = repeat x unit counts
        u = self.num_templates
        ut = self.unit_templates
        lens = np.fromiter((len(t) for t in ut), dtype=i64, count=len(ut))
        u_ptr = np.zeros(len(ut) + 1, dtype=i64)
        np.cumsum(lens, out=u_ptr[1:])
        u_t = np.fromiter((x for t in ut for x in t), dtype=i64, count=int(u_ptr[-1]))
        # (units, U) template counts of each unit: a piece adds repeat x its unit's row, so the
        # counts are (pieces summed per unit) @ unit_counts, never expanded per template; the
        # entries are whole numbers (exact in any order of summation, also in the products)
        nu = len(ut)
        unit_counts = np.zeros((nu, u))
        np.add.at(unit_counts, (np.repeat(np.arange(nu, dtype=i64), lens), u_t), 1.0)
        per_unit = sps.csr_matrix((p_rep, (seg_of_piece, p_unit)), shape=(s, nu))
        seg_counts = sps.csr_matrix(per_unit @ sps.csr_matrix(unit_counts))
        seg_counts.sum_duplicates()
        seg_counts.sort_indices()
        r = len(self.streams)
        res_unit = np.bincount(p_res * nu + p_unit, weights=p_rep, minlength=r * nu)
        resource_counts = np.asarray(res_unit.reshape(r, nu) @ unit_counts, dtype=np.float64)
        kinds = np.array([int(st.kind) for st in self.streams], dtype=i64)
        off = kinds[p_res] != StreamKind.COMPUTE
        n_st = int(p_stage.max(initial=-1)) + 1
        stage_unit = np.bincount(p_stage[off] * nu + p_unit[off], weights=p_rep[off],
                                 minlength=n_st * nu)
        other = np.asarray(stage_unit.reshape(n_st, nu) @ unit_counts, dtype=np.float64)
        c_unit = np.asarray(self._c_unit, dtype=i64)
        return CondensedGraph(
            num_nodes=self._n, seg_counts=seg_counts, seg_chain=seg_chain, seg_stage=seg_stage,
            chain_seg_ptr=chain_seg_ptr, pred_ptr=pred_ptr, pred_seg=pred_seg,
            chain_stream=np.asarray(self._c_res, dtype=i64),
            chain_first_template=u_t[u_ptr[c_unit]] if c else np.zeros(0, dtype=i64),
            streams=tuple(self.streams), resource_counts=resource_counts,
            stage_other_counts=other)


@dataclass(frozen=True, eq=False)
class Condensed:
    """A workload graph's condensed form, valid for the graph object ``graph`` only (a
    transformed copy of the workload, e.g. another fidelity's streams, is compiled from nodes)."""

    graph: Graph
    chains: CondensedGraph
