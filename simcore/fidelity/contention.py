"""Endpoint contention between collectives and compute (``system.endpoint``; ACE, Rashidi et al.
ISCA 2021, reference/methods-hap-ace-echo.md §2.3 (a)-(c)).

A collective moving ``wire`` network bytes per GPU in ``t`` seconds drives ``R = wire / t``. Its
HBM traffic is ``mu R`` with ``mu`` per collective type (:func:`hbm_per_wire_byte`). On a
multi-dimensional fabric (``SystemSpec.scaleout_dims``) ``t`` is the hierarchical collective's,
whose chunks keep every dimension busy at once, so ``R`` is the sum of the dimensions' rates and
the endpoint's SMs and HBM bound that sum; every phase's output lands in HBM (ACE §2.3(a)), so
the endpoint's HBM bytes are ``mu`` times the bytes of every phase (a multi-phase all-to-all
moves more: :func:`stacked_wire_fraction`) while ACE still moves the payload once:

* ``endpoint`` (NCCL-like, on the accelerator): all-reduce ``(mu_reduce + mu_gather) / 2`` (half
  its steps reduce, half copy), reduce-scatter ``mu_reduce``, all-gather / all-to-all
  ``mu_gather``;
* ``ace``: the payload is read into ACE's SRAM once and the result written once: HBM bytes
  all-reduce ``2D``, reduce-scatter ``D + D/n``, all-gather ``D/n + D``, all-to-all ``2D``, over
  the wire bytes of the type (``mu ~ 1``);
* ``ideal``: 0.

**Kernel classes.** ``phi`` is the share of a design point's compute time spent in memory-bound
kernels (the ``mem`` kernels: batch norm, activations, residual additions, pooling, lookups,
optimizer passes; :func:`memory_bound_fraction`, from the calibrated kernel times of every
compute template of the graph); the rest (GEMMs, convolutions as implicit GEMMs, attention) is
compute-bound. ACE §2.3(c) is a roofline per kernel: a compute-bound kernel beside a collective
runs on ``U - k`` SMs, a memory-bound one on ``M - mu R`` of the HBM bandwidth.

**Collective slowdown** (b): the collective gets at most ``comm_hbm_share`` of the usable HBM
bandwidth ``M`` while compute runs beside it; with ``hbm_priority: compute`` (CompOpt, §2.3(d):
"the HBM bandwidth left after compute demand") memory-bound kernels keep the HBM, so the
collective moves data only while compute-bound kernels run: ``(1 - phi) share M``. It runs at
``min(R, hbm / mu)``; with ACE also at most ``min(ace_alu_GBps, ace_link_GBps)``; on the
``endpoint`` engine also at most what its SMs can drive, ``k r = comm_sm_fraction * sms *
collective_GBps_per_sm`` (ACE §2.3(b)): the template time is stretched by
``max(1, mu R / hbm, R / ace_rate)`` (ACE) or ``max(1, mu R / hbm, R / (k r))`` (endpoint).
**Compute slowdown** (c): beside a collective, compute-bound kernels keep ``1 - comm_sm_fraction``
of the SMs (``endpoint``; ACE and ideal: all): ``s_sm = 1 / (1 - f_sm)``; memory-bound kernels keep
``M - H`` of the HBM bandwidth, ``H`` the HBM bytes/s the overlapped collectives move while in
flight (:func:`overlapped_hbm_Bps`: their ``mu`` x network bytes over their stretched time, so a
collective waiting on a slow scale-out phase takes little HBM, while it holds its SMs all along,
as NCCL's kernels do): ``s_hbm = M / (M - H)``, 1 with ``hbm_priority: compute``. The stage's
overlapped compute is stretched by ``phi (s_hbm - 1) + (1 - phi) (s_sm - 1)``. Without the graph
(``phi`` and ``H`` unknown) the worse roof, ``max(s_sm, s_hbm) - 1`` with ``H`` of a scale-up
collective (``mu min(line, hbm / mu, k r)``; ACE: its own rate), stands for every kernel.
Known simplification: the fluid model averages per design point (one slowdown for a stage's
overlapped compute, one HBM rate for its overlapped collectives), not per kernel pair in time.
The ``nccl`` engine keeps the fitted overlap slowdown (:mod:`simcore.fidelity.overlap`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from simcore.engine.evaluate import CompiledWorkload, kernel_durations
from simcore.hardware.batch import SystemBatch
from simcore.ir.graph import CommType
from simcore.ir.ops import COMPUTE
from simcore.network.collectives.calibrated_algorithms import spanned_sizes
from simcore.specs.endpoint import EndpointSpec
from simcore.specs.system import SystemSpec

__all__ = ["collective_stretch", "compute_slowdown", "engines", "hbm_per_wire_byte",
           "memory_bound_fraction", "overlapped_hbm_Bps", "stacked_wire_fraction"]

FloatArray = NDArray[np.float64]
_REDUCE = (CommType.REDUCE_SCATTER, CommType.REDUCE_SCATTER_BLOCK)


def engines(sb: SystemBatch) -> list[EndpointSpec]:
    """The endpoint spec of every system of the batch."""
    return [s.endpoint for s in sb.specs]


def wire_fraction(comm_type: int, n: float) -> float:
    """Network bytes per GPU over the buffer D (ring-optimal closed forms)."""
    if n <= 1:
        return 0.0
    return (2.0 if comm_type == CommType.ALL_REDUCE else 1.0) * (n - 1) / n


def stacked_wire_fraction(comm_type: int, n: float, k: float, system: SystemSpec) -> float:
    """Network bytes per GPU over the buffer D on ``system``: :func:`wire_fraction`, except an
    all-to-all across stacked inter-package dimensions (``SystemSpec.scaleout_dims``), which
    runs one phase of D per spanned dimension (ASTRA-sim's baseline, reference/
    astra-sim-and-chakra.md §1.2): ``(k - 1) / n`` inside the package plus ``(s_j - 1) / s_j``
    per dimension spanned by ``s_j`` ranks. Reductions keep the closed form: a hierarchical
    all-reduce's phases sum to ``2 (n - 1) / n`` D, the 1-D ring's."""
    k = max(1.0, min(k, n))
    if comm_type != CommType.ALL_TO_ALL or not system.scaleout_dims or n <= k:
        return wire_fraction(comm_type, n)
    sizes = tuple(d.size for d in system.scaleout_dims)
    takes = spanned_sizes(sizes, np.array(float(np.ceil(n / k))))
    return (k - 1.0) / n + sum(float((t - 1.0) / t) for t in takes)


def hbm_per_wire_byte(ep: EndpointSpec, comm_type: int, n: float,
                      wire: float | None = None) -> float:
    """HBM bytes per network byte (``mu``) of a collective of ``n`` ranks on engine ``ep``
    (``wire``: its network bytes per D, default :func:`wire_fraction`; ACE moves the payload
    through HBM once whatever the wire bytes, the endpoint ``mu`` times every network byte)."""
    wire = wire_fraction(comm_type, n) if wire is None else wire
    if wire == 0.0 or ep.collective_engine == "ideal":
        return 0.0
    if ep.collective_engine == "ace":
        hbm = {CommType.ALL_REDUCE: 2.0, CommType.ALL_GATHER: 1.0 + 1.0 / n}.get(
            CommType(comm_type), 1.0 + 1.0 / n if comm_type in _REDUCE else 2.0)
        return hbm / wire
    red, gat = ep.hbm_bytes_per_reduce_byte, ep.hbm_bytes_per_gather_byte
    if comm_type == CommType.ALL_REDUCE:
        return (red + gat) / 2.0
    return red if comm_type in _REDUCE else gat


def _usable_hbm(sb: SystemBatch) -> FloatArray:
    return np.asarray(sb.hbm_bandwidth_Bps * sb.calib["hbm_efficiency"])


def memory_bound_fraction(cw: CompiledWorkload, sb: SystemBatch, precision: str) -> FloatArray:
    """(B,) share of the graph's compute time spent in memory-bound (``mem``) kernels, from the
    calibrated kernel times on pool 0's devices (every compute template, every stage)."""
    ops = cw.ops
    kd = kernel_durations(ops, sb, precision)  # (K, B)
    is_mem = np.array([cost == "mem" for cost, _ in ops.kernels], dtype=bool)
    counts = np.asarray(cw.stage_counts).sum(axis=0) * (cw.template_kind == COMPUTE)  # (U,)
    w = counts @ ops.weights()  # (K,) kernel runs per iteration on the compute streams
    total = w @ kd
    mem = (w * is_mem) @ kd
    return np.divide(mem, total, out=np.zeros_like(total), where=total > 0)


