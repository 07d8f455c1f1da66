"""Remote memory tier: offloaded state, its HBM relief, capacity and transfer time.

Model (ASTRA-sim remote memory, reference/astra-sim-and-chakra.md §2.3; ASTRA-sim 2.0
disaggregated memory, reference/methods-hap-ace-echo.md §4), per pipeline stage of the plan
(footprint from :func:`simcore.workloads.transformer.memory.footprint_bytes`):

* ``offload_optimizer``: the optimizer state incl. the fp32 master copy (``optimizer`` part)
  leaves HBM; per iteration the optimizer step reads it and writes it back: ``2 x optimizer``
  bytes in 2 accesses.
* ``offload_activations``: activations stashed for backward leave HBM except a double buffer
  (2 of the stage's in-flight layer-micro-batches: one being written, one prefetched); every
  layer-micro-batch is written after its forward and read before its backward:
  ``2 x per-layer-micro-batch bytes x layers x micro-batches`` in as many accesses.
* An access costs ``latency + bytes / bandwidth``. Contention (ASTRA-sim memory types):
  ``per_npu`` none; ``per_node`` the node's ``gpus_per_node`` GPUs share one FIFO channel;
  ``pool`` all ``num_gpus`` GPUs share one FIFO. With equal traffic from every sharer the
  last one finishes after ``sharers x (accesses x latency + bytes / bandwidth)``.
* The transfer is **not overlapped**: it is added to the critical path of the iteration (we
  do not model the tier as a separate in-order stream), an upper bound on its cost.
* Capacity: a tier instance (one per GPU, per node, or the pool) holds its sharers' offloaded
  bytes (the largest stage's, for every GPU); more than ``capacity_gib`` is infeasible.

Everything is vectorized over the B systems (their ``memory`` field).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from simcore.hardware.batch import SystemBatch
from simcore.workloads.transformer.memory import (
    ModelLike,
    ParallelLike,
    footprint_bytes,
    in_flight_layers,
    plan_stage_layers,
)

__all__ = ["TierEffect", "apply_memory_tier"]

GIB = 2**30
FloatArray = NDArray[np.float64]


@dataclass(frozen=True)
class TierEffect:
    """(B,) effect of the remote memory tier on a batch."""

    fits: NDArray[np.bool_]
    peak_gib: FloatArray
    remote_gib: FloatArray
    transfer_s: FloatArray
    reasons: tuple[str, ...]


def _stage_table(model: ModelLike, par: ParallelLike) -> FloatArray:
    """(S, 5) per stage: total, optimizer, offloadable activations, act bytes, accesses."""
    m = max(1, par.global_batch // (par.dp_size * par.micro_batch))
    rows = []
    for s in sorted({0, par.pp - 1} | set(range(min(par.pp, 4)))):
        fp = footprint_bytes(model, par, s)
        flight = max(in_flight_layers(model, par, s), 1.0)
        per_lm = fp["activations"] / flight
        layers_mb = plan_stage_layers(model, par, s) * m
        rows.append((fp["total"], fp["optimizer"], per_lm * max(flight - 2.0, 0.0),
                     2.0 * per_lm * layers_mb, 2.0 * layers_mb))
    return np.asarray(rows, dtype=np.float64)


def apply_memory_tier(model: ModelLike, par: ParallelLike, sb: SystemBatch,
                      hbm_fits: NDArray[np.bool_], hbm_reasons: tuple[str, ...]) -> TierEffect:
    """HBM peak, remote footprint, feasibility and per-iteration transfer time per system.

    Args:
        model, par: the workload and the resolved plan.
        sb: the B systems (``spec.memory`` read from ``sb.specs``).
        hbm_fits, hbm_reasons: :func:`simcore.memory.check_memory` without offload; kept
            for systems that offload nothing.
    """
    mem = [s.memory for s in sb.specs]
    oo = np.array([t.offload_optimizer for t in mem])[None, :]
    oa = np.array([t.offload_activations for t in mem])[None, :]
    tab = _stage_table(model, par)
    total, opt, act, act_bytes, act_acc = (tab[:, i:i + 1] for i in range(5))
    hbm = np.max(total - oo * opt - oa * act, axis=0)
    remote = np.max(oo * opt + oa * act, axis=0)
    moved = np.max(oo * 2.0 * opt + oa * act_bytes, axis=0)
    accesses = np.max(oo * 2.0 + oa * act_acc, axis=0)
    kind = [t.kind for t in mem]
    sharers = np.where([k == "pool" for k in kind], sb.num_gpus,
                       np.where([k == "per_node" for k in kind],
                                np.minimum(sb.gpus_per_node, sb.num_gpus), 1.0))
    bw = np.array([t.bandwidth_GBps * 1e9 for t in mem])
    lat = np.array([t.latency_ns * 1e-9 for t in mem])
    cap = np.array([t.capacity_gib * GIB for t in mem])
    off = oo[0] | oa[0]
    transfer = np.where(off, sharers * (accesses * lat + moved / np.where(off, bw, 1.0)), 0.0)
    fits_hbm = np.where(off, hbm <= sb.hbm_capacity_bytes, hbm_fits)
    fits_tier = ~off | (sharers * remote <= cap)
    reasons = []
    for b in range(sb.size):
        if not off[b]:
            reasons.append(hbm_reasons[b])
        elif not fits_hbm[b]:
            reasons.append(f"out of memory with {mem[b].kind} offload: {hbm[b] / GIB:.1f} GiB > "
                           f"{sb.hbm_capacity_bytes[b] / GIB:.1f} GiB HBM")
        elif not fits_tier[b]:
            reasons.append(f"memory.capacity_gib={mem[b].capacity_gib:g}: {mem[b].kind} tier "
                           f"needs {sharers[b] * remote[b] / GIB:.1f} GiB "
                           f"({sharers[b]:g} GPUs x {remote[b] / GIB:.1f} GiB offloaded)")
        else:
            reasons.append("")
    return TierEffect(fits=np.asarray(fits_hbm & fits_tier), peak_gib=hbm / GIB,
                      remote_gib=remote / GIB, transfer_s=transfer, reasons=tuple(reasons))
