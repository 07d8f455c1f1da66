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
from simcore.workloads.transformer.memory import ModelLike, ParallelLike, peak_footprint

__all__ = ["check_capacity", "check_memory", "peak_footprint"]

GIB = 2**30


def check_memory(
    model: ModelLike, parallel: ParallelLike, sb: SystemBatch
) -> tuple[NDArray[np.bool_], NDArray[np.float64], tuple[str, ...]]:
    """Whether the plan fits on each system.

    Returns:
        fits: (B,) bool; peak_gib: (B,) peak per-GPU footprint in GiB (the same for all
        systems of the batch); reasons: one string per system ("" when it fits).
    """
    return check_capacity(*peak_footprint(model, parallel), sb)


def check_capacity(stage: int, fp: dict[str, int], sb: SystemBatch
                   ) -> tuple[NDArray[np.bool_], NDArray[np.float64], tuple[str, ...]]:
    """:func:`check_memory` for the peak footprint ``fp`` (bytes by part, with ``total``) of
    pipeline stage ``stage``, whatever the workload family."""
    peak = np.full(sb.size, fp["total"], dtype=np.float64)
    fits = peak <= sb.hbm_capacity_bytes
    parts = ", ".join(f"{k} {v / GIB:.1f}" for k, v in fp.items() if k != "total" and v > 0)
    reasons = tuple(
        "" if ok else (f"out of memory: stage {stage} needs {fp['total'] / GIB:.1f} GiB > "
                       f"{cap / GIB:.1f} GiB ({parts})")
        for ok, cap in zip(fits, sb.hbm_capacity_bytes, strict=True)
    )
    return fits, peak / GIB, reasons
