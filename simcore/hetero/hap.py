"""HAP's plan for a transformer on a cluster of mixed device pools (Zhang et al., EuroSys 2024).

A reduced reimplementation of HAP's alternating optimisation (reference/methods-hap-ace-echo.md
§1.1-1.6) on the per-device cost models of this simulator:

1. ``B`` starts proportional to each device's profiled speed (here: the inverse of its compute
   time for the whole program under the calibrated kernel models).
2. ``Q <- argmin`` per weight over the communication methods below at the current ``B``; HAP
   finds Q by an A*/uniform-cost search over a property lattice. Here the lattice is cut down to
   one choice per weight, each method bringing the tensor back to the batch-sharded layout, so
   the instructions are independent and the search reduces to a per-weight minimum (a
   simplification: no resharding chains across layers).
3. ``B <- LP(Q)`` (:func:`simcore.hetero.ratios.solve_ratios`); repeat while the program gets
   cheaper.

Methods per weight ``W`` (``k x n``, a Linear of the transformer; tokens ``T`` per iteration,
``e`` bytes per element, ``N`` devices):

* ``allreduce``: data parallel, gradient all-reduce of ``W``.
* ``rs_ag_padded``: data parallel, gradient reduce-scatter + parameter all-gather with shards of
  ratio ``B`` padded to the largest (``N max_d B_d |W|`` on the wire).
* ``rs_ag_grouped``: the same with grouped reduce / broadcast (``|W|`` total), at the lower
  algorithm bandwidth HAP measured for grouped calls (reference §1.4: 9.15 vs 9.46 GB/s for
  all-gather, 8.76 vs 9.74 GB/s for reduce-scatter).
* ``sfb``: sufficient-factor broadcasting: all-gather the factors ``X`` and ``dY``
  (``N max_d B_d T (k+n) e``) and recompute the full ``dW`` on every device (not scaled by B).
* ``feature``: the weight sharded over its output features by ``B``: all-gather of ``X`` forward
  (reduce-scatter of ``dX`` backward) and an all-to-all of ``Y`` back to batch sharding (both
  directions), padded.

Costs (HAP §1.4, no overlap): compute of an instruction on pool ``d`` = ``3 x`` the forward
kernel time at the even shard (GEMM and attention from :mod:`simcore.hardware.compute`,
elementwise passes as memory-bound kernels) scaled linearly by ``N B_d`` (the kernel overhead kept
constant); a collective's time on pool ``d`` is the calibrated NCCL model
(:func:`simcore.network.collectives.nccl.collective_time_s`, affine in the size) on that pool's
devices and fabrics, and the slowest pool sets it. Elementwise traffic per token and layer is
taken as ``(20 h + 2 ffn) e`` bytes forward (layer norms, dropouts, residuals, GELU) [R].
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from simcore.errors import InputError
from simcore.hardware.batch import SystemBatch
from simcore.hardware.compute import (
    ELEMENT_BYTES,
    attention_time_s,
    gemm_time_s,
    memory_bound_time_s,
)
from simcore.hetero.ratios import AffineCosts, program_cost_s, solve_ratios
from simcore.ir.graph import CommType
from simcore.network.collectives.nccl import collective_time_s
from simcore.specs.system import SystemSpec
from simcore.workloads.transformer.spec import ModelSpec

__all__ = ["METHODS", "HapPlan", "Instruction", "hap_plan", "instructions", "plan_cost"]

FloatArray = NDArray[np.float64]

METHODS = ("allreduce", "rs_ag_padded", "rs_ag_grouped", "sfb", "feature")
#: HAP's measured grouped-call efficiency (algorithm bandwidth of the grouped call over the NCCL
#: collective's, reference §1.4 example cluster): all-gather 9.15/9.46, reduce-scatter 8.76/9.74
GROUPED_AG_EFF = 9.15 / 9.46
GROUPED_RS_EFF = 8.76 / 9.74


@dataclass(frozen=True)
class Instruction:
    """One instruction (repeated ``count`` times) and its affine costs per method, (D,) rows.

    ``methods`` maps a method name to (comp_const, comp_slope, comm_const, comm_slope)."""

    name: str
    count: int
    methods: dict[str, tuple[FloatArray, FloatArray, FloatArray, FloatArray]]


@dataclass(frozen=True)
class HapPlan:
    """A program (method per instruction), its ratios (one device of each pool) and seconds."""

    choice: tuple[str, ...]
    ratios: FloatArray
    iteration_s: float
    rounds: int


def _affine_comm(sbp: SystemBatch, ct: CommType, n: int, k: int) -> tuple[float, float]:
    """(seconds at 0+ bytes, seconds per byte) of a collective on a pool's devices."""
    ref = 2.0**26
    t1 = float(collective_time_s(sbp, float(ct), 1.0, n, k)[0, 0])
    tr = float(collective_time_s(sbp, float(ct), ref, n, k)[0, 0])
    return t1, (tr - t1) / (ref - 1.0)


