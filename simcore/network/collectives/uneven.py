"""Collectives over uneven shards (HAP, Zhang et al. EuroSys 2024, Sec. 2.5.1;
reference/methods-hap-ace-echo.md §1.6).

NCCL's all-gather and reduce-scatter need equal shards. With device ``d`` holding ``s_d`` of a
tensor of ``S = sum_d s_d`` bytes over ``n`` devices, HAP runs them one of two ways:

* **padded**: every shard padded to ``max_d s_d``, then the NCCL collective on ``n max_d s_d``
  bytes: the bandwidth term grows by ``n max_d s_d / S = max_d r_d`` (``r_d = n s_d / S``, the
  shard relative to an even split);
* **grouped** broadcast / reduce: one broadcast (reduce) per device in one NCCL group call,
  ``S`` bytes at the lower algorithm bandwidth HAP measured for grouped calls (its example
  cluster, §1.4: all-gather 9.15 vs 9.46 GB/s, reduce-scatter 8.76 vs 9.74 GB/s): the
  bandwidth term grows by ``1 / efficiency``.

The cheaper one is used (HAP's rule, §1.6 [recon]: grouped when ``max_d r_d`` exceeds the
efficiency ratio). An all-reduce of partial sums (``Reduce -> Identity``) carries the full tensor
whatever the shards: factor 1.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from simcore.ir.graph import CommType

__all__ = ["GROUPED_AG_EFFICIENCY", "GROUPED_RS_EFFICIENCY", "grouped_efficiency",
           "uneven_bandwidth_factor"]

FloatArray = NDArray[np.float64]

#: algorithm bandwidth of HAP's grouped call over the NCCL collective's (reference §1.4)
GROUPED_AG_EFFICIENCY = 9.15 / 9.46
GROUPED_RS_EFFICIENCY = 8.76 / 9.74
_RS = (int(CommType.REDUCE_SCATTER), int(CommType.REDUCE_SCATTER_BLOCK))


def grouped_efficiency(comm_type: int) -> float:
    """Grouped-call efficiency of an all-gather or reduce-scatter (1.0 for other types)."""
    if int(comm_type) == int(CommType.ALL_GATHER):
        return GROUPED_AG_EFFICIENCY
    if int(comm_type) in _RS:
        return GROUPED_RS_EFFICIENCY
    return 1.0


def uneven_bandwidth_factor(comm_type: int, max_ratio: object) -> FloatArray:
    """Factor on the bandwidth term of a collective whose shards are uneven, the largest being
    ``max_ratio`` times the even shard: ``min(max_ratio, 1 / efficiency)`` for all-gather and
    reduce-scatter (padded or grouped, the cheaper), 1 for the others."""
    r = np.asarray(max_ratio, dtype=np.float64)
    eff = grouped_efficiency(comm_type)
    if eff == 1.0:
        return np.ones_like(r)
    return np.asarray(np.minimum(np.maximum(r, 1.0), 1.0 / eff))
