"""Evaluate a compiled workload (any family) on a batch of systems.

Per structure (cached, :class:`CompiledWorkload`): the graph, its schedule plan, the sparse
(S, U) matrix of template counts per segment, and per stage the chain sets the breakdown reads.
Per batch: kernel durations (K, B) from the cost models (one vectorized call per kernel
family), template durations (U, B) = W @ kernels, segment durations (S, B) = counts @ templates,
then the level-by-level schedule (:func:`~simcore.engine.schedule.run_chains`) and the
breakdown (:mod:`~simcore.engine.breakdown`). Closed-form pipelined blocks
(:mod:`simcore.ir.blocks`) add per-stage seconds to the segments holding their exposed ops.
No per-point Python code runs: a single point is a batch of one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np
import scipy.sparse as sps
from numpy.typing import NDArray

from simcore.engine.breakdown import exposed_on_padded
from simcore.engine.result import COMM_KINDS
from simcore.engine.schedule import (
    LevelTimes,
    NodeLevel,
    SchedulePlan,
    SegmentTable,
    TableTimes,
    compile_plan,
    plan_from_chains,
    run_chains_by_level,
)
from simcore.hardware import SystemBatch, attention_time_s, gemm_time_s, memory_bound_time_s
from simcore.ir.blocks import PipelinedBlock, block_exposed_s
from simcore.ir.graph import Graph
from simcore.ir.ops import COMPUTE, OpTable
from simcore.ir.runs import CondensedGraph
from simcore.ir.streams import CommKind, StreamKind
from simcore.network.collectives.calibrated_algorithms import algorithm_collective_time_s
from simcore.network.collectives.nccl import p2p_time_s
from simcore.workloads._base import Workload

__all__ = ["CompiledWorkload", "StageBreakdown", "blocks_exposed", "compile_workload",
           "compute_scale", "evaluate_times", "kernel_durations", "node_durations",
           "template_durations"]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]


@dataclass(frozen=True, eq=False)
class CompiledWorkload:
    """A workload ready to be costed for any batch of systems of its structure."""

    workload: Workload
    plan: SchedulePlan
    seg_counts: sps.csr_matrix  # (S, U)
    stage_counts: FloatArray  # (P, U) template counts on each stage's compute stream
    compute_chains: tuple[IntArray, ...]  # per stage: chains on its compute stream
    comm_chains: tuple[dict[str, IntArray], ...]  # per stage: kind -> chains on other streams
    template_kind: IntArray  # (U,)
    seg_stage: IntArray  # (S,) pipeline stage of each segment
    overlap_counts: FloatArray  # (P, U) comm templates of a stage that may overlap its compute
    # mixed device pools (simcore.engine.devices.compile_on_pools): stage of each template and
    # (P, D) ranks of each stage on each pool; None on one device type
    template_stage: IntArray | None = None
    stage_pools: IntArray | None = None
    # (P,) stages whose tensor-parallel groups span pools (work split by tensor-shard ratios)
    stage_tp_split: NDArray[np.bool_] | None = None
    # closed-form pipelined blocks (simcore.ir.blocks): the seconds of their exposed ops are
    # computed per stage and point after the compute scale
    blocks: tuple[PipelinedBlock, ...] = ()

    @property
    def ops(self) -> OpTable:
        """Kernels and templates of the workload."""
        return self.workload.ops

    @cached_property
    def distinct_segments(self) -> tuple[sps.csr_matrix, IntArray, IntArray]:
        """(R, U) distinct rows of ``seg_counts`` per stage (a training iteration repeats a
        few segment shapes thousands of times), (R,) their stage, (S,) the row of each
        segment: segment durations are computed once per distinct row and gathered."""
        dense = np.column_stack([self.seg_stage.astype(np.float64), self.seg_counts.toarray()])
        rows, inverse = np.unique(dense, axis=0, return_inverse=True)
        return (sps.csr_matrix(rows[:, 1:]), rows[:, 0].astype(np.int64),
                inverse.reshape(-1).astype(np.int64))

    @cached_property
    def segment_table(self) -> SegmentTable:
        """The plan's segment ends over the :attr:`distinct_segments` rows (no (S, B) array)."""
        rows, _, row_of = self.distinct_segments
        return SegmentTable.build(self.plan, row_of, rows.shape[0])


