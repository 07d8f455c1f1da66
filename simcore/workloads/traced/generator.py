"""A traced training step -> the iteration graph of one data-parallel rank, costed per op.

Compute: every recorded op that runs a kernel becomes a node on the in-order stream
``s0.compute`` (program order, as a CUDA stream), costed by the calibrated kernel models of the
target accelerator (:mod:`simcore.hardware.compute`): matrix products and convolutions as GEMMs
(a batched product or a grouped convolution as one GEMM of ``count x m`` rows, the transformer
family's convention for batched GEMMs), fused attention cores by the attention model, every
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

The optimizer step runs after every gradient reduction: the traced optimizer ops as
memory-bound kernels when the trace holds them, else Adam's 28 bytes per parameter
(fp32 master weight, moments, gradient read and weight write), divided over the data-parallel
ranks with ZeRO >= 1.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from simcore.ir.graph import CommType, Graph, GraphBuilder, NodeKind
from simcore.ir.ops import OpTable
from simcore.specs.parallel import ParallelSpec
from simcore.traces.pytorch.step import PHASES, TracedOp, TracedParam, TracedStep
from simcore.workloads.placement import group_spans
from simcore.workloads.traced.spec import DDP_FIRST_BUCKET_MB, TracedSpec

__all__ = ["OPTIMIZER_BYTES_PER_PARAM", "TracedWorkload", "build_traced", "ddp_buckets"]

OPTIMIZER_BYTES_PER_PARAM = 28.0
_DP = 1  # engine.result.COMM_KINDS index of data-parallel traffic
_OPT = PHASES.index("optimizer")


@dataclass(frozen=True, eq=False)
class TracedWorkload:
    """The iteration graph of one data-parallel rank (fields of the family seam's ``Workload``).

    Attributes:
        graph: the DAG; node attrs ``template`` and ``stage`` (always 0).
        ops: kernels and templates.
        num_stages: 1 (no pipeline).
        in_flight: (1,): one micro-batch's activations alive at a time.
        dp_overlap: gradient reduction may overlap the backward pass.
        stage_device: device pool per stage (empty: pool 0).
    """

    graph: Graph
    ops: OpTable
    num_stages: int = 1
    in_flight: tuple[int, ...] = (1,)
    dp_overlap: bool = True
    stage_device: tuple[int, ...] = ()
    layers_per_chunk: int = 1
    chunk_layers: tuple[int, ...] = (1,)

    def device_of(self, stage: int) -> int:
        """Device pool of ``stage``."""
        return self.stage_device[stage] if self.stage_device else 0


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


class _Builder:
    def __init__(self, step: TracedStep, spec: TracedSpec, par: ParallelSpec,
                 gpus_per_node: int) -> None:
        self.step, self.par = step, par
        self.ops = OpTable()
        self.b = GraphBuilder(f"traced {spec.name or step.name}")
        self.span = group_spans(par, gpus_per_node)["dp"]
        self.zero = par.zero_stage
        self.shard = par.dp_size if self.zero >= 1 else 1
        self.tmpl = [self._template(op) for op in step.ops]
        self.last: int | None = None
        self.pending: list[int] = []
        params = step.params
        self.buckets = ddp_buckets(params, spec.bucket_mb)
        ready: list[tuple[int, int]] = []
        done = -1
        for k, bk in enumerate(self.buckets):  # reduced in bucket order
            done = max(done, *(params[i].grad_ready for i in bk))
            ready.append((done, k))
        self.ready_at: dict[int, list[int]] = {}
        for at, k in ready:
            self.ready_at.setdefault(at, []).append(k)
        self.units = _units(params, spec.bucket_mb) if self.zero == 3 else []
        self.gather_at: dict[int, list[int]] = {}
        for u, unit in enumerate(self.units):
            for key in ("first_forward", "first_backward"):
                uses = [getattr(params[i], key) for i in unit if getattr(params[i], key) >= 0]
                if uses:
                    self.gather_at.setdefault(min(uses), []).append(u)

    def _template(self, op: TracedOp) -> int | None:
        if op.view or op.phase == _OPT:
            return None
        parts: list[tuple[int, float]] = []
        for m, n, k, count in op.gemms:
            parts.append((self.ops.kernel("gemm", m * count, n, k), 1.0))
        if op.attention:
            bh, sq, skv, d, w = op.attention
            parts.append((self.ops.kernel("attn", bh, sq, skv, d), w))
        if not parts:
            nbytes = op.bytes_read + op.bytes_written
            if nbytes <= 0:
                return None
            parts.append((self.ops.kernel("mem", float(nbytes)), 1.0))
        return self.ops.template(op.name, parts)

    def _coll(self, name: str, ctype: CommType, nbytes: float) -> int:
        k = self.ops.kernel("coll", int(ctype), nbytes, self.span.size, self.span.ranks_per_node)
        return self.ops.template(name, [(k, 1.0)], _DP)

    def _node(self, tmpl: int, stream: str, deps: Sequence[int], name: str) -> int:
        kind = NodeKind.COMPUTE if stream.endswith("compute") else NodeKind.COLLECTIVE
        nid = self.b.add(kind, resources=[stream], deps=list(deps), rank=0, name=name,
                         template=tmpl, stage=0)
        if kind == NodeKind.COMPUTE:
            self.last = nid
        return nid

    def _bytes(self, idx: Sequence[int]) -> float:
        return float(sum(self.step.params[i].numel * self.step.params[i].elem_bytes for i in idx))

    def micro_batch(self, reduce: bool, grads: list[int]) -> None:
        step, p = self.step, self.par
        rtype = CommType.ALL_REDUCE if self.zero == 0 else CommType.REDUCE_SCATTER
        for i, op in enumerate(step.ops):
            deps: list[int] = []
            for u in self.gather_at.get(i, []):
                back = [] if p.dp_overlap or self.last is None else [self.last]
                t = self._coll("fsdp_param_gather", CommType.ALL_GATHER, self._bytes(self.units[u]))
                deps.append(self._node(t, "s0.dp", back, "fsdp_param_gather"))
            t_op = self.tmpl[i]
            if t_op is not None:
                self._node(t_op, "s0.compute", self.pending + deps, op.name)
                self.pending = []
            else:  # a view that needed a gather: the next kernel waits for it
                self.pending += deps
            if reduce and p.dp_overlap:
                for k in self.ready_at.get(i, []):
                    tr = self._coll("dp_grad_reduce", rtype, self._bytes(self.buckets[k]))
                    grads.append(self._node(tr, "s0.dp", [self.last] if self.last is not None
                                            else [], "dp_grad_reduce"))
        if reduce and not p.dp_overlap:
            for bk in self.buckets:
                tr = self._coll("dp_grad_reduce", rtype, self._bytes(bk))
                grads.append(self._node(tr, "s0.dp", [self.last] if self.last is not None else [],
                                        "dp_grad_reduce"))

    def optimizer(self) -> int:
        traced = [op for op in self.step.ops if op.phase == _OPT and not op.view
                  and op.bytes_read + op.bytes_written > 0]
        if traced:
            parts = [(self.ops.kernel("mem", float(op.bytes_read + op.bytes_written)),
                      1.0 / self.shard) for op in traced]
        else:
            nbytes = self.step.num_params * OPTIMIZER_BYTES_PER_PARAM / self.shard
            parts = [(self.ops.kernel("mem", nbytes), 1.0)]
        return self.ops.template("optimizer_step", parts)


def build_traced(spec: TracedSpec, parallel: ParallelSpec, gpus_per_node: int) -> TracedWorkload:
    """The iteration graph of one data-parallel rank of ``spec`` under the resolved ``parallel``
    (``tp = pp = cp = ep = 1``; checked by the family)."""
    step = spec.step
    g = _Builder(step, spec, parallel, gpus_per_node)
    zero, m = parallel.zero_stage, parallel.num_micro_batches
    gather_tmpls = []
    if zero in (1, 2):
        gather_tmpls = [g._coll("dp_param_gather", CommType.ALL_GATHER, g._bytes(bk))
                        for bk in g.buckets]
        if parallel.dp_overlap:  # steady state: last step's gathers overlap this forward
            for t in gather_tmpls:
                g._node(t, "s0.dp", [], "dp_param_gather")
    grads: list[int] = []
    for j in range(m):
        g.micro_batch(zero >= 2 or j == m - 1, grads)
    deps = grads + ([g.last] if g.last is not None else [])
    opt = g._node(g.optimizer(), "s0.compute", deps, "optimizer_step")
    if zero in (1, 2) and not parallel.dp_overlap:
        for t in gather_tmpls:
            g._node(t, "s0.dp", [opt], "dp_param_gather")
    return TracedWorkload(graph=g.b.build(), ops=g.ops, dp_overlap=parallel.dp_overlap)
