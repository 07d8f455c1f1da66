"""Slowdown of compute kernels that run while a collective is in flight (vectorized).

Model: NCCL-style collectives run on the GPU itself, so they take streaming multiprocessors and
HBM bandwidth away from the compute they overlap with (ACE, reference/methods-hap-ace-echo.md
§2.3(c); Echo measured GEMM 1.27x and elementwise 1.5-1.6x beside a 25 MB all-reduce, §3.4).

* A compute-bound kernel loses the SMs the communication kernels occupy:
  ``factor = 1 + overlap_compute_slowdown``.
* A memory-bound kernel shares HBM with the collective, which moves
  ``comm_hbm_bytes_per_net_byte`` (ACE's mu, 3-5 for NCCL) bytes of HBM traffic per network
  byte at network rate ``R``: ``factor = M / (M - mu * R)`` with ``M`` the usable HBM bandwidth
  (the collective never takes more than half of it), and at least the SM slowdown.

Inputs: ``sb`` (B systems); results (U, B) multiplicative factors >= 1 on the isolated time.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from simcore.hardware.batch import SystemBatch

__all__ = ["overlap_slowdown"]

FloatArray = NDArray[np.float64]


def overlap_slowdown(
    sb: SystemBatch, memory_bound: object = False, comm_rate_Bps: object = 0.0
) -> FloatArray:
    """(U, B) factor by which an overlapped compute kernel is slower than in isolation.

    Args:
        sb: the B systems.
        memory_bound: whether each kernel is limited by HBM bandwidth, scalar or (U,) bool.
        comm_rate_Bps: network bytes/s the overlapping collective moves per GPU (0: use the
            scale-up line rate, the worst case), scalar or (U,).
    """
    mem = np.asarray(memory_bound, dtype=bool).reshape(-1, 1)
    rate = np.asarray(comm_rate_Bps, dtype=np.float64).reshape(-1, 1)
    rate = np.where(rate > 0.0, rate, sb.scaleup_bandwidth_Bps[None, :])
    sm = 1.0 + sb.calib["overlap_compute_slowdown"][None, :]
    hbm = (sb.hbm_bandwidth_Bps * sb.calib["hbm_efficiency"])[None, :]
    taken = np.minimum(sb.calib["comm_hbm_bytes_per_net_byte"][None, :] * rate, 0.5 * hbm)
    return np.asarray(np.where(mem, np.maximum(sm, hbm / (hbm - taken)), sm))