def _comm_hbm(sb: SystemBatch, phi: FloatArray | None) -> FloatArray:
    """(B,) HBM bandwidth a collective can use beside compute (see the module docstring)."""
    eps = engines(sb)
    share = np.array([e.comm_hbm_share for e in eps]) * _usable_hbm(sb)
    if phi is None:
        return share
    compute_first = np.array([e.hbm_priority == "compute" for e in eps])
    return np.where(compute_first, share * np.maximum(1.0 - phi, 1e-6), share)


def _collective_templates(cw: CompiledWorkload, eps: list[EndpointSpec],
                          systems: Sequence[SystemSpec] | None = None
                          ) -> list[tuple[int, float | FloatArray, FloatArray]]:
    """(template, network bytes per GPU, (B,) HBM bytes per network byte) of every collective;
    with ``systems`` the bytes of each system's topology (:func:`stacked_wire_fraction`, a (B,)
    array where some system stacks inter-package dimensions)."""
    ops = cw.ops
    out: list[tuple[int, float | FloatArray, FloatArray]] = []
    stacked = systems is not None and any(s.scaleout_dims for s in systems)
    for t, parts in enumerate(ops.templates):
        if ops.template_kind[t] == COMPUTE or len(parts) != 1:
            continue
        (kid, weight), = parts
        cost, args = ops.kernels[kid]
        if cost != "coll":
            continue
        comm, nbytes, n = int(args[0]), args[1] * weight, args[2]
        if stacked and systems is not None:
            frac = np.array([stacked_wire_fraction(comm, n, args[3], s) for s in systems])
            if frac.max() > 0:
                out.append((t, frac * nbytes, np.array([
                    hbm_per_wire_byte(e, comm, n, float(f)) for e, f in zip(eps, frac,
                                                                           strict=True)])))
            continue
        wire = wire_fraction(comm, n) * nbytes
        if wire > 0:
            out.append((t, wire, np.array([hbm_per_wire_byte(e, comm, n) for e in eps])))
    return out


