"""Hardware layer: the batch of systems as arrays and calibrated kernel-time models.

:class:`~simcore.hardware.batch.SystemBatch` stacks B systems; :mod:`simcore.hardware.compute`
gives GEMM, attention and memory-bound kernel times as (U, B) arrays on one device pool, and
(D, U, B) over all pools with :func:`~simcore.hardware.compute.per_pool`.
"""

from __future__ import annotations

from simcore.hardware.batch import SystemBatch, gather_by_pool
from simcore.hardware.compute import (
    ELEMENT_BYTES,
    attention_time_s,
    gemm_efficiency,
    gemm_time_s,
    memory_bound_time_s,
    per_pool,
)

__all__ = [
    "ELEMENT_BYTES",
    "SystemBatch",
    "attention_time_s",
    "gather_by_pool",
    "gemm_efficiency",
    "gemm_time_s",
    "memory_bound_time_s",
    "per_pool",
]
