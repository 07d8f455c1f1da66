"""Calibrated kernel-time models: GEMM, fused attention, memory-bound kernels (vectorized).

Model (DESIGN.md, "Two fidelity modes", calibrated mode):

* **GEMM** ``(m x k) @ (k x n)``, ``2 m n k`` FLOPs: a roofline whose compute roof depends on
  the shape, ``eff = gemm_efficiency_max * prod_{d in m,n,k} d / (d + gemm_half_dim)``: a
  dimension comparable to the tile size wastes part of every wave (tile / wave quantization),
  so small and skinny GEMMs run further below peak (measured A100 GEMM throughput,
  reference/peers-hardware-measurements.md A.3: 64x12288^2 -> 102 TFLOP/s, 8192x12288^2 -> 287,
  8192x256^2 -> 30). The memory roof is ``elem_bytes (mk + kn + mn) / (hbm_bw * hbm_efficiency)``;
  the time is ``max(compute, memory) + kernel_overhead_us``. Inside a training step the compute
  roofs are scaled by ``sustained_compute_fraction`` (sustained clocks and launch gaps: the
  microbenchmark runs at boost clock).
* **Attention** (flash-attention style fused core ``softmax(QK^T) V``): ``4 * bh * s_q * s_kv * d``
  FLOPs (half when causal), at ``attention_efficiency_max * s_kv / (s_kv + attention_half_seq)
  * d / (d + gemm_half_dim)`` of peak: short sequences and narrow heads cannot fill the tensor
  cores (same quantization argument as the GEMM). Megatron's unfused core is not this kernel:
  the generator emits it as batched GEMMs plus memory-bound softmax / dropout
  (``parallel.flash_attention = false``).
* **Low precision (fp8, fp4)** (Transformer Engine recipe: only the Linear layers' GEMMs run in
  fp8 / NVFP4, the attention core and every elementwise kernel stay in bf16): a GEMM reaches
  ``fp8_gemm_efficiency_ratio`` (``fp4_gemm_efficiency_ratio``) times the bf16 efficiency of
  its shape at the low-precision peak, and pays a memory-bound cast of its two inputs
  (``fp8_extra_bytes_per_gemm_element`` bytes per input element: bf16 read + fp8 write, amax
  fused) before it; the fused attention core runs at the bf16 peak.
* **Launch floor**: no kernel is shorter than ``kernel_launch_floor_us`` (an eager framework's
  host dispatch pace; a software-stack value, conf/stack; fitted on vTrain's single-node
  Megatron-DeepSpeed runs of 0.35-1.3 B models, where it dominates).
* **Memory-bound kernels** (layer norm, softmax, GELU, dropout, bias, optimizer step): bytes
  read + written over ``hbm_bw * hbm_efficiency``, plus the kernel overhead.

Shapes: ``sb`` holds B systems; every shape argument is a scalar or a (U,) array (U distinct op
templates); results are (U, B) seconds, costed on the device of pool ``pool`` (default: the pool
``sb`` shows, pool 0 unless made by ``SystemBatch.pool``). :func:`per_pool` evaluates a kernel
model on every pool at once, (D, U, B); ``simcore.hardware.batch.gather_by_pool`` then picks
each template's pool. The fitted parameters live in ``CalibrationSpec``
(``scripts/fit_calibration.py``).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

from simcore.hardware.batch import SystemBatch
from simcore.hardware.batch import as_column as _col
from simcore.hardware.batch import as_row as _row

__all__ = [
    "ACTIVATION_BYTES",
    "ELEMENT_BYTES",
    "LOW_PRECISIONS",
    "per_pool",
    "attention_time_s",
    "gemm_efficiency",
    "gemm_time_s",
    "memory_bound_time_s",
]

FloatArray = NDArray[np.float64]

#: GEMM-only precisions (Transformer Engine recipes): attention and elementwise stay bf16
LOW_PRECISIONS = ("fp8", "fp4")
ELEMENT_BYTES = {"fp32": 4.0, "tf32": 4.0, "fp16": 2.0, "bf16": 2.0, "fp8": 1.0, "fp4": 0.5}
#: bytes of an activation or activation-gradient element between kernels and between GPUs:
#: the run's own width at 32 and 16 bits; bf16 under fp8 / fp4 (Transformer Engine casts only
#: the GEMM inputs, and the tensors the TP, CP, EP and PP collectives move stay bf16)
ACTIVATION_BYTES = {"fp32": 4.0, "tf32": 4.0, "fp16": 2.0, "bf16": 2.0, "fp8": 2.0, "fp4": 2.0}


def _on(sb: SystemBatch, pool: int | None) -> SystemBatch:
    return sb if pool is None else sb.pool(pool)


def per_pool(kernel: Callable[..., FloatArray], sb: SystemBatch, *args: object,
             **kwargs: object) -> FloatArray:
    """(D, U, B) seconds: ``kernel(sb, *args, pool=d, **kwargs)`` for every pool ``d``."""
    return np.stack([kernel(sb, *args, pool=d, **kwargs) for d in range(sb.num_pools)])


def _floor(sb: SystemBatch, t: FloatArray) -> FloatArray:
    """``max(t, kernel_launch_floor_us)``: the host's dispatch pace bounds short kernels."""
    return np.asarray(np.maximum(t, _row(sb.calib["kernel_launch_floor_us"]) * 1e-6))