def collective_stretch(cw: CompiledWorkload, tdur: FloatArray, sb: SystemBatch,
                       phi: FloatArray | None = None) -> FloatArray:
    """(U, B) ``tdur`` with every collective template slowed by its endpoint's limits
    (``phi``: :func:`memory_bound_fraction`, for ``hbm_priority: compute``)."""
    eps = engines(sb)
    if all(e.collective_engine == "nccl" for e in eps):
        return tdur
    out = tdur.copy()
    share = _comm_hbm(sb, phi)
    ace_rate = np.array([min(e.ace_alu_GBps, e.ace_link_GBps) * 1e9 for e in eps])
    sm_rate = np.array([e.sm_collective_Bps if e.collective_engine == "endpoint" else np.inf
                        for e in eps])
    is_ace = np.array([e.collective_engine == "ace" for e in eps])
    active = np.array([e.collective_engine in ("endpoint", "ace") for e in eps])
    for t, wire, mu in _collective_templates(cw, eps, sb.specs):
        rate = wire / np.maximum(tdur[t], 1e-30)
        factor = np.maximum(np.maximum(1.0, mu * rate / share), rate / sm_rate)
        factor = np.where(is_ace, np.maximum(factor, rate / ace_rate), factor)
        out[t] = np.where(active, tdur[t] * factor, tdur[t])
    return out


def overlapped_hbm_Bps(cw: CompiledWorkload, tdur: FloatArray, sb: SystemBatch) -> FloatArray:
    """(B,) HBM bytes/s the collectives that overlap compute move while in flight: their HBM
    bytes (``mu`` x network bytes) over their time (``tdur``, already stretched), summed over
    every overlappable collective of every stage; 0 when none overlaps."""
    eps = engines(sb)
    counts = np.asarray(cw.overlap_counts).sum(axis=0)  # (U,)
    hbm = np.zeros(sb.size)
    busy = np.zeros(sb.size)
    for t, wire, mu in _collective_templates(cw, eps, sb.specs):
        if counts[t] > 0:
            hbm += counts[t] * mu * wire
            busy += counts[t] * tdur[t]
    return np.divide(hbm, busy, out=np.zeros_like(hbm), where=busy > 0)


def compute_slowdown(sb: SystemBatch, phi: FloatArray | None = None,
                     hbm_Bps: FloatArray | None = None) -> FloatArray:
    """(B,) fractional slowdown of compute beside a collective (engines other than ``nccl``);
    ``phi`` (:func:`memory_bound_fraction`) weights the SM and HBM roofs by kernel class
    (None: the worse roof for every kernel); ``hbm_Bps`` (:func:`overlapped_hbm_Bps`) is the
    HBM the overlapped collectives move (None: a scale-up collective's, an upper bound)."""
    eps = engines(sb)
    m = _usable_hbm(sb)
    hbm = _comm_hbm(sb, phi)
    line = sb.scaleup_bandwidth_Bps * sb.calib["scaleup_efficiency"]
    out = np.zeros(sb.size)
    for j, e in enumerate(eps):
        if e.collective_engine in ("ideal", "nccl"):
            continue
        n = float(sb.gpus_per_node[j])
        mu = hbm_per_wire_byte(e, int(CommType.ALL_REDUCE), max(n, 2.0))
        rate = min(line[j], hbm[j] / mu)
        sm = 1.0
        if e.collective_engine == "ace":
            rate = min(rate, min(e.ace_alu_GBps, e.ace_link_GBps) * 1e9)
        else:
            rate = min(rate, e.sm_collective_Bps)
            sm = 1.0 / (1.0 - e.comm_sm_fraction)
        taken = mu * rate if hbm_Bps is None else min(hbm_Bps[j], hbm[j])
        mem = 1.0 if e.hbm_priority == "compute" else m[j] / (m[j] - taken)
        if phi is None:
            out[j] = max(sm, mem) - 1.0
        else:
            out[j] = phi[j] * (mem - 1.0) + (1.0 - phi[j]) * (sm - 1.0)
    return out
