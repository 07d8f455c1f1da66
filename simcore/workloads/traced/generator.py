"""A traced training step -> the iteration graph of one data-parallel rank, costed per op.

Compute: every recorded op that runs a kernel becomes a node on the in-order stream
``s0.compute`` (program order, as a CUDA stream), costed by the calibrated kernel models of the
target accelerator (:mod:`simcore.hardware.compute`): matrix products and convolutions as GEMMs
(a batched product or a grouped convolution as one GEMM of ``count x m`` rows, the transformer
family's convention for batched GEMMs), fused attention cores as the transformer family costs
its core (:func:`~simcore.workloads.transformer.layers.attention_core`: the attention model, or
with ``parallel.flash_attention = false`` Megatron's unfused batched GEMMs and softmax), every
other op as a memory-bound kernel over the bytes it reads and writes; views cost nothing. The
traced batch is one micro-batch; ``num_micro_batches`` of them run back to back.

Data parallelism, as PyTorch issues it:

- **DDP** (Li et al., VLDB 2020; ``torch.nn.parallel.DistributedDataParallel``): parameters go
  into gradient buckets in reverse ``model.parameters()`` order, a bucket closing once it holds
  1 MiB (the first) or ``bucket_mb`` (25 MiB, the others); a bucket's all-reduce is issued on the
  ``s0.dp`` stream, in bucket order, once the backward op that writes its last gradient has
  run, in the last micro-batch only (``no_sync`` accumulation before it); with
  ``dp_overlap = false`` all of them wait for the end of the backward pass.
- **ZeRO-1/2** reduce-scatter the buckets instead (ZeRO-2 in every micro-batch) and all-gather
  the updated parameters after the step (overlapped with the next forward when ``dp_overlap``:
  issued at the start of the iteration, the steady state, as the transformer family does).
- **ZeRO-3 / FSDP**: parameters are grouped into units of ``bucket_mb`` in order of first use;
  each unit is all-gathered before its first forward op and again before its first backward
  op, in every micro-batch (prefetched in order on the dp stream when ``dp_overlap``, else
  issued after the compute op before), and gradients are reduce-scattered.

Pipeline parallelism (when the trace names its repeated blocks, ``simsweep trace --blocks``):
the blocks are split over ``pp`` stages as the plan splits layers (``parallel.chunk_layers``),
the ops before the first block (embedding) go to the first stage and those after the last
(head, loss) to the last; each stage runs the 1F1B program of
:func:`~simcore.workloads.pipeline.stage_program` and sends the boundary block's output
activation forward (its gradient backward) on the ``pp{a}>{b}`` link stream, as the
transformer family does (``1/tp`` of it per rank with tensor parallelism, Megatron's
scatter/gather, Narayanan et al. 2021 §4.1); data parallelism then applies per stage to that stage's parameters.

The optimizer step runs after every gradient reduction: the traced optimizer ops as
memory-bound kernels when the trace holds them, else Adam's 28 bytes per parameter
(fp32 master weight, moments, gradient read and weight write), divided over the data-parallel
ranks with ZeRO >= 1.

Tensor parallelism (``parallel.tp > 1``, named blocks): :mod:`.tensor_parallel` splits the
blocks' linear layers Megatron-style; each op is costed as one TP rank runs it and the TP
all-reduces are blocking collectives on the compute stream (``s0.compute``), as the transformer
family issues them without TP communication overlap; DP and the optimizer see the split
parameters.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from simcore.hardware.compute import ACTIVATION_BYTES
from simcore.ir.graph import CommType, GraphBuilder, NodeKind
from simcore.ir.ops import OpTable
from simcore.ir.streams import Stream, StreamKind
from simcore.specs.parallel import ParallelSpec
from simcore.traces.pytorch.step import (
    AFTER_BLOCKS,
    BEFORE_BLOCKS,
    PHASES,
    TracedOp,
    TracedParam,
    TracedStep,
)
from simcore.workloads._base import Workload
from simcore.workloads.layout import RankLayout
from simcore.workloads.pipeline import stage_program
from simcore.workloads.traced.spec import DDP_FIRST_BUCKET_MB, TracedSpec
from simcore.workloads.traced.tensor_parallel import split_step
from simcore.workloads.transformer.layers import attention_core

__all__ = ["OPTIMIZER_BYTES_PER_PARAM", "TracedWorkload", "build_traced", "ddp_buckets", "stage_split",
           "traced_graph_nodes"]

OPTIMIZER_BYTES_PER_PARAM = 28.0
_TP, _DP, _PP = 0, 1, 2  # engine.result.COMM_KINDS indices of tensor, data-parallel, pipeline traffic
_SEND_BASE = 1 << 40  # explicit ids of pipeline sends, referenced before they are added
_OPT = PHASES.index("optimizer")


@dataclass(frozen=True, eq=False)
class TracedWorkload(Workload):
    """The iteration graph of one data-parallel rank (a :class:`~simcore.workloads._base.Workload`).

    Attributes (beyond the base's): ``layers_per_chunk`` / ``chunk_layers``, read by the
    transformer exporter this family reuses (one "layer" per chunk).
    """

    layers_per_chunk: int = 1
    chunk_layers: tuple[int, ...] = (1,)



def ddp_buckets(params: Sequence[TracedParam], cap_mb: float) -> list[list[int]]:
    """DDP's assignment (its reducer's ``compute_bucket_assignment_by_size``): parameters with a
    gradient in reverse order; a parameter joins the open bucket, which closes once it holds at
    least the cap (1 MiB for the first bucket, ``cap_mb`` MiB after)."""
    out: list[list[int]] = [[]]
    size = 0
    for i in reversed(range(len(params))):
        if params[i].grad_ready < 0:
            continue
        out[-1].append(i)
        size += params[i].numel * params[i].elem_bytes
        if size >= (DDP_FIRST_BUCKET_MB if len(out) == 1 else cap_mb) * 2**20:
            out.append([])
            size = 0
    return [b for b in out if b]


def _units(params: Sequence[TracedParam], cap_mb: float) -> list[list[int]]:
    """FSDP / ZeRO-3 units: parameters in order of first forward use, ``cap_mb`` each."""
    order = sorted((i for i, p in enumerate(params) if p.first_forward >= 0),
                   key=lambda i: (params[i].first_forward, i))
    out: list[list[int]] = [[]]
    size = 0
    for i in order:
        nbytes = params[i].numel * params[i].elem_bytes
        if out[-1] and size + nbytes > cap_mb * 2**20:
            out.append([])
            size = 0
        out[-1].append(i)
        size += nbytes
    return [u for u in out if u]


class _Stage:
    """Emits the program of one pipeline stage (one representative data-parallel rank)."""

    def __init__(self, g: _Shared, s: int, ops_fwd: list[int], ops_bwd: list[int],
                 params: list[int]) -> None:
        self.g, self.s = g, s
        self.fwd, self.bwd = ops_fwd, ops_bwd
        self.compute, self.dp = Stream.compute(s), Stream(StreamKind.DP, s)
        self.last: int | None = None
        self.pending: list[int] = []
        step, spec = g.step, g.spec
        self.params = params
        self.buckets = ddp_buckets([step.params[i] for i in params], spec.bucket_mb)
        self.buckets = [[params[j] for j in bk] for bk in self.buckets]
        self.ready_at: dict[int, list[int]] = {}
        done = -1
        for k, bk in enumerate(self.buckets):  # reduced in bucket order
            done = max(done, *(step.params[i].grad_ready for i in bk))
            self.ready_at.setdefault(done, []).append(k)
        self.units: list[list[int]] = []
        self.gather_at: dict[int, list[int]] = {}
        if g.zero == 3:
            sub = _units([step.params[i] for i in params], spec.bucket_mb)
            self.units = [[params[j] for j in u] for u in sub]
            for u, unit in enumerate(self.units):
                for key in ("first_forward", "first_backward"):
                    uses = [getattr(step.params[i], key) for i in unit
                            if getattr(step.params[i], key) >= 0]
                    if uses:
                        self.gather_at.setdefault(min(uses), []).append(u)

    def node(self, tmpl: int, stream: Stream, deps: Sequence[int], name: str) -> int:
        kind = NodeKind.COMPUTE if stream.is_compute else NodeKind.COLLECTIVE
        nid = self.g.b.add(kind, resources=[stream], deps=list(deps), rank=self.s, name=name,
                           template=tmpl, stage=self.s)
        if kind == NodeKind.COMPUTE:
            self.last = nid
        return nid

    def _bytes(self, idx: Sequence[int]) -> float:
        return float(sum(self.g.step.params[i].numel * self.g.step.params[i].elem_bytes for i in idx))

    def _after_last(self) -> list[int]:
        return [self.last] if self.last is not None else []

    def run(self, indices: list[int], deps: list[int], reduce: bool) -> None:
        """Emit the ops ``indices`` (one pass of one micro-batch); the first waits for ``deps``."""
        g, step = self.g, self.g.step
        self.pending += deps
        rtype = CommType.ALL_REDUCE if g.zero == 0 else CommType.REDUCE_SCATTER
        for i in indices:
            gathers: list[int] = []
            for u in self.gather_at.get(i, []):
                back = [] if g.par.dp_overlap else self._after_last()
                t = g.coll("fsdp_param_gather", CommType.ALL_GATHER, self._bytes(self.units[u]))
                gathers.append(self.node(t, self.dp, back, "fsdp_param_gather"))
            t_op = g.tmpl[i]
            if t_op is not None:
                self.node(t_op, self.compute, self.pending + gathers, step.ops[i].name)
                self.pending = []
            else:  # a view that needed a gather: the next kernel waits for it
                self.pending += gathers
            if i in g.tp_after:  # blocking TP all-reduce on the compute stream
                self.last = g.b.add(NodeKind.COLLECTIVE, resources=[self.compute],
                                    deps=self.pending + self._after_last(), rank=self.s,
                                    name="tp_allreduce", template=g.tp_after[i], stage=self.s)
                self.pending = []
            if reduce and g.par.dp_overlap:
                for k in self.ready_at.get(i, []):
                    tr = g.coll("dp_grad_reduce", rtype, self._bytes(self.buckets[k]))
                    self.grads.append(self.node(tr, self.dp, self._after_last(), "dp_grad_reduce"))
        if reduce and not g.par.dp_overlap:
            for bk in self.buckets:
                tr = g.coll("dp_grad_reduce", rtype, self._bytes(bk))
                self.grads.append(self.node(tr, self.dp, self._after_last(), "dp_grad_reduce"))

    def send(self, forward: bool, micro_batch: int, dst: int) -> None:
        g = self.g
        nid = g.send_id(forward, micro_batch, self.s)
        # Megatron's scatter/gather: each TP rank sends 1/tp of the boundary activation
        nbytes = g.step.block_out_bytes[g.last_block[min(self.s, dst)]] / g.par.tp
        k = g.ops.kernel("p2p", float(nbytes), float(g.spans["pp"].cross_node))
        t = g.ops.template("pp_send", [(k, 1.0)], _PP)
        g.b.add(NodeKind.SEND, resources=[Stream.link(self.s, dst)], deps=self._after_last(),
                rank=self.s, name="pp_send", node_id=nid, template=t, stage=self.s, peer=dst)

    def emit(self) -> int:
        """The stage's iteration; returns the most micro-batches alive at once."""
        g, par = self.g, self.g.par
        m, pp, s, zero = par.num_micro_batches, par.pp, self.s, g.zero
        gather_tmpls = []
        if zero in (1, 2):
            gather_tmpls = [g.coll("dp_param_gather", CommType.ALL_GATHER, self._bytes(bk))
                            for bk in self.buckets]
            if par.dp_overlap:  # steady state: last step's gathers overlap this forward
                for t in gather_tmpls:
                    self.node(t, self.dp, [], "dp_param_gather")
        self.grads: list[int] = []
        alive = peak = 0
        for op in stage_program(s, pp, 1, m):
            if op.forward:
                alive += 1
                peak = max(peak, alive)
                deps = [g.send_id(True, op.micro_batch, s - 1)] if s > 0 else []
                self.run(self.fwd, deps, False)
                if s < pp - 1:
                    self.send(True, op.micro_batch, s + 1)
            else:
                alive -= 1
                deps = [g.send_id(False, op.micro_batch, s + 1)] if s < pp - 1 else []
                self.run(self.bwd, deps, zero >= 2 or op.micro_batch == m - 1)
                if s > 0:
                    self.send(False, op.micro_batch, s - 1)
        opt = self.node(g.optimizer(self.params), self.compute, self.grads + self._after_last(),
                        "optimizer_step")
        if zero in (1, 2) and not par.dp_overlap:
            for t in gather_tmpls:
                self.node(t, self.dp, [opt], "dp_param_gather")
        return peak