def compile_workload(workload: Workload) -> CompiledWorkload:
    """Compile the schedule plan and the per-stage index sets of ``workload``.

    Streams are read from their typed attributes (:mod:`simcore.ir.streams`): a stage's
    compute stream, its other streams (communication of a kind), and the pipeline links it
    sends or receives on. Closed-form pipelined blocks (:mod:`simcore.ir.blocks`) keep their
    communication pieces among the stage's overlappable communication (they run beside its
    compute pieces), once per occurrence of the block's exposed op on its compute stream.
    """
    cw = _compile_graph(workload)
    if not workload.pipelined_blocks:
        return cw
    overlap = cw.overlap_counts.copy()
    for block in workload.pipelined_blocks:
        occurrences = cw.stage_counts[:, block.exposed_template]
        for piece in block.pieces:
            if not piece.on_compute:
                overlap[:, piece.template] += occurrences * piece.fraction
    return replace(cw, overlap_counts=overlap, blocks=workload.pipelined_blocks)


def _compile_graph(workload: Workload) -> CompiledWorkload:
    """:func:`compile_workload` of the graph as generated."""
    condensed = getattr(workload, "condensed", None)
    if condensed is not None and condensed.graph is workload.graph:
        return _compile_condensed(workload, condensed.chains, _NodeLevelOf(workload.graph))
    graph = workload.graph
    plan = compile_plan(graph)
    tmpl = graph.attr("template").astype(np.int64)
    u = len(workload.ops.templates)
    kind_of_t = np.asarray(workload.ops.template_kind, dtype=np.int64)
    seg_of_sorted = np.repeat(np.arange(plan.num_segments), np.diff(plan.seg_ptr))
    seg_counts = sps.csr_matrix(
        (np.ones(graph.num_nodes), (seg_of_sorted, tmpl[plan.order])),
        shape=(plan.num_segments, u),
    )
    chain_first = plan.order[plan.seg_ptr[plan.chain_seg_ptr[:-1]]]
    res_first = graph.res_idx[graph.res_ptr[chain_first]]
    skind, sstage, speer = graph.stream_kind, graph.stream_stage, graph.stream_peer
    chain_kind = kind_of_t[tmpl[chain_first]]
    p = workload.num_stages
    stage_counts = np.zeros((p, u))
    node_res = graph.res_idx[graph.res_ptr[:-1]]
    node_stage_compute = np.where(skind == StreamKind.COMPUTE, sstage, -1)
    on_compute = node_stage_compute[node_res]
    mask = on_compute >= 0
    np.add.at(stage_counts, (on_compute[mask], tmpl[mask]), 1.0)
    # communication off the compute stream, attributed to the stage that issues it; DP traffic
    # only overlaps compute when dp_overlap (else it runs after the pipeline flush)
    node_stage = graph.attr("stage").astype(np.int64)
    off = ~mask
    overlap_counts = np.zeros((p, u))
    np.add.at(overlap_counts, (node_stage[off], tmpl[off]), 1.0)
    if not workload.dp_overlap:
        overlap_counts[:, kind_of_t == CommKind.DP] = 0.0
    compute_chains, comm_chains = _stage_chains(p, skind[res_first], sstage[res_first],
                                                speer[res_first], chain_kind)
    seg_stage = graph.attr("stage").astype(np.int64)[plan.order[plan.seg_ptr[:-1]]]
    return CompiledWorkload(workload=workload, plan=plan, seg_counts=seg_counts,
                            seg_stage=seg_stage, overlap_counts=overlap_counts,
                            stage_counts=stage_counts, compute_chains=tuple(compute_chains),
                            comm_chains=tuple(comm_chains), template_kind=kind_of_t)


@dataclass(frozen=True)
class _NodeLevelOf:
    """The node level of ``graph``'s plan, built on call (picklable, unlike a closure)."""

    graph: Graph

    def __call__(self) -> NodeLevel:
        return compile_plan(self.graph).node_level()