def instructions(model: ModelSpec, system: SystemSpec, global_batch: int,
                 precision: str = "fp32") -> tuple[list[Instruction], FloatArray]:
    """The instructions of one training iteration of ``model`` with ``global_batch`` samples on
    ``system`` (one batch system), and the (D,) device counts of its pools."""
    sb = SystemBatch.from_specs([system])
    counts = sb.pool_count[:, 0]
    n = int(counts.sum())
    if global_batch % n:
        raise InputError("global_batch", global_batch, f"must be divisible by num_gpus={n}")
    e = ELEMENT_BYTES[precision]
    h, s, f = model.hidden_size, model.seq_len, model.ffn
    tokens = float(global_batch * s)
    per_dev = tokens / n
    k_node = system.gpus_per_node
    pools = [sb.pool(d) for d in range(sb.num_pools)]
    comm = {ct: [_affine_comm(p, ct, n, k_node) for p in pools]
            for ct in (CommType.ALL_REDUCE, CommType.ALL_GATHER, CommType.REDUCE_SCATTER,
                       CommType.ALL_TO_ALL)}
    ovh = np.array([float(p.calib["kernel_overhead_us"][0]) * 1e-6 for p in pools])
    zero = np.zeros(len(pools))

    def coll(ct: CommType, nbytes: float, eff: float = 1.0) -> tuple[FloatArray, FloatArray]:
        a = np.array([c[0] for c in comm[ct]])
        b = np.array([c[1] for c in comm[ct]])
        return a / eff, b * nbytes / eff

    def linear(name: str, count: int, kin: int, kout: int) -> Instruction:
        t = np.array([float(gemm_time_s(p, per_dev, kout, kin, precision)[0, 0]) for p in pools])
        slope = 3.0 * (t - ovh) * n  # fwd + 2 bwd GEMMs, seconds per unit of ratio
        const = 3.0 * ovh
        w = kin * kout * e
        ar_a, ar_b = coll(CommType.ALL_REDUCE, w)
        rs_a, rs_b = coll(CommType.REDUCE_SCATTER, w)
        ag_a, ag_b = coll(CommType.ALL_GATHER, w)
        grs_a, grs_b = coll(CommType.REDUCE_SCATTER, w, GROUPED_RS_EFF)
        gag_a, gag_b = coll(CommType.ALL_GATHER, w, GROUPED_AG_EFF)
        fx_a, fx_b = coll(CommType.ALL_GATHER, tokens * (kin + kout) * e)
        xa_a, xa_b = coll(CommType.ALL_GATHER, tokens * kin * e)
        xr_a, xr_b = coll(CommType.REDUCE_SCATTER, tokens * kin * e)
        ya_a, ya_b = coll(CommType.ALL_TO_ALL, tokens * kout * e)
        return Instruction(name, count, {
            "allreduce": (const, slope, ar_a + ar_b, zero),
            "rs_ag_padded": (const, slope, rs_a + ag_a, n * (rs_b + ag_b)),
            "rs_ag_grouped": (const, slope, grs_a + grs_b + gag_a + gag_b, zero),
            "sfb": (const + slope / 3.0, 2.0 * slope / 3.0, 2.0 * fx_a, n * fx_b),
            "feature": (const, slope, xa_a + xr_a + 2.0 * ya_a, n * (xa_b + xr_b + 2.0 * ya_b)),
        })

    def local(name: str, count: int, t: FloatArray, overheads: float) -> Instruction:
        o = overheads * ovh
        return Instruction(name, count, {"allreduce": (o, (t - o) * n, zero, zero)})

    layers = model.num_layers
    attn = np.array([3.5 * float(attention_time_s(p, global_batch / n * model.num_heads, s, s,
                                                  model.head_dim, False, precision)[0, 0])
                     for p in pools])  # flash attention: backward 2.5x forward
    elem = np.array([3.0 * float(memory_bound_time_s(p, per_dev * (20 * h + 2 * f) * e)[0, 0])
                     for p in pools])
    out = [linear("qkv", layers, h, model.qkv_out), linear("attn_out", layers, h, h),
           linear("fc1", layers, h, f), linear("fc2", layers, f, h),
           local("attention_core", layers, attn, 3.0), local("elementwise", layers, elem, 3.0),
           linear("output_layer", 1, h, model.vocab_size)]
    emb_a, emb_b = coll(CommType.ALL_REDUCE, model.vocab_size * h * e)
    out.append(Instruction("embedding", 1, {"allreduce": (zero, zero, emb_a + emb_b, zero)}))
    return out, counts