class _Shared:
    """What every stage shares: the step, the plan, the op table, the graph builder."""

    def __init__(self, step: TracedStep, spec: TracedSpec, par: ParallelSpec,
                 gpus_per_node: int, tp_after: dict[int, int] | None = None) -> None:
        self.step, self.spec, self.par = step, spec, par
        self.ops = OpTable()
        self.b = GraphBuilder(f"traced {spec.name or step.name}")
        self.spans = RankLayout.of(par, gpus_per_node).spans()
        tp = self.spans["tp"]
        self.tp_after = {i: self.ops.template("tp_allreduce", [(self.ops.kernel(
            "coll", int(CommType.ALL_REDUCE), float(nbytes), tp.size, tp.ranks_per_node), 1.0)], _TP)
            for i, nbytes in (tp_after or {}).items()}
        self.zero = par.zero_stage
        self.shard = par.dp_size if self.zero >= 1 else 1
        self.tmpl = [self._template(op) for op in step.ops]
        # the last block of every stage: its output crosses the stage boundary
        self.last_block: list[int] = []
        if par.pp > 1:
            for count in par.chunk_layers(step.num_blocks):
                self.last_block.append((self.last_block[-1] if self.last_block else -1) + count)

    def send_id(self, forward: bool, micro_batch: int, stage: int) -> int:
        m = self.par.num_micro_batches
        return _SEND_BASE + ((0 if forward else 1) * m + micro_batch) * self.par.pp + stage

    def _template(self, op: TracedOp) -> int | None:
        if op.view or op.phase == _OPT:
            return None
        parts: list[tuple[int, float]] = []
        for m, n, k, count in op.gemms:
            parts.append((self.ops.kernel("gemm", m * count, n, k), 1.0))
        if op.attention:  # the transformer family's core: fused, or Megatron's unfused one
            bh, sq, skv, d, w = op.attention
            parts += attention_core(self.ops, bh, sq, skv, d, self.par.flash_attention, w == 1.0,
                                    ACTIVATION_BYTES[self.par.precision])
        if not parts:
            nbytes = op.bytes_read + op.bytes_written
            if nbytes <= 0:
                return None
            parts.append((self.ops.kernel("mem", float(nbytes)), 1.0))
        return self.ops.template(op.name, parts)

    def coll(self, name: str, ctype: CommType, nbytes: float) -> int:
        span = self.spans["dp"]
        k = self.ops.kernel("coll", int(ctype), nbytes, span.size, span.ranks_per_node)
        return self.ops.template(name, [(k, 1.0)], _DP)

    def optimizer(self, params: Sequence[int]) -> int:
        """The step of ``params``: the traced optimizer ops (one stage), else Adam's bytes."""
        traced = [op for op in self.step.ops if op.phase == _OPT and not op.view
                  and op.bytes_read + op.bytes_written > 0]
        if traced and self.par.pp == 1 and self.par.tp == 1:
            parts = [(self.ops.kernel("mem", float(op.bytes_read + op.bytes_written)),
                      1.0 / self.shard) for op in traced]
        else:
            numel = sum(self.step.params[i].numel for i in params)
            parts = [(self.ops.kernel("mem", numel * OPTIMIZER_BYTES_PER_PARAM / self.shard), 1.0)]
        return self.ops.template("optimizer_step", parts)