def _stage_chains(p: int, skind: IntArray, sstage: IntArray, speer: IntArray,
                  chain_kind: IntArray) -> tuple[list[IntArray], list[dict[str, IntArray]]]:
    """Per stage: chains on its compute stream; kind -> chains on its other streams (links:
    sent or received), in chain order, kinds in the order of their first chain.
    ``skind``/``sstage``/``speer``: of each chain's stream. Grouped with one sort each (by
    stage; by stage, kind and chain), not a pass per stage."""
    i64 = np.int64
    chains = np.arange(skind.size, dtype=i64)
    own = (skind != StreamKind.COMPUTE) & (skind != StreamKind.LINK) & (skind != StreamKind.OTHER)
    link = skind == StreamKind.LINK
    code = np.where(link, int(CommKind.PP), chain_kind)
    comp = chains[(skind == StreamKind.COMPUTE) & (sstage >= 0) & (sstage < p)]
    comp = comp[np.argsort(sstage[comp], kind="stable")]
    bounds = np.searchsorted(sstage[comp], np.arange(p + 1, dtype=i64)).tolist()
    compute_chains = [comp[bounds[s]:bounds[s + 1]] for s in range(p)]
    # a link's chain belongs to its sender's and its receiver's stage
    peer = chains[link & (speer != sstage)]
    ch = np.concatenate([chains[own | link], peer])
    st = np.concatenate([sstage[own | link], speer[peer]])
    keep = (st >= 0) & (st < p)
    ch, st = ch[keep], st[keep]
    cd = code[ch]
    o = np.lexsort((ch, cd, st))
    ch, st, cd = ch[o], st[o], cd[o]
    new = np.ones(ch.size, dtype=bool)
    new[1:] = (st[1:] != st[:-1]) | (cd[1:] != cd[:-1])
    g_lo = np.flatnonzero(new)
    g_hi = np.append(g_lo[1:], ch.size)
    g_order = np.lexsort((ch[g_lo], st[g_lo]))  # per stage, kinds by their first chain
    comm_chains: list[dict[str, IntArray]] = [{} for _ in range(p)]
    for s, k, lo, hi in zip(st[g_lo][g_order].tolist(), cd[g_lo][g_order].tolist(),
                            g_lo[g_order].tolist(), g_hi[g_order].tolist(), strict=True):
        comm_chains[s][COMM_KINDS[k]] = ch[lo:hi]
    return compute_chains, comm_chains


def _compile_condensed(workload: Workload, cg: CondensedGraph,
                       node_level: Callable[[], NodeLevel]) -> CompiledWorkload:
    """:func:`compile_workload` from a graph built condensed (:mod:`simcore.ir.runs`): the same
    arrays, numbered the same way, without a node-level pass (built on first use)."""
    plan = plan_from_chains(cg.pred_ptr, cg.pred_seg, cg.seg_chain, cg.chain_seg_ptr, node_level,
                            cg.chain_stream)
    u = len(workload.ops.templates)
    kind_of_t = np.asarray(workload.ops.template_kind, dtype=np.int64)
    p = workload.num_stages
    skind = np.array([int(st.kind) for st in cg.streams], dtype=np.int64)
    sstage = np.array([st.stage for st in cg.streams], dtype=np.int64)
    speer = np.array([st.peer for st in cg.streams], dtype=np.int64)
    stage_counts = np.zeros((p, u))
    for r in np.flatnonzero(skind == StreamKind.COMPUTE).tolist():
        stage_counts[sstage[r]] += cg.resource_counts[r, :u]
    overlap_counts = np.zeros((p, u))
    rows = min(p, cg.stage_other_counts.shape[0])
    overlap_counts[:rows] = cg.stage_other_counts[:rows, :u]
    if not workload.dp_overlap:
        overlap_counts[:, kind_of_t == CommKind.DP] = 0.0
    seg_counts = cg.seg_counts
    if seg_counts.shape[1] != u:
        seg_counts = sps.csr_matrix((seg_counts.data, seg_counts.indices, seg_counts.indptr),
                                    shape=(seg_counts.shape[0], u))
    cs = cg.chain_stream
    compute_chains, comm_chains = _stage_chains(p, skind[cs], sstage[cs], speer[cs],
                                                kind_of_t[cg.chain_first_template])
    return CompiledWorkload(workload=workload, plan=plan, seg_counts=seg_counts,
                            seg_stage=cg.seg_stage, overlap_counts=overlap_counts,
                            stage_counts=stage_counts, compute_chains=tuple(compute_chains),
                            comm_chains=tuple(comm_chains), template_kind=kind_of_t)


