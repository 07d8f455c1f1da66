"""Per-device costs on clusters of mixed device pools (HAP's setting, Zhang et al. EuroSys 2024).

A pipeline stage is run by the ranks of its stage; with several device pools those ranks may sit
on different devices (a data-parallel group of V100 and P100 nodes). The model, with SPMD
semantics (every rank of a stage runs the same program, collectives synchronise them):

* **Compute.** A compute template of stage ``s`` takes ``max_d r_{s,d} T_d`` over the pools
  ``d`` holding ranks of ``s``: ``T_d`` is the template costed by the kernel models on a device
  of pool ``d`` (its accelerator, calibration) and ``r_{s,d}`` the work of one device of pool
  ``d`` relative to an even split (its data-parallel batch share or tensor-shard ratio,
  ``sum_d n_{s,d} r_{s,d} = n_s``). Work is taken as linear in the share, as HAP's cost model does
  (§1.4 of reference/methods-hap-ace-echo.md: FLOPs are linear in the ratios); kernel-efficiency
  changes with the shard shape are not re-costed.
* **Communication.** A collective or send of stage ``s`` is costed on every pool it involves
  (each pool's calibration and scale-up fabric: an asymmetric topology; the scale-out network is
  shared) and takes the slowest: the members of a ring or tree advance together, so the slowest
  member sets the pace. Its volume on pool ``d`` follows the device's share (the cost models are
  affine in the bytes, so the bandwidth term is scaled: ``T(v) = T + (v - 1) dT``):

  - the share is a **batch share** (the stage's tensor-parallel groups sit inside one pool, its
    data-parallel group spans pools): activations scale with it, so tensor-, context-, expert-
    and pipeline-parallel traffic carries ``v = r_{s,d}``; gradients do not (``v = 1``);
  - the share is a **tensor-shard ratio** (some tensor-parallel group spans pools, HAP's uneven
    feature sharding): a data-parallel gradient or ZeRO gather carries the device's weight shard,
    ``v = r_{s,d}``; a tensor-parallel all-reduce of partial sums the full tensor (``v = 1``); a
    tensor-parallel all-gather / reduce-scatter (sequence parallelism) the uneven shards, padded
    to the largest or as grouped broadcasts, the cheaper
    (:func:`simcore.network.collectives.uneven.uneven_bandwidth_factor`); the rest ``v = 1``.
* **Memory.** A device's footprint follows its share too (``simcore.memory.capacity.
  check_stage_pools`` with :func:`stage_compute_and_shares`): a batch share scales its activations, a
  tensor-shard ratio every part.
* **Overlap slowdown.** Compute beside communication is slowed by the calibration of the device
  that sets the stage's compute time (the pool with the largest ``r_{s,d} C_{s,d}``):
  :func:`stage_overlap_slowdown`.
* **Shares** (``parallel.work_split``): ``even`` (HAP's DP-EV baseline), ``proportional`` to
  peak FLOP/s (DP-CP), ``balanced`` (``r_{s,d}`` proportional to ``1 / C_{s,d}``, ``C_{s,d}`` the
  stage's compute on pool ``d``: every device finishes its compute together, the optimum of
  HAP's LP when communication does not depend on the ratios; see
  :mod:`simcore.hetero.ratios` for the LP itself), or ``explicit`` (``parallel.work_shares``).

Templates are interned across stages by the workload families; on mixed pools they are split per
stage first (:func:`split_templates_by_stage`) so that each template runs on one stage's devices
and the scheduler stays unchanged. Everything stays vectorized over the batch of systems: one
kernel pass per pool, (D, U, B) arrays, a max over the pool axis.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np
from numpy.typing import NDArray

from simcore.engine.evaluate import CompiledWorkload, compile_workload, kernel_durations
from simcore.errors import InputError
from simcore.hardware.batch import SystemBatch
from simcore.ir.graph import CommType
from simcore.ir.ops import COMPUTE, OpTable
from simcore.ir.streams import CommKind
from simcore.network.collectives.uneven import uneven_bandwidth_factor
from simcore.specs.parallel import ParallelSpec
from simcore.workloads._base import Workload

__all__ = ["compile_on_pools", "device_template_durations", "split_templates_by_stage",
           "stage_compute_and_shares", "stage_overlap_slowdown", "stage_work_shares",
           "volume_factors"]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]


def split_templates_by_stage(workload: Workload) -> tuple[Workload, IntArray]:
    """``workload`` with every template used by several stages duplicated per stage, and the
    (U',) stage of each new template."""
    graph = workload.graph
    p = max(1, workload.num_stages)
    tmpl = graph.attr("template").astype(np.int64)
    stage = graph.attr("stage").astype(np.int64)
    uniq, inv = np.unique(tmpl * p + stage, return_inverse=True)
    old = workload.ops
    ops = OpTable(kernels=list(old.kernels), _kernel_ids=dict(old._kernel_ids))
    for u in uniq.tolist():
        t, s = divmod(int(u), p)
        ops.template(f"{old.template_names[t]}@stage{s}", old.templates[t], old.template_kind[t])
    attrs = {**graph.attrs, "template": inv.astype(np.float64)}
    new = replace(workload, graph=replace(graph, attrs=attrs), ops=ops)
    return new, (uniq % p).astype(np.int64)


def compile_on_pools(workload: Workload, stage_pools: IntArray,
                     stage_tp_split: NDArray[np.bool_] | None = None) -> CompiledWorkload:
    """Compile ``workload`` for a cluster whose stage ``s`` has ``stage_pools[s, d]`` ranks on
    pool ``d`` ((P, D) counts, :attr:`~simcore.workloads.layout.RankLayout.stage_pools`);
    ``stage_tp_split`` (P,) marks the stages whose tensor-parallel groups span pools
    (:attr:`~simcore.workloads.layout.RankLayout.stage_tp_spans_pools`; None: none)."""
    counts = np.asarray(stage_pools, dtype=np.int64)
    if counts.shape[0] != workload.num_stages or (counts.sum(axis=1) <= 0).any():
        raise InputError("stage_pools", counts.shape,
                         f"must be ({workload.num_stages}, D) rank counts, every stage on a pool")
    devices = tuple(int(np.argmax(row > 0)) for row in counts)
    split, tstage = split_templates_by_stage(replace(workload, stage_device=devices))
    cw = compile_workload(split)
    tp_split = (np.zeros(counts.shape[0], dtype=bool) if stage_tp_split is None
                else np.asarray(stage_tp_split, dtype=bool))
    if tp_split.shape != (counts.shape[0],):
        raise InputError("stage_tp_split", tp_split.shape, f"must be ({counts.shape[0]},)")
    return replace(cw, template_stage=tstage, stage_pools=counts, stage_tp_split=tp_split)


def _halved_comm(ops: OpTable) -> OpTable:
    """``ops`` with every collective and send moving half its bytes (for the bandwidth term)."""
    kernels = []
    for cost, args in ops.kernels:
        if cost == "coll":
            args = (args[0], args[1] / 2.0, *args[2:])
        elif cost == "p2p":
            args = (args[0] / 2.0, *args[1:])
        kernels.append((cost, args))
    return OpTable(kernels=kernels, templates=ops.templates, template_kind=ops.template_kind,
                   template_names=ops.template_names)


#: kernel groups whose bandwidth terms scale alike: plain, all-gather, reduce-scatter
_AG, _RS = int(CommType.ALL_GATHER), int(CommType.REDUCE_SCATTER)
_GROUPS = (-1, _AG, _RS)


def _kernel_group(ops: OpTable) -> IntArray:
    """(K,) group of every kernel (:data:`_GROUPS`): collectives whose shards may be uneven
    (all-gather, reduce-scatter) apart from the rest."""
    out = []
    for c, a in ops.kernels:
        ct = int(a[0]) if c == "coll" else -1
        out.append(_RS if ct == int(CommType.REDUCE_SCATTER_BLOCK) else
                   ct if ct in (_AG, _RS) else -1)
    return np.asarray(out, dtype=np.int64)


def _per_pool_templates(cw: CompiledWorkload, sb: SystemBatch, precision: str
                        ) -> tuple[FloatArray, dict[int, FloatArray]]:
    """(D, U, B) seconds of every template on a device of each pool at the even split, and per
    kernel group the (D, U, B) bandwidth term of its kernels (the cost models are affine in the
    bytes: twice the time saved by halving them)."""
    w = cw.ops.weights()
    group = _kernel_group(cw.ops)
    halved = _halved_comm(cw.ops)
    full: list[FloatArray] = []
    slopes: dict[int, list[FloatArray]] = {g: [] for g in _GROUPS}
    for d in range(sb.num_pools):
        sbp = sb.pool(d)
        k_full = kernel_durations(cw.ops, sbp, precision)
        slope = 2.0 * (k_full - kernel_durations(halved, sbp, precision))
        full.append(w @ k_full)
        for g in _GROUPS:
            slopes[g].append(w @ np.where((group == g)[:, None], slope, 0.0))
    return np.stack(full), {g: np.stack(v) for g, v in slopes.items()}


def volume_factors(cw: CompiledWorkload, shares: FloatArray) -> dict[int, FloatArray]:
    """Per kernel group (:data:`_GROUPS`) the (D, U, B) factor on the bandwidth term of every
    template on each pool, from the (P, D, B) shares (see the module docstring)."""
    assert cw.template_stage is not None and cw.stage_pools is not None
    tstage = cw.template_stage
    tp_split = (np.zeros(cw.stage_pools.shape[0], dtype=bool) if cw.stage_tp_split is None
                else cw.stage_tp_split)[tstage][None, :, None]  # (1, U, 1)
    kind = np.asarray(cw.template_kind)[None, :, None]
    r = shares[tstage].transpose(1, 0, 2)  # (D, U, B) shares of each template's stage
    r_max = shares.max(axis=1)[tstage][None, :, :]  # (1, U, B) the largest shard
    activations = np.isin(kind, [CommKind.TP, CommKind.CP, CommKind.EP, CommKind.PP])
    plain = np.where(tp_split, np.where(kind == CommKind.DP, r, 1.0),
                     np.where(activations, r, 1.0))
    out = {-1: plain}
    for g in (_AG, _RS):
        sharded = uneven_bandwidth_factor(g, r_max)  # padded or grouped, the cheaper
        out[g] = np.where(tp_split & (kind == CommKind.TP), sharded, plain)
    return out


def stage_work_shares(parallel: ParallelSpec, sb: SystemBatch, stage_pools: IntArray,
                      stage_compute_s: FloatArray) -> FloatArray:
    """(P, D, B) work of one device of pool ``d`` on stage ``s`` relative to an even split.

    Args:
        parallel: the plan (``work_split``, ``work_shares``).
        sb: the B systems.
        stage_pools: (P, D) ranks of each stage on each pool.
        stage_compute_s: (P, D, B) compute seconds of each stage on a device of each pool at
            the even split (used by ``balanced``).

    Pools without ranks on a stage get 0; ``sum_d n_{s,d} r_{s,d} = n_s`` on every stage.
    """
    n = np.asarray(stage_pools, dtype=np.float64)[:, :, None]  # (P, D, 1)
    present = n > 0
    p, d = n.shape[:2]
    split = parallel.work_split
    if split == "even":
        speed = np.ones((p, d, sb.size))
    elif split == "proportional":
        speed = np.broadcast_to(sb.pool_peak_flops[parallel.precision][None], (p, d, sb.size))
    elif split == "balanced":
        c = np.asarray(stage_compute_s, dtype=np.float64)
        speed = np.divide(1.0, c, out=np.zeros_like(c), where=c > 0)
    else:
        shares = parallel.work_shares or ()
        if len(shares) != d:
            raise InputError("parallel.work_shares", list(shares),
                             f"must give one share per device pool ({d})")
        speed = np.broadcast_to(np.asarray(shares, dtype=np.float64)[None, :, None],
                                (p, d, sb.size))
    speed = np.where(present, speed, 0.0)
    total = (n * speed).sum(axis=1, keepdims=True)  # (P, 1, B)
    return np.asarray(n.sum(axis=1, keepdims=True) * speed / total)


def _check_pools(cw: CompiledWorkload, sb: SystemBatch) -> IntArray:
    if cw.template_stage is None or cw.stage_pools is None:
        raise InputError("compiled_workload", "one pool", "compile with compile_on_pools first")
    if cw.stage_pools.shape[1] != sb.num_pools:
        raise InputError("system.pools", sb.num_pools,
                         f"the workload was compiled for {cw.stage_pools.shape[1]} pools")
    return cw.template_stage


def _stage_compute(cw: CompiledWorkload, per_pool: FloatArray) -> FloatArray:
    """(P, D, B) each stage's compute on one device of each pool at the even split."""
    comp = np.where((cw.template_kind == COMPUTE)[None, :, None], per_pool, 0.0)
    return np.asarray(np.einsum("pu,dub->pdb", cw.stage_counts, comp))


def device_template_durations(cw: CompiledWorkload, sb: SystemBatch, parallel: ParallelSpec,
                              stretch: Callable[[SystemBatch, FloatArray], FloatArray] | None
                              = None) -> FloatArray:
    """(U, B) seconds of every template of ``cw`` (compiled by :func:`compile_on_pools`): compute
    ``max_d r_{s,d} T_d``, communication ``max_d T_d(v_d)`` (volume factors
    :func:`volume_factors`) over the pools of the template's stage; ``stretch(pool batch,
    (U, B) seconds)`` slows each pool's templates first (e.g. by its endpoint)."""
    tstage = _check_pools(cw, sb)
    assert cw.stage_pools is not None
    per_pool, slopes = _per_pool_templates(cw, sb, parallel.precision)  # (D, U, B)
    shares = stage_work_shares(parallel, sb, cw.stage_pools, _stage_compute(cw, per_pool))
    is_comp = (cw.template_kind == COMPUTE)[None, :, None]
    factors = volume_factors(cw, shares)
    comm = per_pool + sum((factors[g] - 1.0) * slopes[g] for g in slopes)
    t = np.where(is_comp, per_pool * shares[tstage].transpose(1, 0, 2), comm)
    if stretch is not None:
        t = np.stack([stretch(sb.pool(d), t[d]) for d in range(sb.num_pools)])
    present = (cw.stage_pools[tstage] > 0).T[:, :, None]  # (D, U, 1)
    return np.asarray(np.where(present, t, -np.inf).max(axis=0))


def stage_compute_and_shares(cw: CompiledWorkload, sb: SystemBatch, parallel: ParallelSpec
                             ) -> tuple[FloatArray, FloatArray]:
    """(P, D, B) each stage's compute on one device of each pool at the even split, and the
    (P, D, B) :func:`stage_work_shares` of ``cw`` (compiled by :func:`compile_on_pools`) on the
    B systems (e.g. for the memory of each device)."""
    _check_pools(cw, sb)
    assert cw.stage_pools is not None
    w = cw.ops.weights()
    per_pool = np.stack([w @ kernel_durations(cw.ops, sb.pool(d), parallel.precision)
                         for d in range(sb.num_pools)])
    compute = _stage_compute(cw, per_pool)  # (P, D, B)
    return compute, stage_work_shares(parallel, sb, cw.stage_pools, compute)


def stage_overlap_slowdown(cw: CompiledWorkload, sb: SystemBatch, parallel: ParallelSpec,
                           pool_slowdown: FloatArray,
                           compute_shares: tuple[FloatArray, FloatArray] | None = None
                           ) -> FloatArray:
    """(P, B) overlap slowdown of each stage: ``pool_slowdown`` (D, B) of the pool whose
    devices set the stage's compute time (the largest ``r_{s,d} C_{s,d}``; ties: the first);
    ``compute_shares``: :func:`stage_compute_and_shares` if already at hand."""
    compute, shares = compute_shares or stage_compute_and_shares(cw, sb, parallel)
    assert cw.stage_pools is not None
    load = np.where(cw.stage_pools[:, :, None] > 0, shares * compute, -np.inf)
    pick = np.argmax(load, axis=1)  # (P, B)
    slow = np.asarray(pool_slowdown, dtype=np.float64)
    return np.asarray(np.take_along_axis(slow[None, :, :], pick[:, None, :], axis=1)[:, 0, :])