def traced_graph_nodes(spec: TracedSpec, parallel: ParallelSpec) -> int:
    """Upper bound on the nodes :func:`build_traced` emits, without building them: per
    micro-batch every costed forward and backward op of the trace, the ZeRO-3 gathers (at most
    two per unit), the pipeline sends; per stage its gradient buckets (reduced once, or every
    micro-batch from ZeRO-2 on), its ZeRO-1/2 parameter gathers and the optimizer step."""
    step, par = spec.step, parallel
    m, pp, zero = par.num_micro_batches, par.pp, par.zero_stage
    ops = sum(1 for op in step.ops if op.phase in (0, 1) and not op.view
              and (op.gemms or op.attention or op.bytes_read + op.bytes_written > 0))
    _, params = stage_split(step, par)
    buckets = units = 0
    for mine in params:
        stage_params = [step.params[i] for i in mine]
        buckets += len(ddp_buckets(stage_params, spec.bucket_mb))
        if zero == 3:
            units += len(_units(stage_params, spec.bucket_mb))
    reduces = buckets * (m if zero >= 2 else 1) + (buckets if zero in (1, 2) else 0)
    return m * (ops + 2 * units + 2 * pp) + reduces + pp


def stage_split(step: TracedStep, parallel: ParallelSpec) -> tuple[list[int], list[list[int]]]:
    """(pipeline stage of every op, parameter indices of every stage): blocks split as the plan
    splits layers, the ops before the blocks on the first stage, after them on the last; a
    parameter lives on the stage of its first forward use (else of its gradient)."""
    pp = parallel.pp
    block_stage = {BEFORE_BLOCKS: 0, AFTER_BLOCKS: pp - 1}
    if pp > 1:
        first = 0
        for st, count in enumerate(parallel.chunk_layers(step.num_blocks)):
            block_stage.update({j: st for j in range(first, first + count)})
            first += count
    op_stage = [block_stage.get(op.block, 0) for op in step.ops]
    params: list[list[int]] = [[] for _ in range(pp)]
    for i, p in enumerate(step.params):
        at = p.first_forward if p.first_forward >= 0 else p.grad_ready
        params[op_stage[at] if at >= 0 else 0].append(i)
    return op_stage, params


def build_traced(spec: TracedSpec, parallel: ParallelSpec, gpus_per_node: int) -> TracedWorkload:
    """The iteration graph of one data-parallel rank per pipeline stage of ``spec`` under the
    resolved ``parallel`` (``cp = ep = vp = 1``; ``pp`` up to the named blocks, ``tp`` over
    their linear layers; checked by the family)."""
    split = split_step(spec.step, parallel.tp)
    step = split.step
    g = _Shared(step, spec, parallel, gpus_per_node, split.allreduce_after)
    pp = parallel.pp
    op_stage, params = stage_split(step, parallel)
    fwd: list[list[int]] = [[] for _ in range(pp)]
    bwd: list[list[int]] = [[] for _ in range(pp)]
    for i, op in enumerate(step.ops):
        if op.phase == 0:
            fwd[op_stage[i]].append(i)
        elif op.phase == 1:
            bwd[op_stage[i]].append(i)
    flights = tuple(_Stage(g, s, fwd[s], bwd[s], params[s]).emit() for s in range(pp))
    return TracedWorkload(graph=g.b.build(), ops=g.ops, num_stages=pp, in_flight=flights,
                          dp_overlap=parallel.dp_overlap)
