"""Memory feasibility of a plan on a batch of systems: stage footprints vs HBM capacity per pool.

The peak per-GPU footprint is the maximum over pipeline stages of
:func:`simcore.workloads.transformer.memory.footprint_bytes` (the first stage holds the most in-flight
micro-batches, the last the logits). Each stage runs on the devices of one pool
(``pool_of_stage``; by default every stage on pool 0) and must fit that pool's HBM capacity;
a design point is infeasible when some stage does not, with a one-line reason naming the stage,
its pool and the largest parts (DESIGN.md: infeasible points come back as a mask with a reason,
never as an exception).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from numpy.typing import NDArray

from simcore.errors import InputError
from simcore.hardware.batch import SystemBatch
from simcore.workloads.transformer.memory import (
    ModelLike,
    ParallelLike,
    footprint_bytes,
    peak_footprint,
)

__all__ = ["check_capacity", "check_memory", "check_stage_pools", "peak_footprint"]

GIB = 2**30

PoolOfStage = Sequence[int] | Callable[[int], int]


def _parts(fp: dict[str, int]) -> str:
    return ", ".join(f"{k} {v / GIB:.1f}" for k, v in fp.items() if k != "total" and v > 0)


def check_memory(
    model: ModelLike, parallel: ParallelLike, sb: SystemBatch,
    pool_of_stage: PoolOfStage | None = None,
) -> tuple[NDArray[np.bool_], NDArray[np.float64], tuple[str, ...]]:
    """Whether the plan fits on each system.

    Args:
        model, parallel: the workload and its resolved plan.
        sb: the B systems (D pools each).
        pool_of_stage: the pool that runs each pipeline stage, a (pp,) sequence or a function
            of the stage; None = every stage on pool 0.

    Returns:
        fits: (B,) bool; peak_gib: (B,) peak per-GPU footprint in GiB (the same for all
        systems of the batch); reasons: one string per system ("" when it fits).

    Raises:
        InputError: ``pool_of_stage`` names a pool the systems do not have.
    """
    if pool_of_stage is None:
        return _check_one_pool(model, parallel, sb)
    pools = np.array([pool_of_stage(s) if callable(pool_of_stage) else pool_of_stage[s]
                      for s in range(parallel.pp)], dtype=np.int64)
    bad = (pools < 0) | (pools >= sb.num_pools)
    if bad.any():
        s = int(np.argmax(bad))
        raise InputError(f"pool_of_stage[{s}]", int(pools[s]),
                         f"must be a pool index in [0, {sb.num_pools})")
    fps = [footprint_bytes(model, parallel, s) for s in range(parallel.pp)]
    need = np.array([fp["total"] for fp in fps], dtype=np.float64)
    cap = sb.pool_hbm_capacity_bytes[pools]  # (pp, B): each stage's pool capacity
    fits = np.all(need[:, None] <= cap, axis=0)
    ratio = need[:, None] / cap
    worst = np.argmax(ratio, axis=0)  # per system, the stage closest to (or over) its capacity
    reasons = []
    for b in range(sb.size):
        s = int(worst[b])
        d = int(pools[s])
        acc = sb.specs[b].devices[d].accelerator
        name = acc.name if acc is not None else "?"
        reasons.append("" if fits[b] else (
            f"out of memory: stage {s} on pool {d} ({name}) needs {need[s] / GIB:.1f} GiB > "
            f"{cap[s, b] / GIB:.1f} GiB ({_parts(fps[s])})"))
    return fits, np.full(sb.size, need.max() / GIB), tuple(reasons)


def _check_one_pool(
    model: ModelLike, parallel: ParallelLike, sb: SystemBatch
) -> tuple[NDArray[np.bool_], NDArray[np.float64], tuple[str, ...]]:
    return check_capacity(*peak_footprint(model, parallel), sb)


def check_capacity(stage: int, fp: dict[str, int], sb: SystemBatch
                   ) -> tuple[NDArray[np.bool_], NDArray[np.float64], tuple[str, ...]]:
    """:func:`check_memory` on one pool for the peak footprint ``fp`` (bytes by part, with
    ``total``) of pipeline stage ``stage``, whatever the workload family."""
    peak = np.full(sb.size, fp["total"], dtype=np.float64)
    fits = peak <= sb.hbm_capacity_bytes
    parts = _parts(fp)
    reasons = tuple(
        "" if ok else (f"out of memory: stage {stage} needs {fp['total'] / GIB:.1f} GiB > "
                       f"{cap / GIB:.1f} GiB ({parts})")
        for ok, cap in zip(fits, sb.hbm_capacity_bytes, strict=True)
    )
    return fits, peak / GIB, reasons


#: footprint parts that follow a batch share (activations of the device's micro-batch share)
_BATCH_PARTS = ("activations", "recompute_workspace")


def _scaled_need(footprints: Sequence[dict[str, int]], shares: NDArray[np.float64] | None,
                 tp_split: NDArray[np.bool_] | None, shape: tuple[int, int, int]
                 ) -> NDArray[np.float64]:
    """(P, D, B) bytes per device: a stage's footprint with its parts scaled by the device's
    share (batch share: activations and the recompute workspace; tensor-shard ratio: every
    part, activations replicated over the TP group included, an upper estimate)."""
    total = np.array([fp["total"] for fp in footprints], dtype=np.float64)[:, None, None]
    if shares is None:
        return np.broadcast_to(total, shape).copy()
    batch = np.array([sum(fp.get(k, 0) for k in _BATCH_PARTS) for fp in footprints],
                     dtype=np.float64)[:, None, None]
    r = np.asarray(shares, dtype=np.float64)
    split = (np.zeros(shape[0], dtype=bool) if tp_split is None
             else np.asarray(tp_split, dtype=bool))[:, None, None]
    return np.asarray(np.where(split, total * r, total + batch * (r - 1.0)))


def check_stage_pools(footprints: Sequence[dict[str, int]], stage_pools: NDArray[np.int64],
                      sb: SystemBatch, shares: NDArray[np.float64] | None = None,
                      tp_split: NDArray[np.bool_] | None = None,
                      ) -> tuple[NDArray[np.bool_], NDArray[np.float64], tuple[str, ...]]:
    """Memory on a cluster of mixed device pools: every pool holding ranks of a stage must fit
    that stage's footprint, scaled by its devices' share of the work, in its own HBM.

    Args:
        footprints: per pipeline stage, bytes per GPU by part with a ``total`` entry (any
            workload family's ``footprint``) at the even split.
        stage_pools: (P, D) ranks of each stage on each pool.
        sb: the B systems (D pools each).
        shares: (P, D, B) work of one device of each pool relative to the even split
            (:func:`simcore.engine.devices.stage_work_shares`; None: even).
        tp_split: (P,) stages whose shares are tensor-shard ratios (None: batch shares).

    Returns:
        As :func:`check_memory` (the peak over the devices that hold a stage); a reason names the
        stage and the device (pool, accelerator) that does not fit, the one most over its
        capacity.
    """
    on = np.asarray(stage_pools) > 0  # (P, D)
    cap = sb.pool_hbm_capacity_bytes  # (D, B)
    need = _scaled_need(footprints, shares, tp_split, (on.shape[0], on.shape[1], sb.size))
    ratio = np.where(on[:, :, None], need / cap[None], 0.0)  # (P, D, B)
    flat = ratio.reshape(-1, sb.size)
    fits = np.all(flat <= 1.0, axis=0)
    worst = np.argmax(flat, axis=0)
    peak = np.where(on[:, :, None], need, 0.0).max(axis=(0, 1))  # (B,)
    reasons = []
    for b in range(sb.size):
        s, d = divmod(int(worst[b]), on.shape[1])
        acc = sb.specs[b].devices[d].accelerator
        name = acc.name if acc is not None else "?"
        reasons.append("" if fits[b] else (
            f"out of memory: stage {s} on pool {d} ({name}) needs {need[s, d, b] / GIB:.1f} GiB "
            f"> {cap[d, b] / GIB:.1f} GiB ({_parts(footprints[s])})"))
    return fits, peak / GIB, tuple(reasons)