def _program(instrs: list[Instruction], choice: tuple[str, ...]) -> AffineCosts:
    rows = [tuple(np.asarray(x) * ins.count for x in ins.methods[c])
            for ins, c in zip(instrs, choice, strict=True)]
    return AffineCosts(*(np.stack([r[j] for r in rows]) for j in range(4)))


def plan_cost(instrs: list[Instruction], choice: tuple[str, ...], ratios: FloatArray) -> float:
    """Seconds of the program ``choice`` at ``ratios`` under HAP's cost model."""
    return program_cost_s(_program(instrs, choice), ratios)


def _best_choice(instrs: list[Instruction], ratios: FloatArray,
                 methods: tuple[str, ...]) -> tuple[str, ...]:
    out = []
    for ins in instrs:
        options = [m for m in methods if m in ins.methods] or ["allreduce"]
        costs = [program_cost_s(_program([ins], (m,)), ratios) for m in options]
        out.append(options[int(np.argmin(costs))])
    return tuple(out)


def profiled_ratios(instrs: list[Instruction], counts: FloatArray) -> FloatArray:
    """HAP's initial ratios: proportional to each device's speed on the data-parallel program
    (inverse of its total compute slope)."""
    dp = _program(instrs, tuple("allreduce" for _ in instrs))
    speed = 1.0 / np.asarray(dp.comp_slope).sum(axis=0)
    return np.asarray(speed / (counts * speed).sum())


def hap_plan(instrs: list[Instruction], counts: FloatArray,
             methods: tuple[str, ...] = METHODS, max_rounds: int = 10) -> HapPlan:
    """HAP's alternating optimisation: choose methods at B, re-solve B by the LP, repeat while
    the program gets cheaper."""
    ratios = profiled_ratios(instrs, counts)
    choice = _best_choice(instrs, ratios, methods)
    best = HapPlan(choice, ratios, plan_cost(instrs, choice, ratios), 0)
    for r in range(1, max_rounds + 1):
        ratios, cost = solve_ratios(_program(instrs, best.choice), counts)
        choice = _best_choice(instrs, ratios, methods)
        cost = min(cost, plan_cost(instrs, choice, ratios))
        if cost >= best.iteration_s * (1 - 1e-9):
            break
        if plan_cost(instrs, choice, ratios) > plan_cost(instrs, best.choice, ratios):
            choice = best.choice
        best = HapPlan(choice, ratios, cost, r)
    return best
