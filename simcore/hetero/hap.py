"""HAP's plan for a transformer or a VGG on a cluster of mixed device pools (Zhang et al.,
EuroSys 2024).

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

Methods per weight ``W`` (``k x n``, a Linear; tokens or samples ``T`` per iteration, ``e``
bytes per element, ``N`` devices; a VGG's convolutions have the three data-parallel ones):

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

A transformer's embedding table has the data-parallel methods and ``feature`` = sharded over the
vocabulary (partial-sum lookups reduce-scattered to batch sharding forward, all-gathered
backward, padded; no gradient traffic).

``X`` is gathered as the smallest tensor that determines it (``gather_in`` values per row): HAP
may place the all-gather on any tensor of a chain of element-wise / pooling ops, so VGG on
CIFAR gathers the 512 values per image before the adaptive pool that replicates them into fc1's
25088 inputs [recon]; the same holds for the SFB factor ``X``.

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
from simcore.network.collectives.uneven import GROUPED_AG_EFFICIENCY, GROUPED_RS_EFFICIENCY
from simcore.specs.system import SystemSpec
from simcore.workloads.cnn.vgg import VggLayer
from simcore.workloads.transformer.spec import ModelSpec

__all__ = ["METHODS", "HapPlan", "Instruction", "hap_plan", "instructions", "plan_cost",
           "vgg_instructions"]

FloatArray = NDArray[np.float64]

METHODS = ("allreduce", "rs_ag_padded", "rs_ag_grouped", "sfb", "feature")
#: HAP's measured grouped-call efficiency (:mod:`simcore.network.collectives.uneven`)
GROUPED_AG_EFF = GROUPED_AG_EFFICIENCY
GROUPED_RS_EFF = GROUPED_RS_EFFICIENCY


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


class _Costs:
    """Per-pool costs of the instructions of one cluster (one batch system)."""

    def __init__(self, system: SystemSpec, precision: str) -> None:
        sb = SystemBatch.from_specs([system])
        self.counts = sb.pool_count[:, 0]
        self.n = int(self.counts.sum())
        self.e = ELEMENT_BYTES[precision]
        self.precision = precision
        k_node = system.gpus_per_node
        self.pools = [sb.pool(d) for d in range(sb.num_pools)]
        self.comm = {ct: [_affine_comm(p, ct, self.n, k_node) for p in self.pools]
                     for ct in (CommType.ALL_REDUCE, CommType.ALL_GATHER,
                                CommType.REDUCE_SCATTER, CommType.ALL_TO_ALL)}
        self.ovh = np.array([float(p.calib["kernel_overhead_us"][0]) * 1e-6 for p in self.pools])
        self.zero = np.zeros(len(self.pools))

    def coll(self, ct: CommType, nbytes: float, eff: float = 1.0) -> tuple[FloatArray, FloatArray]:
        """(latency, bandwidth seconds) of a collective of ``nbytes`` on each pool."""
        a = np.array([c[0] for c in self.comm[ct]])
        b = np.array([c[1] for c in self.comm[ct]])
        return a / eff, b * nbytes / eff

    def gemms(self, shapes: list[tuple[float, float, float]]) -> FloatArray:
        """(D,) seconds of GEMMs ``(m, n, k)`` on a device of each pool."""
        return np.array([sum(float(gemm_time_s(p, m, n, k, self.precision)[0, 0])
                             for m, n, k in shapes) for p in self.pools])

    def memory(self, nbytes: float) -> FloatArray:
        """(D,) seconds of a memory-bound pass over ``nbytes``."""
        return np.array([float(memory_bound_time_s(p, nbytes)[0, 0]) for p in self.pools])

    def gradient_methods(self, t: FloatArray, kernels: int, weight_bytes: float,
                         ) -> dict[str, tuple[FloatArray, FloatArray, FloatArray, FloatArray]]:
        """The data-parallel methods of a weight whose per-device compute at the even split is
        ``t`` (D,) over ``kernels`` kernels (their overhead kept constant)."""
        n, zero = self.n, self.zero
        const = kernels * self.ovh
        slope = (t - const) * n  # seconds per unit of ratio
        ar_a, ar_b = self.coll(CommType.ALL_REDUCE, weight_bytes)
        rs_a, rs_b = self.coll(CommType.REDUCE_SCATTER, weight_bytes)
        ag_a, ag_b = self.coll(CommType.ALL_GATHER, weight_bytes)
        grs_a, grs_b = self.coll(CommType.REDUCE_SCATTER, weight_bytes, GROUPED_RS_EFF)
        gag_a, gag_b = self.coll(CommType.ALL_GATHER, weight_bytes, GROUPED_AG_EFF)
        return {
            "allreduce": (const, slope, ar_a + ar_b, zero),
            "rs_ag_padded": (const, slope, rs_a + ag_a, n * (rs_b + ag_b)),
            "rs_ag_grouped": (const, slope, grs_a + grs_b + gag_a + gag_b, zero),
        }

    def linear(self, name: str, count: int, rows: float, kin: int, kout: int,
               gather_in: int = 0) -> Instruction:
        """A Linear ``kin -> kout`` over ``rows`` rows (tokens or samples) per iteration;
        ``gather_in``: values per row that determine its input (0: ``kin``)."""
        n, e = self.n, self.e
        per_dev = rows / n
        t = 3.0 * self.gemms([(per_dev, kout, kin)])  # fwd + 2 bwd GEMMs
        methods = self.gradient_methods(t, 3, kin * kout * e)
        const, slope = methods["allreduce"][:2]
        x_in = (gather_in or kin) * rows * e
        fx_a, fx_b = self.coll(CommType.ALL_GATHER, x_in + rows * kout * e)
        xa_a, xa_b = self.coll(CommType.ALL_GATHER, x_in)
        xr_a, xr_b = self.coll(CommType.REDUCE_SCATTER, x_in)
        ya_a, ya_b = self.coll(CommType.ALL_TO_ALL, rows * kout * e)
        methods["sfb"] = (const + slope / 3.0, 2.0 * slope / 3.0, 2.0 * fx_a, n * fx_b)
        methods["feature"] = (const, slope, xa_a + xr_a + 2.0 * ya_a,
                              n * (xa_b + xr_b + 2.0 * ya_b))
        return Instruction(name, count, methods)

    def local(self, name: str, count: int, t: FloatArray, overheads: float) -> Instruction:
        """Compute with no weight (data parallel, no communication)."""
        o = overheads * self.ovh
        return Instruction(name, count, {"allreduce": (o, (t - o) * self.n, self.zero,
                                                       self.zero)})


def instructions(model: ModelSpec, system: SystemSpec, global_batch: int,
                 precision: str = "fp32") -> tuple[list[Instruction], FloatArray]:
    """The instructions of one training iteration of ``model`` with ``global_batch`` samples on
    ``system`` (one batch system), and the (D,) device counts of its pools."""
    if model.is_moe or model.is_mla:  # their weights are not in the list below
        raise InputError("workload.name", model.name, "HAP's instructions are those of a dense "
                         "block (QKV, attention output, two MLP Linears): no mixture of experts "
                         "or latent attention")
    c = _Costs(system, precision)
    n = c.n
    if global_batch % n:
        raise InputError("global_batch", global_batch, f"must be divisible by num_gpus={n}")
    e = c.e
    h, s, f = model.hidden_size, model.seq_len, model.ffn
    tokens = float(global_batch * s)
    per_dev = tokens / n
    layers = model.num_layers
    attn = np.array([3.5 * float(attention_time_s(p, global_batch / n * model.num_heads, s, s,
                                                  model.head_dim, False, precision)[0, 0])
                     for p in c.pools])  # flash attention: backward 2.5x forward
    elem = 3.0 * c.memory(per_dev * (20 * h + 2 * f) * e)
    out = [c.linear("qkv", layers, tokens, h, model.qkv_out),
           c.linear("attn_out", layers, tokens, h, h),
           c.linear("fc1", layers, tokens, h, f), c.linear("fc2", layers, tokens, f, h),
           c.local("attention_core", layers, attn, 3.0), c.local("elementwise", layers, elem, 3.0),
           c.linear("output_layer", 1, tokens, h, model.vocab_size)]
    # the embedding table: replicated (its gradient reduced as any weight's) or sharded over the
    # vocabulary: a lookup gives partial sums, reduce-scattered to batch sharding forward and
    # all-gathered backward (padded), no gradient traffic
    emb = c.gradient_methods(c.zero, 0, model.vocab_size * h * e)
    rs_a, rs_b = c.coll(CommType.REDUCE_SCATTER, tokens * h * e)
    ag_a, ag_b = c.coll(CommType.ALL_GATHER, tokens * h * e)
    emb["feature"] = (c.zero, c.zero, rs_a + ag_a, n * (rs_b + ag_b))
    out.append(Instruction("embedding", 1, emb))
    return out, c.counts


def vgg_instructions(layers: list[VggLayer], system: SystemSpec, global_batch: int,
                     precision: str = "fp32") -> tuple[list[Instruction], FloatArray]:
    """The instructions of one training iteration of a VGG (:func:`simcore.workloads.cnn.vgg.
    vgg_layers`) with ``global_batch`` samples: every convolution data parallel (all-reduce or
    RS + AG of its gradient; its activations are far larger than its weights), every Linear
    with all methods (feature sharding, SFB, ...); a sharded Linear gathers the values that
    determine its input (``gather_in``: before a replicating adaptive pool, HAP communicates the
    smaller tensor of the chain). Convolutions as implicit GEMMs (forward, data and weight
    gradients) plus bias/ReLU passes (read + write of the output, twice backward); max pools as
    memory-bound passes."""
    c = _Costs(system, precision)
    n, e = c.n, c.e
    if global_batch % n:
        raise InputError("global_batch", global_batch, f"must be divisible by num_gpus={n}")
    per_dev = global_batch / n
    out: list[Instruction] = []
    for lay in layers:
        if lay.kind == "conv":
            pix = per_dev * lay.h * lay.h
            shapes: list[tuple[float, float, float]] = [
                (pix, lay.c_out, lay.c_in * 9), (lay.c_out, lay.c_in * 9, pix)]
            if lay.c_in > 3:  # no data gradient for the input image
                shapes.append((pix, lay.c_in, lay.c_out * 9.0))
            t = c.gemms(shapes) + 3.0 * c.memory(2.0 * pix * lay.c_out * e)
            out.append(Instruction(lay.name, 1,
                                   c.gradient_methods(t, len(shapes) + 3, lay.params * e)))
        elif lay.kind == "pool":
            t = 2.0 * c.memory(per_dev * lay.c_in * lay.h * lay.h * 1.25 * e)
            out.append(c.local(lay.name, 1, t, 2.0))
        else:
            out.append(c.linear(lay.name, 1, float(global_batch), lay.c_in, lay.c_out,
                                lay.gather_in))
    return out, c.counts


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
