"""Memory feasibility of a plan on a batch of systems: peak stage footprint vs HBM capacity.

The peak per-GPU footprint is the maximum over pipeline stages of
:func:`simcore.workloads.transformer.memory.footprint_bytes` (the first stage holds the most in-flight
micro-batches, the last the logits); a design point is infeasible when it exceeds the
accelerator's HBM capacity, with a one-line reason naming the stage and the largest parts
(DESIGN.md: infeasible points come back as a mask with a reason, never as an exception).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from simcore.hardware.batch import SystemBatch
from simcore.workloads.transformer.memory import ModelLike, ParallelLike, footprint_bytes

__all__ = ["check_memory", "peak_footprint"]

GIB = 2**30


def peak_footprint(model: ModelLike, parallel: ParallelLike) -> tuple[int, dict[str, int]]:
    """(stage, footprint) of the pipeline stage with the largest total."""
    stages = sorted({0, parallel.pp - 1} | set(range(min(parallel.pp, 4))))
    best = max(((s, footprint_bytes(model, parallel, s)) for s in stages),
               key=lambda item: item[1]["total"])
    return best


def check_memory(
    model: ModelLike, parallel: ParallelLike, sb: SystemBatch
) -> tuple[NDArray[np.bool_], NDArray[np.float64], tuple[str, ...]]:
    """Whether the plan fits on each system.

    Returns:
        fits: (B,) bool; peak_gib: (B,) peak per-GPU footprint in GiB (the same for all
        systems of the batch); reasons: one string per system ("" when it fits).
    """
    stage, fp = peak_footprint(model, parallel)
    peak = np.full(sb.size, fp["total"], dtype=np.float64)
    fits = peak <= sb.hbm_capacity_bytes
    parts = ", ".join(f"{k} {v / GIB:.1f}" for k, v in fp.items() if k != "total" and v > 0)
    reasons = tuple(
        "" if ok else (f"out of memory: stage {stage} needs {fp['total'] / GIB:.1f} GiB > "
                       f"{cap / GIB:.1f} GiB ({parts})")
        for ok, cap in zip(fits, sb.hbm_capacity_bytes, strict=True)
    )
    return fits, peak / GIB, reasons