def _quantization(dim: FloatArray, half: FloatArray) -> FloatArray:
    return dim / (dim + half)


def gemm_efficiency(sb: SystemBatch, m: object, n: object, k: object,
                    pool: int | None = None) -> FloatArray:
    """(U, B) fraction of dense peak a GEMM of shape m x n x k reaches when compute-bound."""
    sb = _on(sb, pool)
    half = _row(sb.calib["gemm_half_dim"])
    shape = _quantization(_col(m), half) * _quantization(_col(n), half)
    top = _row(sb.calib["gemm_efficiency_max"] * sb.calib["sustained_compute_fraction"])
    return top * shape * _quantization(_col(k), half)


def gemm_time_s(sb: SystemBatch, m: object, n: object, k: object, precision: str,
                pool: int | None = None) -> FloatArray:
    """(U, B) seconds for one GEMM ``(m x k) @ (k x n)`` on one GPU.

    Args:
        sb: the B systems.
        m, n, k: GEMM dimensions, scalars or (U,) arrays.
        precision: operand precision (``fp16``, ``bf16``, ``fp8``, ...).
        pool: the device pool that runs it (None: the pool ``sb`` shows).
    """
    sb = _on(sb, pool)
    m_, n_, k_ = _col(m), _col(n), _col(k)
    flops = 2.0 * m_ * n_ * k_
    eff = gemm_efficiency(sb, m_, n_, k_)
    hbm = _row(sb.hbm_bandwidth_Bps * sb.calib["hbm_efficiency"])
    cast = np.zeros_like(eff)
    if precision in LOW_PRECISIONS:
        eff = eff * _row(sb.calib[f"{precision}_gemm_efficiency_ratio"])
        cast = _row(sb.calib["fp8_extra_bytes_per_gemm_element"]) * (m_ * k_ + k_ * n_) / hbm
    t_compute = flops / (_row(sb.peak(precision)) * eff)
    traffic = ELEMENT_BYTES[precision] * (m_ * k_ + k_ * n_ + m_ * n_)
    t_memory = traffic / hbm
    t = np.maximum(t_compute, t_memory) + cast + _row(sb.calib["kernel_overhead_us"]) * 1e-6
    return _floor(sb, t)


def attention_time_s(
    sb: SystemBatch,
    batch_heads: object,
    seq_q: object,
    seq_kv: object,
    head_dim: object,
    causal: bool,
    precision: str,
    pool: int | None = None,
) -> FloatArray:
    """(U, B) seconds for the forward pass of a fused attention core on one GPU.

    Args:
        sb: the B systems.
        batch_heads: micro-batch x attention heads on this GPU.
        seq_q, seq_kv: query and key/value sequence lengths.
        head_dim: width of one head.
        causal: causal mask (half the score FLOPs are skipped).
        precision: operand precision.
        pool: the device pool that runs it (None: the pool ``sb`` shows).

    The backward pass of flash attention does 2.5x the forward FLOPs (five GEMM-like products
    instead of two) at the same efficiency; callers scale by 2.5.
    """
    sb = _on(sb, pool)
    s_kv, d = _col(seq_kv), _col(head_dim)
    flops = 4.0 * _col(batch_heads) * _col(seq_q) * s_kv * d
    if causal:
        flops = flops * 0.5
    eff = (
        _row(sb.calib["attention_efficiency_max"] * sb.calib["sustained_compute_fraction"])
        * _quantization(s_kv, _row(sb.calib["attention_half_seq"]))
        * _quantization(d, _row(sb.calib["gemm_half_dim"]))
    )
    core = "bf16" if precision in LOW_PRECISIONS else precision  # TE: attention in bf16
    t = flops / (_row(sb.peak(core)) * eff)
    return _floor(sb, np.asarray(t + _row(sb.calib["kernel_overhead_us"]) * 1e-6))


def memory_bound_time_s(sb: SystemBatch, nbytes: object, pool: int | None = None) -> FloatArray:
    """(U, B) seconds for elementwise / reduction kernels moving ``nbytes`` (read + write) on
    a device of ``pool`` (None: the pool ``sb`` shows)."""
    sb = _on(sb, pool)
    bw = _row(sb.hbm_bandwidth_Bps * sb.calib["hbm_efficiency"])
    return _floor(sb, np.asarray(_col(nbytes) / bw + _row(sb.calib["kernel_overhead_us"]) * 1e-6))
