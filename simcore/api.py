"""Public evaluation API: :func:`simulate_batch` and :func:`structure_key`.

Design points that share the model, the parallel plan and the cluster shape (GPU count, GPUs
per node) share the graph structure; they differ only in hardware numbers (FLOP/s, bandwidths,
latencies, calibration). :func:`simulate_batch` builds and compiles the graph once per
structure (cached) and evaluates the whole batch in vectorized numpy (DESIGN.md, "The
vectorized engine"). Points that cannot run come back as ``feasible = False`` with a reason.
The model is the spec of any workload family and the fidelity a name: both are dispatched through
their registries (:data:`simcore.workloads.REGISTRY`, :data:`simcore.fidelity.REGISTRY`).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from functools import lru_cache
from typing import Any, cast

import numpy as np
from numpy.typing import NDArray

from simcore.engine.devices import (
    compile_on_pools,
    stage_compute_and_shares,
    stage_overlap_slowdown,
)
from simcore.engine.evaluate import CompiledWorkload, compile_workload, evaluate_times
from simcore.engine.result import COMM_KINDS, BatchResult
from simcore.errors import InputError
from simcore.fidelity import Fidelity, get_fidelity
from simcore.fidelity.intervals import interval_columns
from simcore.hardware.batch import SystemBatch, per_distinct
from simcore.limits import limit
from simcore.memory.capacity import check_capacity, check_stage_pools
from simcore.memory.offload import apply_memory_tier
from simcore.specs.layer_split import stage_layers
from simcore.specs.parallel import ParallelSpec
from simcore.specs.system import SystemSpec
from simcore.workloads import family_of
from simcore.workloads.layout import RankLayout

__all__ = ["check_structure", "compiled_workload", "evaluated_durations", "interval_columns",
           "simulate_batch", "stage_layer_counts",
           "structure_key"]


def structure_key(model: Hashable, parallel: ParallelSpec, system: SystemSpec) -> Hashable:
    """Hashable key: points with equal keys share one graph and may share a batch (with
    several device pools, their counts and node sizes are part of it)."""
    key = (model, parallel, system.num_gpus, system.gpus_per_node)
    return (*key, system.pool_structure) if system.pools else key


def stage_layer_counts(model: Hashable, parallel: ParallelSpec) -> tuple[int, ...] | None:
    """Transformer layers on each pipeline stage under the plan's split (even, the explicit
    first / last counts, or ``layer_split = balanced``: :mod:`simcore.specs.layer_split`); None
    for a family without a layer stack to split (its spec has no output layer to weigh).

    Raises:
        InputError: the plan cannot split the model's layers.
    """
    weigh = getattr(model, "output_layer_equivalents", None)
    if weigh is None:
        return None
    split = parallel.chunk_layers(int(cast(Any, model).num_layers), float(weigh()))
    return tuple(stage_layers(split, parallel.pp, stage) for stage in range(parallel.pp))


def check_structure(model: Hashable, parallel: ParallelSpec, system: SystemSpec
                    ) -> tuple[ParallelSpec | None, str]:
    """Resolve ``parallel`` for ``system``, check the family's shape rules and the graph-size
    bound (``graph_nodes`` of :mod:`simcore.limits`, on the family's estimate: nothing is built).

    Returns:
        (resolved plan, '') when the structure is valid, else (None, one-line reason).
    """
    try:
        par = parallel.resolve(system.num_gpus)
    except InputError as err:
        return None, str(err)
    family = family_of(model)
    reason = family.check(model, par, system)
    if reason is not None:
        return None, reason
    nodes = _graph_nodes(model, par, system.gpus_per_node)
    if nodes > limit("graph_nodes"):
        return None, str(InputError(
            "parallel.global_batch", par.global_batch,
            f"with parallel.micro_batch={par.micro_batch}, dp={par.dp_size} "
            f"({par.num_micro_batches} micro-batches per replica) and the workload's layers "
            f"(workload.num_layers / depth / sequence lengths) the iteration graph has about "
            f"{nodes:.3g} nodes, more than {limit('graph_nodes'):.3g} (limit graph_nodes, "
            "SIMSWEEP_MAX_GRAPH_NODES): use a larger parallel.micro_batch, a smaller global batch "
            "or fewer layers"))
    return par, ""


@lru_cache(maxsize=1024)
def _graph_nodes(model: Hashable, par: ParallelSpec, gpus_per_node: int) -> int:
    """The family's graph-size estimate, once per structure (checked for every batch)."""
    return int(family_of(model).graph_nodes(model, par, gpus_per_node))


@lru_cache(maxsize=32)
def _compiled(model: Hashable, par: ParallelSpec, gpus_per_node: int,
              fidelity: str = "calibrated") -> CompiledWorkload:
    workload = family_of(model).build(model, par, gpus_per_node)
    return compile_workload(get_fidelity(fidelity).prepare(workload))


@lru_cache(maxsize=32)
def _compiled_pools(model: Hashable, par: ParallelSpec, gpus_per_node: int,
                    pool_counts: tuple[int, ...], fidelity: str = "calibrated"
                    ) -> CompiledWorkload:
    workload = get_fidelity(fidelity).prepare(family_of(model).build(model, par, gpus_per_node))
    layout = RankLayout.of(par, gpus_per_node, pool_counts)
    return compile_on_pools(workload, layout.stage_pools, layout.stage_tp_spans_pools)


def compiled_workload(model: Hashable, parallel: ParallelSpec, system: SystemSpec,
                      fidelity: str = "calibrated") -> CompiledWorkload:
    """The cached compiled graph of a valid structure (``fidelity`` as in :func:`simulate_batch`).

    Raises:
        InputError: the structure is invalid (see :func:`check_structure`).
    """
    par, reason = check_structure(model, parallel, system)
    if par is None:
        raise InputError("structure", f"{getattr(model, 'name', model)}", reason)
    get_fidelity(fidelity)
    if not system.uniform_devices:
        return _compiled_pools(model, par, system.gpus_per_node,
                               tuple(p.count for p in system.devices), fidelity)
    return _compiled(model, par, system.gpus_per_node, fidelity)


def evaluated_durations(model: Hashable, parallel: ParallelSpec, system: SystemSpec,
                        fidelity: str = "calibrated"
                        ) -> tuple[CompiledWorkload, NDArray[np.float64],
                                   float | NDArray[np.float64] | None]:
    """What :func:`simulate_batch` schedules for one system: the compiled graph of ``fidelity``,
    its (U,) template seconds and the overlap slowdown (None: not modelled; on mixed device
    pools (P,) per stage), e.g. for a timeline (:func:`simcore.engine.trace.chrome_trace`).

    Raises:
        InputError: the structure is invalid, or the fidelity is unknown.
    """
    fid = get_fidelity(fidelity)
    cw = compiled_workload(model, parallel, system, fidelity)
    par = parallel.resolve(system.num_gpus)
    sb = SystemBatch.from_specs([system])
    tdur = fid.durations(cw, sb, [system], par)
    slow = _overlap_slowdown(fid, cw, sb, par, tdur)
    return (cw, tdur[:, 0],
            None if slow is None else
            float(slow[0]) if slow.ndim == 1 else np.asarray(slow[:, 0]))


def _overlap_slowdown(fid: Fidelity, cw: CompiledWorkload, sb: SystemBatch,
                      par: ParallelSpec, tdur: NDArray[np.float64],
                      compute_shares: tuple[NDArray[np.float64], NDArray[np.float64]] | None
                      = None) -> NDArray[np.float64] | None:
    """(B,) overlap slowdown, or (P, B) per stage on mixed device pools (each stage slowed by
    the calibration of the pool that sets its compute: :func:`stage_overlap_slowdown`)."""
    if cw.template_stage is None:
        return fid.overlap_slowdown(sb, cw, par, tdur)
    per_pool = [fid.overlap_slowdown(sb.pool(d), cw, par, tdur) for d in range(sb.num_pools)]
    if any(x is None for x in per_pool):
        return None
    return stage_overlap_slowdown(cw, sb, par, np.stack([np.asarray(x) for x in per_pool]),
                                  compute_shares)


def _infeasible(b: int, reason: str, memory_gib: float = float("nan")) -> BatchResult:
    nan = np.full(b, np.nan)
    return BatchResult(
        iteration_time_s=nan, compute_s=nan.copy(), exposed_comm_s=nan.copy(),
        bubble_s=nan.copy(), peak_memory_gib=np.full(b, memory_gib),
        model_tflops_per_gpu=nan.copy(), mfu=nan.copy(), feasible=np.zeros(b, dtype=bool),
        reason=(reason,) * b, exposed_comm_by_kind={k: nan.copy() for k in COMM_KINDS},
    )


def _check_batch(systems: Sequence[SystemSpec]) -> None:
    """A batch is a non-empty sequence of systems sharing one structure.

    Raises:
        InputError: one SystemSpec rather than a sequence, an empty one, or mixed structures.
    """
    if isinstance(systems, SystemSpec):
        raise InputError("systems", systems.name, "must be a sequence of SystemSpec (a batch); "
                         "one system is the batch [system]")
    if len(systems) == 0:
        raise InputError("systems", 0, "a batch needs at least one system")
    # structure_key of each system without re-hashing model and plan per point
    keys = {(s.num_gpus, s.gpus_per_node, s.pool_structure if s.pools else None)
            for s in systems}
    if len(keys) != 1:
        raise InputError("systems", f"{len(keys)} structures",
                         "all systems of a batch must share num_gpus, gpus_per_node and pools")


def simulate_batch(model: Hashable, parallel: ParallelSpec, systems: Sequence[SystemSpec],
                   fidelity: str = "calibrated") -> BatchResult:
    """Simulate one training iteration of ``model`` under ``parallel`` on each system.

    Args:
        model: the spec of any registered workload family (:data:`simcore.workloads.REGISTRY`;
            the family comes from the spec's type or its ``family`` field).
        parallel: the plan (``dp`` may be None: derived from ``num_gpus``).
        systems: B clusters sharing ``structure_key`` (same GPU count and GPUs per node).
        fidelity: a name of :data:`simcore.fidelity.REGISTRY`: ``calibrated`` (predict real hardware: calibrated NCCL-aware collectives, one
            stream per communication kind, overlap slowdown) or ``astra`` (reproduce ASTRA-sim's
            analytical backend on the system ``simsweep chakra export`` writes:
            :mod:`simcore.fidelity.astra.costs`).

    Returns:
        (B,) metrics; a point that does not fit or cannot be laid out is infeasible with its
        reason (an invalid structure makes every point infeasible).

    Raises:
        InputError: ``systems`` is one SystemSpec rather than a sequence, is empty, or mixes
            structures.
    """
    _check_batch(systems)
    fid = get_fidelity(fidelity)
    family = family_of(model)
    b = len(systems)
    par, reason = check_structure(model, parallel, systems[0])
    if par is None:
        return _infeasible(b, reason)
    if par.overlap_blocks and par.pipelined_pieces:
        why_blocks = fid.supports("overlap_blocks") or (
            None if all(s.uniform_devices for s in systems) else
            "parallel.overlap_blocks: closed-form blocks are costed on one device type; "
            "set it false on mixed device pools")
        if why_blocks:
            return _infeasible(b, why_blocks)
    stacked = np.array([bool(s.scaleout_dims) for s in systems])
    why_stacked = fid.supports("stacked_dims") if stacked.any() else None
    if why_stacked:
        parts = [(np.flatnonzero(stacked), _infeasible(int(stacked.sum()), why_stacked))]
        if not stacked.all():
            parts.append((np.flatnonzero(~stacked), simulate_batch(
                model, parallel, [s for s, m in zip(systems, stacked, strict=True) if not m],
                fidelity)))
        return _merge(b, parts)
    mixed = np.array([not s.uniform_devices for s in systems])
    if mixed.any():
        why = fid.supports("mixed_devices")
        parts = [(np.flatnonzero(mixed), _infeasible(int(mixed.sum()), why) if why else
                  _simulate_mixed(model, par, [s for s, m in zip(systems, mixed, strict=True)
                                               if m], fidelity))]
        if not mixed.all():
            parts.append((np.flatnonzero(~mixed), simulate_batch(
                model, parallel, [s for s, m in zip(systems, mixed, strict=True) if not m],
                fidelity)))
        return _merge(b, parts)
    supported = per_distinct(lambda acc: _acc_peak_tflops(acc, par.precision) > 0,
                             [s.accelerator for s in systems])
    if not supported.all():
        return _split_unsupported(model, parallel, systems, supported, par.precision, fidelity)
    cw = _compiled(model, par, systems[0].gpus_per_node, fidelity)
    sb = SystemBatch.from_specs(systems)
    peak = sb.peak_flops[par.precision]
    fits, peak_gib, reasons = check_capacity(*family.peak_footprint(model, par), sb)
    tier = None
    if per_distinct(lambda mem: mem.offloads, [s.memory for s in systems]).any():
        why = fid.supports("memory_offload")
        if why is None:
            # frozen specs satisfy the ModelLike/ParallelLike protocols read-only
            tier = apply_memory_tier(cast(Any, model), cast(Any, par), sb, fits, reasons)
            fits, reasons = tier.fits, tier.reasons  # remote memory tier (conf/memory/)
            peak_gib = np.where([s.memory.offloads for s in systems], tier.peak_gib, peak_gib)
        else:
            fits, reasons = _unsupported_offload(systems, fits, reasons, why)
    tdur = fid.durations(cw, sb, systems, par)
    bd = evaluate_times(cw, tdur, fid.overlap_slowdown(sb, cw, par, tdur))
    exposed_total = np.zeros(b)
    for v in bd.exposed_by_kind.values():
        exposed_total += v
    iteration_s = bd.iteration_time_s
    if tier is not None:  # offload traffic on the critical path: exposed, in no comm kind
        iteration_s = iteration_s + tier.transfer_s
        exposed_total = exposed_total + tier.transfer_s
    flops = family.flops_per_iter(model, par)
    tflops = flops / iteration_s / par.num_gpus / 1e12
    return BatchResult(
        iteration_time_s=iteration_s, compute_s=bd.compute_s,
        exposed_comm_s=exposed_total, bubble_s=bd.bubble_s,
        peak_memory_gib=peak_gib, model_tflops_per_gpu=tflops,
        mfu=tflops * 1e12 / peak, feasible=fits, reason=reasons,
        exposed_comm_by_kind=bd.exposed_by_kind,
    )


def _simulate_mixed(model: Hashable, par: ParallelSpec, systems: Sequence[SystemSpec],
                    fidelity: str) -> BatchResult:
    """:func:`simulate_batch` on clusters of mixed device pools (every system of the batch
    mixed; :mod:`simcore.engine.devices`): kernels on each stage's devices, collectives at the
    slowest member's pace, memory checked per stage on each pool it runs on."""
    fid = get_fidelity(fidelity)
    family = family_of(model)
    b = len(systems)
    sb = SystemBatch.from_specs(systems)
    peaks = sb.pool_peak_flops[par.precision]  # (D, B)
    if (peaks <= 0).any():
        d, j = (int(x[0]) for x in np.nonzero(peaks <= 0))
        acc = systems[j].devices[d].accelerator
        return _infeasible(b, f"parallel.precision={par.precision!r}: not supported by pool {d} "
                           f"({acc.name if acc is not None else '?'})")
    if any(s.memory.offloads for s in systems):
        return _infeasible(b, "system.memory: a remote memory tier is not modelled on mixed "
                           "device pools")
    cw = _compiled_pools(model, par, systems[0].gpus_per_node,
                         tuple(p.count for p in systems[0].devices), fidelity)
    assert cw.stage_pools is not None
    fps = [family.footprint(model, par, s) for s in range(cw.workload.num_stages)]
    compute, shares = stage_compute_and_shares(cw, sb, par)
    fits, peak_gib, reasons = check_stage_pools(fps, cw.stage_pools, sb, shares,
                                                cw.stage_tp_split)
    tdur = fid.durations(cw, sb, systems, par)
    bd = evaluate_times(cw, tdur, _overlap_slowdown(fid, cw, sb, par, tdur, (compute, shares)))
    exposed_total = np.zeros(b)
    for v in bd.exposed_by_kind.values():
        exposed_total += v
    tflops = family.flops_per_iter(model, par) / bd.iteration_time_s / par.num_gpus / 1e12
    mean_peak = (sb.pool_count * peaks).sum(axis=0) / sb.pool_count.sum(axis=0)
    return BatchResult(
        iteration_time_s=bd.iteration_time_s, compute_s=bd.compute_s,
        exposed_comm_s=exposed_total, bubble_s=bd.bubble_s, peak_memory_gib=peak_gib,
        model_tflops_per_gpu=tflops, mfu=tflops * 1e12 / mean_peak, feasible=fits,
        reason=reasons, exposed_comm_by_kind=bd.exposed_by_kind)


def _merge(b: int, parts: Sequence[tuple[NDArray[np.int64], BatchResult]]) -> BatchResult:
    """One (b,) result from sub-results at the given indices."""
    out = _infeasible(b, "")
    reasons = [""] * b
    for idx, sub in parts:
        for name in ("iteration_time_s", "compute_s", "exposed_comm_s", "bubble_s",
                     "peak_memory_gib", "model_tflops_per_gpu", "mfu", "feasible"):
            getattr(out, name)[idx] = getattr(sub, name)
        for k, v in sub.exposed_comm_by_kind.items():
            out.exposed_comm_by_kind[k][idx] = v
        for j, i in enumerate(idx.tolist()):
            reasons[i] = sub.reason[j]
    return BatchResult(**{**out.__dict__, "reason": tuple(reasons)})


def _acc_peak_tflops(acc: object, precision: str) -> float:
    return float(getattr(acc, f"peak_tflops_{precision}", 0.0))


def _split_unsupported(model: Hashable, parallel: ParallelSpec, systems: Sequence[SystemSpec],
                       supported: np.ndarray, precision: str, fidelity: str = "calibrated"
                       ) -> BatchResult:
    """Evaluate the points whose accelerator supports ``precision``; mask the others."""
    b = len(systems)
    bad = np.flatnonzero(~supported)
    parts = [(bad, BatchResult(**{**_infeasible(bad.size, "").__dict__, "reason": tuple(
        f"parallel.precision={precision!r}: not supported by {systems[int(i)].accelerator.name}"
        for i in bad)}))]
    idx = np.flatnonzero(supported)
    if idx.size:
        parts.append((idx, simulate_batch(model, parallel, [systems[int(i)] for i in idx],
                                          fidelity)))
    return _merge(b, parts)


def _unsupported_offload(systems: Sequence[SystemSpec], fits: NDArray[np.bool_],
                         reasons: tuple[str, ...], why: str
                         ) -> tuple[NDArray[np.bool_], tuple[str, ...]]:
    """Points that offload to a memory tier are infeasible, with the fidelity's reason."""
    offloads = np.array([s.memory.offloads for s in systems])
    return fits & ~offloads, tuple(why if o else r for o, r in zip(offloads, reasons, strict=True))
