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
  member sets the pace. Volumes are those of the even split (a gradient all-reduce does not
  depend on the batch share).
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

from dataclasses import replace

import numpy as np
from numpy.typing import NDArray

from simcore.engine.evaluate import CompiledWorkload, compile_workload, kernel_durations
from simcore.errors import InputError
from simcore.hardware.batch import SystemBatch
from simcore.ir.ops import COMPUTE, OpTable
from simcore.specs.parallel import ParallelSpec
from simcore.workloads._base import Workload

__all__ = ["compile_on_pools", "device_template_durations", "split_templates_by_stage",
           "stage_work_shares"]

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


def compile_on_pools(workload: Workload, stage_pools: IntArray) -> CompiledWorkload:
    """Compile ``workload`` for a cluster whose stage ``s`` has ``stage_pools[s, d]`` ranks on
    pool ``d`` ((P, D) counts, :attr:`~simcore.workloads.layout.RankLayout.stage_pools`)."""
    counts = np.asarray(stage_pools, dtype=np.int64)
    if counts.shape[0] != workload.num_stages or (counts.sum(axis=1) <= 0).any():
        raise InputError("stage_pools", counts.shape,
                         f"must be ({workload.num_stages}, D) rank counts, every stage on a pool")
    devices = tuple(int(np.argmax(row > 0)) for row in counts)
    split, tstage = split_templates_by_stage(replace(workload, stage_device=devices))
    cw = compile_workload(split)
    return replace(cw, template_stage=tstage, stage_pools=counts)


def _per_pool_templates(cw: CompiledWorkload, sb: SystemBatch, precision: str) -> FloatArray:
    """(D, U, B) seconds of every template on a device of each pool."""
    w = cw.ops.weights()
    return np.stack([w @ kernel_durations(cw.ops, sb.pool(d), precision)
                     for d in range(sb.num_pools)])


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


def device_template_durations(cw: CompiledWorkload, sb: SystemBatch, parallel: ParallelSpec
                              ) -> FloatArray:
    """(U, B) seconds of every template of ``cw`` (compiled by :func:`compile_on_pools`): compute
    ``max_d r_{s,d} T_d``, communication ``max_d T_d`` over the pools of the template's stage."""
    if cw.template_stage is None or cw.stage_pools is None:
        raise InputError("compiled_workload", "one pool", "compile with compile_on_pools first")
    if cw.stage_pools.shape[1] != sb.num_pools:
        raise InputError("system.pools", sb.num_pools,
                         f"the workload was compiled for {cw.stage_pools.shape[1]} pools")
    per_pool = _per_pool_templates(cw, sb, parallel.precision)  # (D, U, B)
    is_comp = cw.template_kind == COMPUTE
    comp = np.where(is_comp[None, :, None], per_pool, 0.0)
    # (P, D, B): each stage's compute on one device of each pool (counts x template seconds)
    stage_compute = np.einsum("pu,dub->pdb", cw.stage_counts, comp)
    shares = stage_work_shares(parallel, sb, cw.stage_pools, stage_compute)  # (P, D, B)
    scale = np.where(is_comp[None, :, None], shares[cw.template_stage].transpose(1, 0, 2), 1.0)
    present = (cw.stage_pools[cw.template_stage] > 0).T[:, :, None]  # (D, U, 1)
    return np.asarray(np.where(present, per_pool * scale, -np.inf).max(axis=0))
