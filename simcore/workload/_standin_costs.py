"""Stand-in cost models: roofline compute and alpha-beta collectives, vectorized over B.

Used until calib's calibrated models (simcore.hardware / simcore.calibrated) land on main; the
signatures are the ones agreed in COORDINATION.md ("llm <-> calib cost-model call signatures"),
so switching is an import change. Every array argument has shape (U,) (one entry per distinct
op template), every result (U, B) seconds.

Models:
- GEMM / attention: roofline ``max(flops / (peak x eff), bytes / hbm_bw)`` with the flat
  efficiency ``calibration.gemm_efficiency_max`` (attention: ``attention_efficiency_max``).
- Collectives: ring alpha-beta (reference/peers-hardware-measurements.md, A.2: all-reduce moves
  ``2(n-1)/n`` of the buffer, reduce-scatter / all-gather ``(n-1)/n``, all-to-all ``(n-1)/n``).
  A group within one scale-up domain runs at the scale-up bus bandwidth; a group spanning
  nodes with k members per node runs its rings through k NICs per node, so the bus bandwidth
  is ``min(scaleup, k x scaleout)`` (NCCL multi-ring, B.9: ~350 GB/s busbw on 8x400G H200).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from simcore.hardware.batch import SystemBatch
from simcore.workload.graph import CommType

__all__ = ["attention_time_s", "collective_time_s", "gemm_time_s", "memory_bound_time_s",
           "p2p_time_s"]

FloatArray = NDArray[np.float64]

_BYTES = {"fp32": 4.0, "tf32": 4.0, "fp16": 2.0, "bf16": 2.0, "fp8": 1.0}


def _col(x: object) -> FloatArray:
    return np.asarray(x, dtype=np.float64).reshape(-1, 1)


def gemm_time_s(sb: SystemBatch, m: object, n: object, k: object, precision: str) -> FloatArray:
    """(U, B) time of GEMMs ``(m x k) @ (k x n)`` on one GPU."""
    m_, n_, k_ = _col(m), _col(n), _col(k)
    flops = 2.0 * m_ * n_ * k_
    elem = _BYTES[precision]
    traffic = elem * (m_ * k_ + k_ * n_ + m_ * n_)
    eff = sb.calib["gemm_efficiency_max"][None, :]
    t_flops = flops / (sb.peak(precision)[None, :] * eff)
    t_mem = traffic / (sb.hbm_bandwidth_Bps[None, :] * sb.calib["hbm_efficiency"][None, :])
    overhead = sb.calib["kernel_overhead_us"][None, :] * 1e-6
    return np.maximum(t_flops, t_mem) + overhead


def attention_time_s(
    sb: SystemBatch,
    batch_heads: object,
    seq_q: object,
    seq_kv: object,
    head_dim: object,
    causal: bool,
    precision: str,
) -> FloatArray:
    """(U, B) forward time of a fused (flash) attention core: QK^T and AV."""
    flops = 4.0 * _col(batch_heads) * _col(seq_q) * _col(seq_kv) * _col(head_dim)
    if causal:
        flops = flops * 0.5
    eff = sb.calib["attention_efficiency_max"][None, :]
    overhead = sb.calib["kernel_overhead_us"][None, :] * 1e-6
    return np.asarray(flops / (sb.peak(precision)[None, :] * eff) + overhead)


def memory_bound_time_s(sb: SystemBatch, nbytes: object) -> FloatArray:
    """(U, B) time of elementwise kernels moving ``nbytes`` (read + write)."""
    bw = sb.hbm_bandwidth_Bps[None, :] * sb.calib["hbm_efficiency"][None, :]
    overhead = sb.calib["kernel_overhead_us"][None, :] * 1e-6
    return np.asarray(_col(nbytes) / bw + overhead)


def _factor(comm_type: FloatArray, n: FloatArray) -> FloatArray:
    frac = (n - 1.0) / n
    is_ar = comm_type == float(CommType.ALL_REDUCE)
    return np.where(is_ar, 2.0 * frac, frac)


def collective_time_s(
    sb: SystemBatch, comm_type: object, nbytes: object, group_size: object, ranks_per_node: object
) -> FloatArray:
    """(U, B) time of ring collectives on a buffer of ``nbytes`` per rank."""
    ct, size, n, k = _col(comm_type), _col(nbytes), _col(group_size), _col(ranks_per_node)
    up = sb.scaleup_bandwidth_Bps[None, :] * sb.calib["scaleup_efficiency"][None, :]
    out = sb.scaleout_bandwidth_Bps[None, :] * sb.calib["scaleout_efficiency"][None, :]
    inside = k >= n
    busbw = np.where(inside, up, np.minimum(up, k * out))
    hops = np.where(inside, sb.scaleup_latency_s[None, :], sb.scaleout_latency_s[None, :])
    steps = np.where(ct == float(CommType.ALL_REDUCE), 2.0 * (n - 1.0), n - 1.0)
    base = sb.calib["collective_base_latency_us"][None, :] * 1e-6
    t = _factor(ct, n) * size / busbw + steps * hops + base
    return np.asarray(np.where(n <= 1.0, 0.0, t))


def p2p_time_s(sb: SystemBatch, nbytes: object, cross_node: object) -> FloatArray:
    """(U, B) time of a point-to-point send of ``nbytes`` (pipeline activations)."""
    size = _col(nbytes)
    cross = np.asarray(cross_node, dtype=bool).reshape(-1, 1)
    bw = np.where(cross, sb.scaleout_bandwidth_Bps[None, :], sb.scaleup_bandwidth_Bps[None, :])
    lat = np.where(cross, sb.scaleout_latency_s[None, :], sb.scaleup_latency_s[None, :])
    eff = sb.calib["p2p_efficiency"][None, :]
    return np.asarray(size / (bw * eff) + lat)