def kernel_durations(ops: OpTable, sb: SystemBatch, precision: str) -> FloatArray:
    """(K, B) seconds of every kernel of ``ops`` on the systems of ``sb``."""
    out = np.zeros((len(ops.kernels), sb.size))
    idx, a = ops.kernel_args("gemm")
    if idx.size:
        out[idx] = gemm_time_s(sb, a[:, 0], a[:, 1], a[:, 2], precision)
    idx, a = ops.kernel_args("attn")
    if idx.size:
        out[idx] = attention_time_s(sb, a[:, 0], a[:, 1], a[:, 2], a[:, 3], True, precision)
    idx, a = ops.kernel_args("mem")
    if idx.size:
        out[idx] = memory_bound_time_s(sb, a[:, 0])
    idx, a = ops.kernel_args("coll")
    if idx.size:
        out[idx] = algorithm_collective_time_s(sb, a[:, 0], a[:, 1], a[:, 2], a[:, 3])
    idx, a = ops.kernel_args("p2p")
    if idx.size:
        out[idx] = p2p_time_s(sb, a[:, 0], a[:, 1] > 0)
    return out


def template_durations(cw: CompiledWorkload, sb: SystemBatch, precision: str) -> FloatArray:
    """(U, B) seconds of every template."""
    return np.asarray(cw.ops.weights() @ kernel_durations(cw.ops, sb, precision))


@dataclass(frozen=True, eq=False)
class StageBreakdown:
    """(B,) metrics of the bottleneck stage and the iteration time."""

    iteration_time_s: FloatArray
    compute_s: FloatArray
    exposed_by_kind: dict[str, FloatArray]
    bubble_s: FloatArray


#: a bubble at most this fraction of the iteration is the subtraction's rounding, not idle time
_BUBBLE_RESIDUE = 1e-12
_DISTINCT_MIN_B = 32  # batches from this size find the distinct segment rows (once per structure)
_TILE_BYTES = 4 * 2**20  # working set per batch tile (reused buffers; best of 2-64 MiB on GPT-3)
# a deep schedule pays one Python call per level and tile: tiles of at least this many points
# (GPT-3 ZeRO-3 / 530B at pp 35 / vp 2 at pp 16: 2.4-4.4x the points per CPU second of 11-25
# point tiles, scripts/bench_tiles.py) while a tile's arrays stay under _TILE_MAX_BYTES each
_TILE_MIN_POINTS = 96
_TILE_MAX_BYTES = 64 * 2**20
# tiles scheduled at once (a span) while the schedule's workspace stays under this: GPT-3 /
# Llama ZeRO-3 plans have ~5,000 levels, each one Python call per span (GPT-3 TP8 PP8 ZeRO-3:
# 47,600 chains, 6 tiles of 94 points per span). A plan of fewer levels than
# _SPAN_WIDE_MIN_LEVELS saves less per tile than a wide workspace costs: a sweep's guided
# batches come in ~20 widths, each a new workspace, and one above glibc's mmap threshold (32 MiB
# in a worker, search.run.workers.keep_heap) is fresh pages every time. The 112,896-point
# GPT-3 TP8 PP8 grid in guided batches in one process: ZeRO-1 (163 levels) 1.2 s of system
# time at 256 MiB, 0.05 s at 16 MiB, and 17% more CPU; ZeRO-2 (1,272 levels) the same rate
# at either (3,739 / 3,781 points per CPU second) with a peak RSS of 724 / 279 MiB; ZeRO-3
# (4,946 levels) 3,660 against 2,849 at 16 MiB. Spans of a plan of fewer levels stay under
# _SPAN_NARROW_BYTES
_SPAN_MAX_BYTES = 256 * 2**20
_SPAN_WIDE_MIN_LEVELS = 2000
_SPAN_NARROW_BYTES = 16 * 2**20


