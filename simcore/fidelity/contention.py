"""Endpoint contention between collectives and compute (``system.endpoint``; ACE, Rashidi et al.
ISCA 2021, reference/methods-hap-ace-echo.md §2.3 (a)-(c)).

A collective moving ``wire`` network bytes per GPU in ``t`` seconds drives ``R = wire / t``. Its
HBM traffic is ``mu R`` with ``mu`` per collective type (:func:`hbm_per_wire_byte`):

* ``endpoint`` (NCCL-like, on the accelerator): all-reduce ``(mu_reduce + mu_gather) / 2`` (half
  its steps reduce, half copy), reduce-scatter ``mu_reduce``, all-gather / all-to-all
  ``mu_gather``;
* ``ace``: the payload is read into ACE's SRAM once and the result written once: HBM bytes
  all-reduce ``2D``, reduce-scatter ``D + D/n``, all-gather ``D/n + D``, all-to-all ``2D``, over
  the wire bytes of the type (``mu ~ 1``);
* ``ideal``: 0.

**Collective slowdown** (b): the collective gets at most ``comm_hbm_share`` of the usable HBM
bandwidth ``M`` while compute runs beside it, so it runs at ``min(R, share M / mu)``; with ACE
also at most ``min(ace_alu_GBps, ace_link_GBps)``; on the ``endpoint`` engine also at most what its
SMs can drive, ``k r = comm_sm_fraction * sms * collective_GBps_per_sm`` (ACE §2.3(b)): the template
time is stretched by ``max(1, mu R / (share M), R / ace_rate)`` (ACE) or
``max(1, mu R / (share M), R / (k r))`` (endpoint).
**Compute slowdown** (c): a kernel overlapped with a collective keeps ``1 - comm_sm_fraction`` of
the SMs (``endpoint``; ACE and ideal: all) and ``M - mu R_c`` of the HBM bandwidth, ``R_c`` the rate
a scale-up collective runs at (``min(line, share M / mu, k r)``; ACE: its own rate); the stage's overlapped compute is stretched by
``max(1 / (1 - f_sm), M / (M - mu R_c)) - 1`` (the worse of the compute- and memory-bound roofs,
the engine's one factor per design point).
The ``nccl`` engine keeps the fitted overlap slowdown (:mod:`simcore.fidelity.overlap`).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from simcore.engine.evaluate import CompiledWorkload
from simcore.hardware.batch import SystemBatch
from simcore.ir.graph import CommType
from simcore.ir.ops import COMPUTE
from simcore.specs.endpoint import EndpointSpec

__all__ = ["collective_stretch", "compute_slowdown", "engines", "hbm_per_wire_byte"]

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


def hbm_per_wire_byte(ep: EndpointSpec, comm_type: int, n: float) -> float:
    """HBM bytes per network byte (``mu``) of a collective of ``n`` ranks on engine ``ep``."""
    wire = wire_fraction(comm_type, n)
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


def collective_stretch(cw: CompiledWorkload, tdur: FloatArray, sb: SystemBatch) -> FloatArray:
    """(U, B) ``tdur`` with every collective template slowed by its endpoint's limits."""
    eps = engines(sb)
    if all(e.collective_engine == "nccl" for e in eps):
        return tdur
    ops = cw.ops
    out = tdur.copy()
    share = np.array([e.comm_hbm_share for e in eps]) * _usable_hbm(sb)
    ace_rate = np.array([min(e.ace_alu_GBps, e.ace_link_GBps) * 1e9 for e in eps])
    sm_rate = np.array([e.sm_collective_Bps if e.collective_engine == "endpoint" else np.inf
                        for e in eps])
    is_ace = np.array([e.collective_engine == "ace" for e in eps])
    active = np.array([e.collective_engine in ("endpoint", "ace") for e in eps])
    for t, parts in enumerate(ops.templates):
        if ops.template_kind[t] == COMPUTE or len(parts) != 1:
            continue
        (kid, weight), = parts
        cost, args = ops.kernels[kid]
        if cost != "coll":
            continue
        comm, nbytes, n = int(args[0]), args[1] * weight, args[2]
        wire = wire_fraction(comm, n) * nbytes
        if wire <= 0:
            continue
        rate = wire / np.maximum(tdur[t], 1e-30)
        mu = np.array([hbm_per_wire_byte(e, comm, n) for e in eps])
        factor = np.maximum(np.maximum(1.0, mu * rate / share), rate / sm_rate)
        factor = np.where(is_ace, np.maximum(factor, rate / ace_rate), factor)
        out[t] = np.where(active, tdur[t] * factor, tdur[t])
    return out


def compute_slowdown(sb: SystemBatch) -> FloatArray:
    """(B,) fractional slowdown of compute beside a collective (engines other than ``nccl``)."""
    eps = engines(sb)
    m = _usable_hbm(sb)
    line = sb.scaleup_bandwidth_Bps * sb.calib["scaleup_efficiency"]
    out = np.zeros(sb.size)
    for j, e in enumerate(eps):
        if e.collective_engine in ("ideal", "nccl"):
            continue
        n = float(sb.gpus_per_node[j])
        mu = hbm_per_wire_byte(e, int(CommType.ALL_REDUCE), max(n, 2.0))
        rate = min(line[j], e.comm_hbm_share * m[j] / mu)
        sm = 0.0
        if e.collective_engine == "ace":
            rate = min(rate, min(e.ace_alu_GBps, e.ace_link_GBps) * 1e9)
        else:
            rate = min(rate, e.sm_collective_Bps)
            sm = 1.0 / (1.0 - e.comm_sm_fraction)
        out[j] = max(sm, m[j] / (m[j] - mu * rate)) - 1.0
    return out
