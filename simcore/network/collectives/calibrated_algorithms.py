"""Explicit collective algorithms (``conf/collective/``) with the calibrated link efficiency.

A collective over ``n`` ranks, ``k`` of them per scale-up domain (``M = ceil(n/k)`` nodes), is
run hierarchically as ASTRA-sim runs a multi-dimensional collective (reference/
astra-sim-and-chakra.md §1.2): all-reduce = reduce-scatter on the scale-up dimension,
all-reduce of ``D/k`` on the scale-out dimension, all-gather on the scale-up dimension (one
all-reduce phase when the group is inside one node);
reduce-scatter and all-gather run their two dimension phases in sequence; all-to-all sends
``D(k-1)/n`` inside the node (at ``scaleup_alltoall_ratio`` of the scale-up rate, as
:mod:`~simcore.network.collectives.nccl`) and ``D(n-k)/n`` across nodes. A phase of ``p``
ranks over a buffer ``D`` (the phase's full size) costs the alpha-beta form

    t_phase = steps * (collective_step_latency + hop_latency) + wire_bytes / (line_rate * eff)

with steps and bytes per rank from the algorithm's closed form (``phase`` of its
:data:`~simcore.network.collectives.REGISTRY` entry; reference §1.4):

| algorithm | all-reduce | reduce-scatter / all-gather | all-to-all |
|---|---|---|---|
| ring | 2(p-1) steps, 2(p-1)/p D | p-1 steps, (p-1)/p D | p(p-1)/2 messages of D/p |
| direct (window p-1) | 2 steps, 2(p-1)/p D | 1 step, (p-1)/p D | 1 step, (p-1)/p D |
| halvingDoubling | 2 log2 p steps, 2(p-1)/p D | log2 p steps, (p-1)/p D | - |
| doubleBinaryTree | 2 log2 p steps, 2 D | - | - |
| in-switch (in_network, Switch dim) | 2 steps, D | as the algorithm | as the algorithm |

A collective the algorithm does not implement is costed as a ring (a tree's scale-up
reduce-scatter and all-gather around a scale-out all-reduce).

In-switch reduction (ASTRA-sim 2.0 / SHARP, reference/methods-hap-ace-echo.md §4): each rank
sends its buffer once to the switch and receives the reduced buffer, ~D on the wire instead of
2(p-1)/p D. ``eff`` is the calibrated ``scaleup_efficiency`` / ``scaleout_efficiency``;
``switch_allreduce_gain`` (calibrated NVLS) is not applied on top. Chunks pipeline through the
phases: ``T = base + sum_phases t(D/c) + (c-1) max_phase t(D/c)``. ``auto`` keeps
:func:`simcore.network.collectives.nccl.collective_time_s` exactly, except all-reduce with
``in_network`` over dimensions that are all Switches: then the calibrated bus bandwidth
(scale-up, or ``min(scale-up, k x NIC)`` across nodes, without ``switch_allreduce_gain``)
carries D instead of 2(n-1)/n D, with 2 steps per spanned dimension. Broadcast, reduce,
barrier and point-to-point always use the calibrated model.

Inputs: ``sb`` (B systems; their ``collective`` field) and scalars or (U,) arrays; (U, B) s.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from simcore.hardware.batch import SystemBatch, per_distinct
from simcore.hardware.batch import as_column as _col
from simcore.hardware.batch import as_row as _row
from simcore.ir.graph import CommType
from simcore.network.collectives import REGISTRY, algorithm
from simcore.network.collectives._base import A2A, AG, AR, RS
from simcore.network.collectives.nccl import collective_time_s
from simcore.specs.collective import CollectiveSpec
from simcore.specs.system import SystemSpec

__all__ = ["algorithm_collective_time_s", "phase_time_s", "spanned_sizes"]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
_ALGS = tuple(REGISTRY.values())  # a per-system table holds indices into this tuple
_INDEX = {a.name: i for i, a in enumerate(_ALGS)}
_AUTO = _INDEX[algorithm("auto").name]
_RING, _IN_SWITCH = REGISTRY["ring"], REGISTRY["inSwitch"]
_KINDS = (AR, RS, AG, A2A)  # rows of the per-system algorithm table
_TYPE_ROW = {CommType.ALL_REDUCE: AR, CommType.ALL_GATHER: AG, CommType.REDUCE_SCATTER: RS,
             CommType.REDUCE_SCATTER_BLOCK: RS, CommType.ALL_TO_ALL: A2A}


def phase_time_s(kind: str, alg: IntArray, p: FloatArray, nbytes: FloatArray,
                 bw_Bps: FloatArray, step_s: FloatArray, in_switch: NDArray[np.bool_]
                 ) -> FloatArray:
    """Seconds of one dimension phase (broadcasting arrays).

    Args:
        kind: the collective of the phase (``all_reduce``, ``reduce_scatter``, ...).
        alg: indices into the registry's algorithms.
        p: ranks in the phase; nbytes: the phase's full buffer D, bytes.
        bw_Bps: effective line rate; step_s: latency per step.
        in_switch: in-switch reduction applies (all-reduce on a Switch dimension).
    """
    p = np.maximum(p, 1.0)
    shape = np.broadcast_shapes(np.shape(alg), np.shape(p), np.shape(nbytes))
    steps, wire = np.zeros(shape), np.zeros(shape)
    for code in np.unique(alg).tolist():
        a = _ALGS[code]
        s, w = (a if a.supports(kind) is None else _RING).phase(kind, p, nbytes)
        steps, wire = np.where(alg == code, s, steps), np.where(alg == code, w, wire)
    if kind == AR:
        on = in_switch & (p > 1)
        s, w = _IN_SWITCH.phase(AR, p, nbytes)
        steps, wire = np.where(on, s, steps), np.where(on, w, wire)
    return np.asarray(steps * step_s + wire / bw_Bps)


def _table(specs: tuple[CollectiveSpec, ...]) -> tuple[IntArray, IntArray]:
    """(4, B) algorithm indices on the scale-up and scale-out dimensions per collective kind."""
    up = np.zeros((len(_KINDS), len(specs)), dtype=np.int64)
    out = np.zeros_like(up)
    for b, spec in enumerate(specs):
        for row, key in enumerate(_KINDS):
            a_up, a_out = spec.per_dim(key)
            up[row, b], out[row, b] = _INDEX[algorithm(a_up).name], _INDEX[algorithm(a_out).name]
    return up, out


def algorithm_collective_time_s(sb: SystemBatch, comm_type: object, nbytes: object,
                                group_size: object, ranks_per_node: object) -> FloatArray:
    """(U, B) seconds of one collective under each system's :class:`CollectiveSpec`.

    Same arguments as :func:`simcore.network.collectives.nccl.collective_time_s`, which it
    returns unchanged where the algorithm is ``auto``.
    """
    calibrated = collective_time_s(sb, comm_type, nbytes, group_size, ranks_per_node)
    specs = tuple(s.collective for s in sb.specs)
    if per_distinct(lambda c: c.is_default, specs).all():
        return calibrated
    ct, size, n = _col(comm_type), _col(nbytes), _col(group_size)
    k = np.minimum(np.maximum(_col(ranks_per_node), 1.0), np.maximum(n, 1.0))
    m = np.ceil(n / k)
    up_tab, out_tab = _table(specs)
    row = np.full(ct.shape, -1, dtype=np.int64)
    for t, kind in _TYPE_ROW.items():
        row[ct == float(t)] = _KINDS.index(kind)
    safe = np.maximum(row[:, 0], 0)
    alg_up, alg_out = up_tab[safe], out_tab[safe]  # (U, B)
    chunks = _row(np.array([s.chunks_per_collective for s in specs], dtype=np.float64))
    net = np.array([s.in_network for s in specs])
    sw_up = (net & np.array([s.scaleup.kind == "Switch" for s in sb.specs]))[None, :]
    sw_out = (net & np.array([s.scaleout.kind == "Switch" for s in sb.specs]))[None, :]
    step = _row(sb.calib["collective_step_latency_us"]) * 1e-6
    dims = (
        (_row(sb.scaleup_bandwidth_Bps * sb.calib["scaleup_efficiency"]),
         step + _row(sb.scaleup_latency_s)),
        (_row(sb.scaleout_bandwidth_Bps * sb.calib["scaleout_efficiency"]),
         step + _row(sb.scaleout_latency_s)),
    )
    a2a_ratio = _row(sb.calib["scaleup_alltoall_ratio"])
    d = size / chunks
    explicit = np.zeros(np.broadcast_shapes(alg_up.shape, d.shape))
    for r, kind in enumerate(_KINDS):
        phases = _phases(kind, k, m, n, d, alg_up, alg_out, sw_up, sw_out, dims, a2a_ratio)
        total = sum(phases, np.zeros_like(explicit))
        longest = np.maximum.reduce(phases)
        explicit = np.where(row == r, total + (chunks - 1.0) * longest, explicit)
    for b, spec in enumerate(sb.specs):  # stacked inter-package dimensions: one phase each
        if spec.scaleout_dims:
            explicit[:, b] = _multidim_time_s(spec, row[:, 0], k[:, 0], m[:, 0], n[:, 0],
                                              np.broadcast_to(d, explicit.shape)[:, b],
                                              alg_up[:, b], alg_out[:, b],
                                              bool(sw_up[0, b]), dims[0][0][0, b],
                                              dims[0][1][0, b], float(chunks[0, b]),
                                              float(step[0, b]), float(a2a_ratio[0, b]))
    base = _row(sb.calib["collective_base_latency_us"]) * 1e-6
    explicit = np.where((n <= 1.0) | (size <= 0.0), 0.0, base + explicit)
    use = (row >= 0) & (alg_up != _AUTO)
    auto_switch = (ct == float(CommType.ALL_REDUCE)) & (alg_up == _AUTO) & sw_up & (
        (m <= 1.0) | sw_out)
    if auto_switch.any():
        calibrated = np.where(auto_switch, _in_switch_auto_s(sb, size, n, k, m), calibrated)
    return np.asarray(np.where(use, explicit, calibrated))


def _in_switch_auto_s(sb: SystemBatch, size: FloatArray, n: FloatArray, k: FloatArray,
                      m: FloatArray) -> FloatArray:
    """(U, B) ``auto`` all-reduce with in-switch reduction: the calibrated bus bandwidth
    (without ``switch_allreduce_gain``), D instead of 2(n-1)/n D, 2 steps per dimension."""
    step = _row(sb.calib["collective_step_latency_us"]) * 1e-6
    up = _row(sb.scaleup_bandwidth_Bps * sb.calib["scaleup_efficiency"])
    nic = _row(sb.scaleout_bandwidth_Bps * sb.calib["scaleout_efficiency"])
    busbw = np.where(m <= 1.0, up, np.minimum(up, k * nic))
    steps = (_IN_SWITCH.phase(AR, k, size)[0] * (step + _row(sb.scaleup_latency_s))
             + _IN_SWITCH.phase(AR, m, size)[0] * (step + _row(sb.scaleout_latency_s)))
    base = _row(sb.calib["collective_base_latency_us"]) * 1e-6
    t = base + steps + _IN_SWITCH.phase(AR, n, size)[1] / busbw
    return np.asarray(np.where((n <= 1.0) | (size <= 0.0), 0.0, t))


def spanned_sizes(sizes: tuple[int, ...], m: FloatArray) -> list[FloatArray]:
    """Ranks a group of ``m`` nodes spans on each stacked inter-package dimension of ``sizes``
    (innermost first): it fills the inner dimensions first (``min(size, remaining)``, then
    ``ceil(remaining / taken)`` nodes are left); 1 = the dimension is not spanned."""
    left = np.maximum(np.asarray(m, dtype=np.float64), 1.0)
    out = []
    for size in sizes:
        take = np.minimum(float(size), left)
        out.append(take)
        left = np.ceil(left / take)
    return out


def _multidim_time_s(spec: SystemSpec, row: IntArray, k: FloatArray, m: FloatArray,
                     n: FloatArray, d: FloatArray, alg_up: IntArray, alg_out: IntArray,
                     sw_up: bool, bw_up: float, st_up: float, chunks: float, step_s: float,
                     a2a_ratio: float = 1.0) -> FloatArray:
    """(U,) explicit-algorithm seconds (without the base latency) of one chunk ``d`` pipelined
    ``chunks`` times through the phases, on a system whose scale-out is stacked dimensions
    (``SystemSpec.scaleout_dims``), as ASTRA-sim runs a multi-dimensional collective
    (reference/astra-sim-and-chakra.md §1.2, ``localBWAware``): all-reduce = reduce-scatter on
    the scale-up dimension and on every spanned inter-package dimension but the last, all-reduce
    on the last, all-gather back down (each phase on ``1 / ranks`` of the previous one's buffer);
    reduce-scatter / all-gather = one phase per spanned dimension; all-to-all = the scale-up
    phase of ``D k / n`` (at ``a2a_ratio`` of ``bw_up``) and one phase of ``D`` per spanned
    inter-package dimension (every
    phase's input is the previous one's output, ASTRA-sim's baseline). Each dimension has its
    own line rate (x ``scaleout_efficiency``) and hop latency; the scale-out algorithm runs on
    each; in-switch reduction on a Switch dimension's all-reduce phase."""
    eff = spec.calibration.scaleout_efficiency
    net = spec.collective.in_network
    sub = [(np.asarray(x.bandwidth_GBps * 1e9 * eff), np.asarray(step_s + x.latency_ns * 1e-9),
            net and x.kind == "Switch") for x in spec.scaleout_dims]
    bw_up_a, st_up_a = np.asarray(bw_up), np.asarray(st_up)
    takes = spanned_sizes(tuple(x.size for x in spec.scaleout_dims), m)
    no = np.zeros(1, dtype=bool)
    out = np.zeros(row.shape)
    for r, kind in enumerate(_KINDS):
        sel = row == r
        if not sel.any():
            continue
        phases: list[FloatArray] = []
        if kind == A2A:
            phases.append(phase_time_s(A2A, alg_up, k, d * k / n, bw_up_a * a2a_ratio, st_up_a,
                                       no))
            for take, (bw, st, _) in zip(takes, sub, strict=True):
                phases.append(phase_time_s(A2A, alg_out, take, d, bw, st, no))
        elif kind == AR:
            inside = m <= 1.0
            phases.append(np.where(inside, phase_time_s(AR, alg_up, k, d, bw_up_a, st_up_a,
                                                        np.array([sw_up])),
                                   phase_time_s(RS, alg_up, k, d, bw_up_a, st_up_a, no)))
            phases.append(np.where(inside, 0.0, phase_time_s(AG, alg_up, k, d, bw_up_a, st_up_a,
                                                             no)))
            buf = d / k
            for j, (take, (bw, st, sw)) in enumerate(zip(takes, sub, strict=True)):
                later = takes[j + 1] if j + 1 < len(takes) else np.ones_like(take)
                last = (take > 1.0) & (later <= 1.0)
                ar = phase_time_s(AR, alg_out, take, buf, bw, st, np.array([sw]))
                rs = phase_time_s(RS, alg_out, take, buf, bw, st, no)
                ag = phase_time_s(AG, alg_out, take, buf, bw, st, no)
                phases += [np.where(last, ar, rs), np.where(last, 0.0, ag)]
                buf = buf / take
        else:
            phases.append(phase_time_s(kind, alg_up, k, d, bw_up_a, st_up_a, no))
            buf = d / k
            for take, (bw, st, _) in zip(takes, sub, strict=True):
                phases.append(phase_time_s(kind, alg_out, take, buf, bw, st, no))
                buf = buf / take
        total = sum(phases, np.zeros(row.shape))
        longest = np.maximum.reduce(phases)
        out = np.where(sel, total + (chunks - 1.0) * longest, out)
    return out


def _phases(kind: str, k: FloatArray, m: FloatArray, n: FloatArray, d: FloatArray,
            alg_up: NDArray[np.int64], alg_out: NDArray[np.int64], sw_up: NDArray[np.bool_],
            sw_out: NDArray[np.bool_], dims: tuple[tuple[FloatArray, FloatArray], ...],
            a2a_ratio: FloatArray) -> list[FloatArray]:
    """Per-dimension phase times (U, B) of one chunk ``d`` (see the module docstring; the
    all-to-all's scale-up phase at ``scaleup_alltoall_ratio`` of the scale-up bandwidth)."""
    (bw_up, st_up), (bw_out, st_out) = dims
    no = np.zeros(1, dtype=bool)
    if kind == AR:  # inside one node: one all-reduce phase (in-switch where a Switch)
        inside = m <= 1.0
        single = phase_time_s(AR, alg_up, k, d, bw_up, st_up, sw_up)
        rs = phase_time_s(RS, alg_up, k, d, bw_up, st_up, no)
        ar = phase_time_s(AR, alg_out, m, d / k, bw_out, st_out, sw_out)
        ag = phase_time_s(AG, alg_up, k, d, bw_up, st_up, no)
        return [np.where(inside, single, rs), np.where(inside, 0.0, ar),
                np.where(inside, 0.0, ag)]
    if kind == A2A:
        return [phase_time_s(A2A, alg_up, k, d * k / n, bw_up * a2a_ratio, st_up, no),
                phase_time_s(A2A, alg_out, m, d, bw_out, st_out, no)]
    return [phase_time_s(kind, alg_up, k, d, bw_up, st_up, no),
            phase_time_s(kind, alg_out, m, d / k, bw_out, st_out, no)]