def evaluate_times(cw: CompiledWorkload, tdur: FloatArray,
                   overlap_slowdown: FloatArray | None = None) -> StageBreakdown:
    """Schedule the batch with template durations ``tdur`` (U, B) and break the time down.

    Args:
        cw: the compiled workload.
        tdur: (U, B) seconds per template.
        overlap_slowdown: (B,) or per stage (P, B) fractional slowdown of compute while
            communication runs beside it (Echo §3.4, calib's ``overlap_slowdown - 1``; per stage
            on mixed device pools: :func:`simcore.engine.devices.stage_overlap_slowdown`): each
            stage's compute is stretched
            by ``slowdown x overlapped / compute``, the overlapped time being the stage's
            overlappable communication (off its compute stream; DP only with dp_overlap),
            capped at its compute.

    The batch is processed in column tiles so every intermediate array stays small. Tiles
    whose schedule runs on the distinct segment rows are scheduled several at once (a *span*,
    :func:`_evaluate_span`): the level loop pays one Python call per level and span instead of
    per level and tile (a ZeRO-2 / ZeRO-3 plan has thousands of levels), while every BLAS
    product and the breakdown still run per tile on the same columns as before, so the numbers
    do not depend on the span (the schedule and the sparse products treat columns alone).
    """
    b = tdur.shape[1]
    tile = _tile_points(cw, b)
    blocks = None  # closed-form blocks: their per-step loop once per batch, not per tile
    if cw.blocks and tile < b:
        blocks = blocks_exposed(cw, tdur, compute_scale(cw, tdur, overlap_slowdown)[1])
    parts = []
    for tiles in _spans(cw, b, tile):
        parts += _evaluate_span(cw, tdur, overlap_slowdown, blocks, tiles)
    if len(parts) == 1:
        return parts[0]
    return StageBreakdown(
        iteration_time_s=np.concatenate([p.iteration_time_s for p in parts]),
        compute_s=np.concatenate([p.compute_s for p in parts]),
        exposed_by_kind={k: np.concatenate([p.exposed_by_kind[k] for p in parts])
                         for k in COMM_KINDS},
        bubble_s=np.concatenate([p.bubble_s for p in parts]),
    )


