"""Evaluate a compiled transformer workload on a batch of systems.

Per structure (cached, :class:`CompiledWorkload`): the graph, its schedule plan, the sparse
(S, U) matrix of template counts per segment, and per stage the chain sets the breakdown reads.
Per batch: kernel durations (K, B) from the cost models (one vectorized call per kernel
family), template durations (U, B) = W @ kernels, segment durations (S, B) = counts @ templates,
then the level-by-level schedule (:func:`~simcore.engine.schedule.run_chains`) and the
breakdown (:mod:`~simcore.engine.breakdown`). No per-point Python code runs: a single point is a
batch of one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sps
from numpy.typing import NDArray

from simcore.calibrated import collective_time_s, p2p_time_s
from simcore.engine.breakdown import exposed_by_kind
from simcore.engine.result import COMM_KINDS
from simcore.engine.schedule import ChainTimes, SchedulePlan, compile_plan, run_chains
from simcore.hardware import SystemBatch, attention_time_s, gemm_time_s, memory_bound_time_s
from simcore.workload.ops import COMPUTE, OpTable
from simcore.workload.transformer import TransformerWorkload

__all__ = ["CompiledWorkload", "StageBreakdown", "compile_workload", "evaluate_times",
           "kernel_durations", "template_durations"]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]


@dataclass(frozen=True, eq=False)
class CompiledWorkload:
    """A workload ready to be costed for any batch of systems of its structure."""

    workload: TransformerWorkload
    plan: SchedulePlan
    seg_counts: sps.csr_matrix  # (S, U)
    stage_counts: FloatArray  # (P, U) template counts on each stage's compute stream
    compute_chains: tuple[IntArray, ...]  # per stage: chains on its compute stream
    comm_chains: tuple[dict[str, IntArray], ...]  # per stage: kind -> chains on other streams
    template_kind: IntArray  # (U,)

    @property
    def ops(self) -> OpTable:
        """Kernels and templates of the workload."""
        return self.workload.ops


def compile_workload(workload: TransformerWorkload) -> CompiledWorkload:
    """Compile the schedule plan and the per-stage index sets of ``workload``."""
    graph = workload.graph
    plan = compile_plan(graph)
    tmpl = graph.attr("template").astype(np.int64)
    u = len(workload.ops.templates)
    seg_of_sorted = np.repeat(np.arange(plan.num_segments), np.diff(plan.seg_ptr))
    seg_counts = sps.csr_matrix(
        (np.ones(graph.num_nodes), (seg_of_sorted, tmpl[plan.order])),
        shape=(plan.num_segments, u),
    )
    chain_first = plan.order[plan.seg_ptr[plan.chain_seg_ptr[:-1]]]
    res_first = graph.res_idx[graph.res_ptr[chain_first]]
    names = graph.resource_names
    kind_of_t = np.asarray(workload.ops.template_kind, dtype=np.int64)
    chain_kind = kind_of_t[tmpl[chain_first]]
    p = workload.num_stages
    stage_counts = np.zeros((p, u))
    node_res = graph.res_idx[graph.res_ptr[:-1]]
    compute_res = {names.index(f"s{s}.compute"): s for s in range(p)}
    node_stage_compute = np.array([compute_res.get(int(r), -1) for r in range(len(names))])
    on_compute = node_stage_compute[node_res]
    mask = on_compute >= 0
    np.add.at(stage_counts, (on_compute[mask], tmpl[mask]), 1.0)
    compute_chains = []
    comm_chains = []
    for s in range(p):
        compute_chains.append(np.flatnonzero(res_first == names.index(f"s{s}.compute")))
        kinds: dict[str, list[int]] = {}
        for c in range(plan.num_chains):
            name = names[int(res_first[c])]
            if name.startswith(f"s{s}.") and not name.endswith(".compute"):
                kinds.setdefault(COMM_KINDS[int(chain_kind[c])], []).append(c)
            elif name.startswith("pp") and s in _pp_ends(name):
                kinds.setdefault("pp", []).append(c)
        comm_chains.append({k: np.asarray(v, dtype=np.int64) for k, v in kinds.items()})
    return CompiledWorkload(workload=workload, plan=plan, seg_counts=seg_counts,
                            stage_counts=stage_counts, compute_chains=tuple(compute_chains),
                            comm_chains=tuple(comm_chains), template_kind=kind_of_t)


def _pp_ends(name: str) -> tuple[int, int]:
    a, b = name[2:].split(">")
    return int(a), int(b)


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
        out[idx] = collective_time_s(sb, a[:, 0], a[:, 1], a[:, 2], a[:, 3])
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


def evaluate_times(cw: CompiledWorkload, tdur: FloatArray) -> tuple[ChainTimes, StageBreakdown]:
    """Schedule the batch with template durations ``tdur`` (U, B) and break the time down."""
    seg_dur = np.asarray(cw.seg_counts @ tdur)
    times = run_chains(cw.plan, seg_dur)
    total = times.makespan
    start, finish = times.chain_start, times.chain_finish
    b = tdur.shape[1]
    is_comp = (cw.template_kind == COMPUTE).astype(np.float64)
    per_stage = []
    for s in range(cw.workload.num_stages):
        counts = cw.stage_counts[s]
        busy = (counts * is_comp) @ tdur
        kinds = {k: np.zeros(b) for k in COMM_KINDS}
        for ki, k in enumerate(COMM_KINDS):
            sel = (cw.template_kind == ki).astype(np.float64)
            kinds[k] += (counts * sel) @ tdur
        cc = cw.compute_chains[s]
        comm = {k: (start[c], finish[c]) for k, c in cw.comm_chains[s].items()}
        for k, v in exposed_by_kind(start[cc], finish[cc], comm).items():
            kinds[k] += v
        per_stage.append((busy, kinds))
    busy_all = np.stack([ps[0] for ps in per_stage])
    pick = np.argmax(busy_all, axis=0)
    cols = np.arange(b)
    compute = busy_all[pick, cols]
    exposed = {k: np.stack([ps[1][k] for ps in per_stage])[pick, cols] for k in COMM_KINDS}
    exposed_total = np.zeros(b)
    for v in exposed.values():
        exposed_total += v
    bubble = np.maximum(0.0, total - compute - exposed_total)
    return times, StageBreakdown(total, compute, exposed, bubble)
