"""Public evaluation API: :func:`simulate_batch` and :func:`structure_key`.

Design points that share the model, the parallel plan and the cluster shape (GPU count, GPUs
per node) share the graph structure; they differ only in hardware numbers (FLOP/s, bandwidths,
latencies, calibration). :func:`simulate_batch` builds and compiles the graph once per
structure (cached) and evaluates the whole batch in vectorized numpy (DESIGN.md, "The
vectorized engine"). Points that cannot run come back as ``feasible = False`` with a reason.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from functools import lru_cache
from typing import Any, cast

import numpy as np
from numpy.typing import NDArray

from simcore.engine.evaluate import (
    CompiledWorkload,
    compile_workload,
    evaluate_times,
    template_durations,
)
from simcore.engine.result import COMM_KINDS, BatchResult
from simcore.errors import InputError
from simcore.fidelity.astra.costs import astra_template_durations, astra_workload, check_fidelity
from simcore.fidelity.overlap import overlap_slowdown
from simcore.hardware.batch import SystemBatch
from simcore.memory import check_memory
from simcore.memory.offload import apply_memory_tier
from simcore.specs.parallel import ParallelSpec
from simcore.specs.system import SystemSpec
from simcore.workloads.transformer.generator import build_transformer
from simcore.workloads.transformer.spec import ModelSpec

__all__ = ["check_structure", "compiled_workload", "simulate_batch", "structure_key"]


def structure_key(model: ModelSpec, parallel: ParallelSpec, system: SystemSpec) -> Hashable:
    """Hashable key: points with equal keys share one graph and may share a batch (with
    several device pools, their counts and node sizes are part of it)."""
    key = (model, parallel, system.num_gpus, system.gpus_per_node)
    return (*key, system.pool_structure) if system.pools else key


def check_structure(model: ModelSpec, parallel: ParallelSpec, system: SystemSpec
                    ) -> tuple[ParallelSpec | None, str]:
    """Resolve ``parallel`` for ``system`` and check the shape rules.

    Returns:
        (resolved plan, '') when the structure is valid, else (None, one-line reason).
    """
    try:
        par = parallel.resolve(system.num_gpus)
    except InputError as err:
        return None, str(err)
    m = model
    try:  # uneven splits are allowed (simcore.specs.layer_split); each chunk needs a layer
        par.chunk_layers(m.num_layers)
    except InputError as err:
        return None, str(err)
    rules = [
        (m.num_heads % par.tp == 0, "workload.num_heads", m.num_heads,
         f"must be divisible by tp={par.tp}"),
        (m.kv_heads % par.tp == 0, "workload.num_kv_heads", m.kv_heads,
         f"must be divisible by tp={par.tp}"),
        (m.ffn % par.tp == 0, "workload.ffn_hidden_size", m.ffn, f"must be divisible by tp={par.tp}"),
        (m.seq_len % par.cp == 0, "workload.seq_len", m.seq_len, f"must be divisible by cp={par.cp}"),
        (m.num_experts % par.ep == 0, "workload.num_experts", m.num_experts,
         f"must be divisible by ep={par.ep}"),
        (par.ep == 1 or m.is_moe, "parallel.ep", par.ep, "expert parallelism needs num_experts > 1"),
    ]
    for ok, key, value, rule in rules:
        if not ok:
            return None, str(InputError(key, value, rule))
    return par, ""


@lru_cache(maxsize=32)
def _compiled(model: ModelSpec, par: ParallelSpec, gpus_per_node: int,
              fidelity: str = "calibrated") -> CompiledWorkload:
    workload = build_transformer(model, par, gpus_per_node)
    if fidelity == "astra":  # ASTRA-sim: one communication op in flight per NPU
        workload = astra_workload(workload)
    return compile_workload(workload)


def compiled_workload(model: ModelSpec, parallel: ParallelSpec, system: SystemSpec,
                      fidelity: str = "calibrated") -> CompiledWorkload:
    """The cached compiled graph of a valid structure (``fidelity`` as in :func:`simulate_batch`).

    Raises:
        InputError: the structure is invalid (see :func:`check_structure`).
    """
    par, reason = check_structure(model, parallel, system)
    if par is None:
        raise InputError("structure", f"{model.name}", reason)
    check_fidelity(fidelity)
    return _compiled(model, par, system.gpus_per_node, fidelity)


def _infeasible(b: int, reason: str, memory_gib: float = float("nan")) -> BatchResult:
    nan = np.full(b, np.nan)
    return BatchResult(
        iteration_time_s=nan, compute_s=nan.copy(), exposed_comm_s=nan.copy(),
        bubble_s=nan.copy(), peak_memory_gib=np.full(b, memory_gib),
        model_tflops_per_gpu=nan.copy(), mfu=nan.copy(), feasible=np.zeros(b, dtype=bool),
        reason=(reason,) * b, exposed_comm_by_kind={k: nan.copy() for k in COMM_KINDS},
    )


def simulate_batch(model: ModelSpec, parallel: ParallelSpec, systems: Sequence[SystemSpec],
                   fidelity: str = "calibrated") -> BatchResult:
    """Simulate one training iteration of ``model`` under ``parallel`` on each system.

    Args:
        model: the transformer.
        parallel: the plan (``dp`` may be None: derived from ``num_gpus``).
        systems: B clusters sharing ``structure_key`` (same GPU count and GPUs per node).
        fidelity: ``calibrated`` (predict real hardware: calibrated NCCL-aware collectives, one
            stream per communication kind, overlap slowdown) or ``astra`` (reproduce ASTRA-sim's
            analytical backend on the system ``simsweep chakra export`` writes:
            :mod:`simcore.fidelity.astra.costs`).

    Returns:
        (B,) metrics; a point that does not fit or cannot be laid out is infeasible with its
        reason (an invalid structure makes every point infeasible).

    Raises:
        InputError: ``systems`` is empty or mixes structures.
    """
    if len(systems) == 0:
        raise InputError("systems", 0, "a batch needs at least one system")
    check_fidelity(fidelity)
    keys = {structure_key(model, parallel, s) for s in systems}
    if len(keys) != 1:
        raise InputError("systems", f"{len(keys)} structures",
                         "all systems of a batch must share num_gpus, gpus_per_node and pools")
    b = len(systems)
    par, reason = check_structure(model, parallel, systems[0])
    if par is None:
        return _infeasible(b, reason)
    supported = np.array([_peak_tflops(s, par.precision) > 0 and s.uniform_devices
                          for s in systems])
    if not supported.all():
        return _split_unsupported(model, parallel, systems, supported, par.precision, fidelity)
    cw = _compiled(model, par, systems[0].gpus_per_node, fidelity)
    sb = SystemBatch.from_specs(systems)
    peak = sb.peak_flops[par.precision]
    # frozen specs satisfy calib's ModelLike/ParallelLike read-only; mypy wants settable
    fits, peak_gib, reasons = check_memory(cast(Any, model), cast(Any, par), sb)
    tier = None
    if fidelity == "calibrated" and any(s.memory.offloads for s in systems):
        tier = apply_memory_tier(cast(Any, model), cast(Any, par), sb, fits, reasons)
        fits, reasons = tier.fits, tier.reasons  # remote memory tier (conf/memory/)
        peak_gib = np.where([s.memory.offloads for s in systems], tier.peak_gib, peak_gib)
    elif fidelity == "astra" and any(s.memory.offloads for s in systems):
        fits, reasons = _no_tier_in_astra_mode(systems, fits, reasons)
    tdur = template_durations(cw, sb, par.precision)
    if fidelity == "astra":  # ASTRA-sim's costs; no overlap slowdown in its analytical backend
        bd = evaluate_times(cw, astra_template_durations(cw.workload, par, systems, tdur))
    else:
        bd = evaluate_times(cw, tdur, overlap_slowdown(sb)[0] - 1.0)
    exposed_total = np.zeros(b)
    for v in bd.exposed_by_kind.values():
        exposed_total += v
    iteration_s = bd.iteration_time_s
    if tier is not None:  # offload traffic on the critical path: exposed, in no comm kind
        iteration_s = iteration_s + tier.transfer_s
        exposed_total = exposed_total + tier.transfer_s
    flops = model.model_flops_per_sample() * par.global_batch
    tflops = flops / iteration_s / par.num_gpus / 1e12
    return BatchResult(
        iteration_time_s=iteration_s, compute_s=bd.compute_s,
        exposed_comm_s=exposed_total, bubble_s=bd.bubble_s,
        peak_memory_gib=peak_gib, model_tflops_per_gpu=tflops,
        mfu=tflops * 1e12 / peak, feasible=fits, reason=reasons,
        exposed_comm_by_kind=bd.exposed_by_kind,
    )


_MIXED_POOLS = ("system.pools: pools with different accelerators or calibrations are not "
                "simulated yet (the engine costs every kernel on pool 0)")


def _peak_tflops(system: SystemSpec, precision: str) -> float:
    return float(getattr(system.accelerator, f"peak_tflops_{precision}", 0.0))


def _split_unsupported(model: ModelSpec, parallel: ParallelSpec, systems: Sequence[SystemSpec],
                       supported: np.ndarray, precision: str, fidelity: str = "calibrated"
                       ) -> BatchResult:
    """Evaluate the points whose accelerator supports ``precision``; mask the others."""
    b = len(systems)
    out = _infeasible(b, "")
    reasons = [f"parallel.precision={precision!r}: not supported by {s.accelerator.name}"
               if s.uniform_devices else _MIXED_POOLS for s in systems]
    idx = np.flatnonzero(supported)
    if idx.size:
        sub = simulate_batch(model, parallel, [systems[int(i)] for i in idx], fidelity)
        for name in ("iteration_time_s", "compute_s", "exposed_comm_s", "bubble_s",
                     "peak_memory_gib", "model_tflops_per_gpu", "mfu", "feasible"):
            getattr(out, name)[idx] = getattr(sub, name)
        for k, v in sub.exposed_comm_by_kind.items():
            out.exposed_comm_by_kind[k][idx] = v
        for j, i in enumerate(idx):
            reasons[i] = sub.reason[j]
    return BatchResult(**{**out.__dict__, "reason": tuple(reasons)})


def _no_tier_in_astra_mode(systems: Sequence[SystemSpec], fits: NDArray[np.bool_],
                           reasons: tuple[str, ...]) -> tuple[NDArray[np.bool_], tuple[str, ...]]:
    """Points that offload to a memory tier are infeasible in ``astra`` mode, with the reason:
    the system ``simsweep chakra export`` writes (and so ASTRA-sim) has no remote memory tier."""
    offloads = np.array([s.memory.offloads for s in systems])
    why = ("memory offload is not modelled with fidelity=astra (ASTRA-sim's exported system has "
           "no remote memory tier); use fidelity=calibrated")
    return fits & ~offloads, tuple(why if o else r for o, r in zip(offloads, reasons, strict=True))