def _tile_points(cw: CompiledWorkload, b: int) -> int:
    """Points per column tile of a batch of ``b``: about ``_TILE_BYTES`` per (rows, tile)
    array, at least ``_TILE_MIN_POINTS`` while such an array stays under ``_TILE_MAX_BYTES``,
    the tiles of a batch as equal as they divide."""
    rows = max(cw.plan.num_segments, cw.plan.num_chains, 1)
    tile = max(_TILE_BYTES // (8 * rows), min(_TILE_MIN_POINTS, _TILE_MAX_BYTES // (8 * rows)))
    tile = int(max(16, min(b, tile)))
    return -(-b // -(-b // tile))  # equal tiles: no narrow last tile paying every level's call


def _spans(cw: CompiledWorkload, b: int, tile: int) -> list[list[tuple[int, int]]]:
    """The column tiles ``(lo, hi)`` of a batch of ``b`` grouped into spans scheduled at once:
    consecutive tiles of at least ``_DISTINCT_MIN_B`` points (those scheduled on the distinct
    segment rows), as many per span as keep the schedule's workspace (chain starts and segment
    ends, :meth:`~simcore.engine.schedule.SegmentTable.workspace`) under ``_SPAN_MAX_BYTES``
    (``_SPAN_NARROW_BYTES`` for a plan of fewer than ``_SPAN_WIDE_MIN_LEVELS`` levels),
    spans of equal tile counts; a narrower tile is a span of its own."""
    tiles = [(lo, min(b, lo + tile)) for lo in range(0, b, tile)]
    if len(tiles) == 1:
        return [tiles]
    table = cw.segment_table
    rows = table.plan.num_chains + table.num_rows + table.multi_src.size
    limit = _SPAN_MAX_BYTES
    if len(table.plan.steps) < _SPAN_WIDE_MIN_LEVELS:
        limit = min(limit, _SPAN_NARROW_BYTES)
    most = max(1, limit // (8 * max(rows, 1) * tile))
    spans: list[list[tuple[int, int]]] = []
    run: list[tuple[int, int]] = []
    for t in [*tiles, None]:
        if t is not None and t[1] - t[0] >= _DISTINCT_MIN_B:
            run.append(t)
            continue
        if run:
            per = -(-len(run) // -(-len(run) // most))  # equal spans
            spans += [run[i:i + per] for i in range(0, len(run), per)]
            run = []
        if t is not None:
            spans.append([t])
    return spans


def _evaluate_span(cw: CompiledWorkload, tdur: FloatArray, slowdown: FloatArray | None,
                   blocks: dict[int, FloatArray] | None, tiles: list[tuple[int, int]]
                   ) -> list[StageBreakdown]:
    """The breakdown of each tile of a span (:func:`_spans`). One tile: :func:`_evaluate_tile`.
    Several: per tile the compute scale (a BLAS product: rounded as for that tile alone) and
    the segment rows (tile by tile: arrays that stay in cache), one level loop over the span,
    then per tile the breakdown on its columns of that schedule (views, no copy). The same
    operations on the same values as :func:`_evaluate_tile` per tile."""
    def tile_slow(lo: int, hi: int) -> FloatArray | None:
        return None if slowdown is None else slowdown[..., lo:hi]

    def tile_blocks(lo: int, hi: int) -> dict[int, FloatArray] | None:
        return None if blocks is None else {u: e[:, lo:hi] for u, e in blocks.items()}

    if len(tiles) == 1:
        lo, hi = tiles[0]
        return [_evaluate_tile(cw, np.ascontiguousarray(tdur[:, lo:hi]), tile_slow(lo, hi),
                               tile_blocks(lo, hi))]
    lo0 = tiles[0][0]
    cols = [np.ascontiguousarray(tdur[:, lo:hi]) for lo, hi in tiles]
    scaled = [compute_scale(cw, col, tile_slow(lo, hi)) for col, (lo, hi) in zip(cols, tiles,
                                                                                 strict=True)]
    per_tile = [tile_blocks(lo, hi) or blocks_exposed(cw, col, scale)
                for col, (lo, hi), (_, scale) in zip(cols, tiles, scaled, strict=True)]
    times = _table_times(cw, [(col, s, found) for col, (_, s), found in zip(cols, scaled, per_tile,
                                                                            strict=True)])
    return [_breakdown(cw, col, times.columns(lo - lo0, hi - lo0), busy * s, found)
            for col, (lo, hi), (busy, s), found in zip(cols, tiles, scaled, per_tile,
                                                         strict=True)]


def compute_scale(cw: CompiledWorkload, tdur: FloatArray, slowdown: FloatArray | None
                  ) -> tuple[FloatArray, FloatArray]:
    """(P, B) compute seconds per stage and the factor stretching it (see :func:`evaluate_times`)."""
    is_comp = cw.template_kind == COMPUTE
    busy = cw.stage_counts @ (tdur * is_comp[:, None])  # (P, B) compute per stage
    scale = np.ones_like(busy)
    if slowdown is not None:
        # Echo §3.4: compute running beside communication is slowed down; the stage's
        # overlappable communication is assumed hidden behind its compute (at most all of it)
        overlapped = np.minimum(busy, cw.overlap_counts @ tdur)
        slow = np.asarray(slowdown, dtype=np.float64)
        scale += (slow if slow.ndim == 2 else slow[None, :]) * np.divide(overlapped, busy, out=np.zeros_like(busy),
                                               where=busy > 0)
    return busy, scale


def node_durations(cw: CompiledWorkload, tdur: FloatArray, slowdown: FloatArray | None = None
                   ) -> FloatArray:
    """(N,) seconds of every node for one design point (``tdur`` (U,) or (U, 1)), compute
    stretched by the overlap slowdown as :func:`evaluate_times` does."""
    col = np.asarray(tdur, dtype=np.float64).reshape(-1, 1)
    slow = None if slowdown is None else np.asarray(slowdown, dtype=np.float64).reshape(-1, 1)
    _, scale = compute_scale(cw, col, slow)
    graph = cw.workload.graph
    tmpl = graph.attr("template").astype(np.int64)
    stage = graph.attr("stage").astype(np.int64)
    comp = (cw.template_kind == COMPUTE)[tmpl]
    out = np.where(comp, col[tmpl, 0] * scale[stage, 0], col[tmpl, 0])
    for template, exposed in blocks_exposed(cw, col, scale).items():
        on = tmpl == template
        out[on] = exposed[stage[on], 0]
    return out


def _evaluate_tile(cw: CompiledWorkload, tdur: FloatArray, slowdown: FloatArray | None,
                   blocks: dict[int, FloatArray] | None = None) -> StageBreakdown:
    is_comp = cw.template_kind == COMPUTE
    busy, scale = compute_scale(cw, tdur, slowdown)
    if blocks is None:
        blocks = blocks_exposed(cw, tdur, scale)
    times: LevelTimes | TableTimes
    if tdur.shape[1] >= _DISTINCT_MIN_B:  # the same sums, once per distinct segment row
        times = _table_times(cw, [(tdur, scale, blocks)])
    else:
        seg_comp = np.asarray(cw.seg_counts @ (tdur * is_comp[:, None]))
        seg_other = np.asarray(cw.seg_counts @ (tdur * (~is_comp)[:, None]))
        seg_dur = seg_comp * scale[cw.seg_stage] + seg_other
        if blocks:
            seg_dur += _per_stage_rows(cw.seg_counts, cw.seg_stage, blocks)
        times = run_chains_by_level(cw.plan, seg_dur, overwrite=True)  # seg_dur is ours
    return _breakdown(cw, tdur, times, busy * scale, blocks)


def _table_times(cw: CompiledWorkload, tiles: list[tuple[FloatArray, FloatArray,
                                                         dict[int, FloatArray]]]) -> TableTimes:
    """One schedule of the column tiles ``(tdur (U, b), scale (P, b), blocks)`` side by side on
    the distinct segment rows: each tile's rows written into its columns of the segment
    table's workspace (:func:`_segment_rows`), then the table's level loop over all of them."""
    table = cw.segment_table
    b = sum(tdur.shape[1] for tdur, _, _ in tiles)
    buf = table.rows_buffer(b)
    bounds = []
    lo = 0
    for tdur, scale, blocks in tiles:
        hi = lo + tdur.shape[1]
        _segment_rows(cw, tdur, scale, blocks, buf[:, lo:hi])
        bounds.append((lo, hi))
        lo = hi
    return table.run(b, bounds)


def _segment_rows(cw: CompiledWorkload, tdur: FloatArray, scale: FloatArray,
                  blocks: dict[int, FloatArray], out: FloatArray) -> None:
    """Seconds of each distinct segment row for the columns of ``tdur`` (U, B) into ``out``
    (R, B): its compute (stretched by ``scale`` (P, B) on its stage), other seconds and
    closed-form blocks."""
    is_comp = cw.template_kind == COMPUTE
    rows, row_stage, _ = cw.distinct_segments
    seg_comp = np.asarray(rows @ (tdur * is_comp[:, None]))
    seg_other = np.asarray(rows @ (tdur * (~is_comp)[:, None]))
    np.add(seg_comp * scale[row_stage], seg_other, out=out)
    if blocks:
        out += _per_stage_rows(rows, row_stage, blocks)


def blocks_exposed(cw: CompiledWorkload, tdur: FloatArray, scale: FloatArray
                   ) -> dict[int, FloatArray]:
    """Exposed-op template -> (P, B) seconds of each closed-form block on each stage
    (:func:`simcore.ir.blocks.block_exposed_s`); empty without blocks."""
    return {b.exposed_template: block_exposed_s(b, tdur, scale) for b in cw.blocks}


def _per_stage_rows(counts: sps.csr_matrix, row_stage: IntArray,
                    blocks: dict[int, FloatArray]) -> FloatArray:
    """(N, B) seconds of the blocks' exposed ops in each row of ``counts`` (N, U), each row
    costed on its stage."""
    templates = list(blocks)
    cols = np.asarray(counts[:, templates].toarray())  # (N, blocks): one pass over counts
    out = np.zeros((counts.shape[0], next(iter(blocks.values())).shape[1]))
    for j, exposed in enumerate(blocks.values()):
        nz = np.flatnonzero(cols[:, j])
        out[nz] += cols[nz, j, None] * exposed[row_stage[nz]]
    return out


def _stage_comm_exposed(cw: CompiledWorkload, times: LevelTimes | TableTimes, stage: int,
                        cols: IntArray | None) -> dict[str, FloatArray]:
    """Kind -> exposed seconds of the communication off ``stage``'s compute stream, in the
    batch columns ``cols`` (None: all). Only this stage's chains are gathered, the compute
    intervals straight into the padded rows of the breakdown's cover
    (:func:`~simcore.engine.breakdown.exposed_on_padded`)."""
    names = list(cw.comm_chains[stage])
    if not names:
        return {}
    comm = list(cw.comm_chains[stage].values())
    label = np.repeat(np.arange(len(names)), [part.size for part in comm])
    comp_start, comp_end = _padded_intervals(times, cw.compute_chains[stage], cols)
    start, finish = _intervals(times, np.concatenate(comm), cols)
    return exposed_on_padded(comp_start, comp_end, start, finish, label, names)


def _intervals(times: LevelTimes | TableTimes, chains: IntArray, cols: IntArray | None
               ) -> tuple[FloatArray, FloatArray]:
    """(n, B) start and finish (start + duration) of ``chains`` in the columns ``cols``."""
    start, dur = times.start_rows(chains), times.dur_rows(chains)
    if cols is not None:  # rows first, then the columns
        start, dur = start[:, cols], dur[:, cols]
    return start, np.add(start, dur, out=dur)


def _padded_intervals(times: LevelTimes | TableTimes, chains: IntArray, cols: IntArray | None
                      ) -> tuple[FloatArray, FloatArray]:
    """:func:`_intervals` of ``chains`` in rows ``1:n+1`` of an (n + 2, B) start array and
    rows ``1:`` of an (n + 1, B) finish array, the other rows left for the cover's padding."""
    if chains.size == 0:
        width = times.start_by_level.shape[1] if cols is None else cols.size
        return np.empty((2, width)), np.empty((1, width))
    padded = np.concatenate([chains[:1], chains, chains[:1]])
    start, dur = times.start_rows(padded), times.dur_rows(padded[:-1])
    if cols is not None:
        start, dur = start[:, cols], dur[:, cols]
    np.add(start[1:-1], dur[1:], out=dur[1:])
    return start, dur


def _breakdown(cw: CompiledWorkload, tdur: FloatArray, times: LevelTimes | TableTimes,
               busy: FloatArray, blocks: dict[int, FloatArray] | None = None) -> StageBreakdown:
    """Breakdown on the stage with the most compute (ties: the first), per design point."""
    total = times.makespan(cw.plan)
    b = total.shape[0]
    pick = np.argmax(busy, axis=0)
    cols_all = np.arange(b)
    compute = busy[pick, cols_all]
    exposed = {k: np.zeros(b) for k in COMM_KINDS}
    for s in np.unique(pick):
        cols = np.flatnonzero(pick == s)
        counts = cw.stage_counts[s]
        for ki, k in enumerate(COMM_KINDS):  # blocking collectives on the compute stream
            exposed[k][cols] += ((counts * (cw.template_kind == ki)) @ tdur)[cols]
        for template, seconds in (blocks or {}).items():  # closed-form blocks' exposed TP
            exposed[COMM_KINDS[cw.template_kind[template]]][cols] += \
                counts[template] * seconds[s, cols]
        for k, v in _stage_comm_exposed(cw, times, s, cols if cols.size < b else None).items():
            exposed[k][cols] += v
    exposed_total = np.zeros(b)
    for v in exposed.values():
        exposed_total += v
    bubble = np.maximum(0.0, total - compute - exposed_total)
    # rounding residue of the subtraction (a stage that never waits, e.g. pp 1, left 1e-16 s)
    bubble[bubble <= _BUBBLE_RESIDUE * total] = 0.0
    return StageBreakdown(total, compute, exposed, bubble)
