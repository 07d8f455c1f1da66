"""Transformer training iteration -> workload graph, one representative GPU per pipeline stage.

Symmetry reduction (DESIGN.md, "The vectorized engine"; Echo's "one trace per unique (PP stage,
TP rank)", methods-hap-ace-echo.md §3.1): on a symmetric network every rank of a TP group, every
CP rank and every DP replica runs the same program at the same time, so the graph holds one
rank per pipeline stage. A collective among identical ranks then only occupies the
representative's stream; its cost comes from the group's size and span
(:class:`simcore.workloads.layout.RankLayout`).
Point-to-point pipeline sends are nodes on a per-direction link stream between two stages.

Streams per stage ``s`` (in-order, as CUDA streams): ``s.compute`` (kernels and blocking
collectives: TP without overlap, EP all-to-all), ``s.tp`` (chunked TP collectives when
``tp_comm_overlap``), ``s.cp`` (ring KV exchange), ``s.ep`` (a MoE layer's all-to-all in token
chunks pipelined with its experts, ``ep_overlap_chunks``), ``s.dp`` (gradient reduction, ZeRO
gathers), ``pp{a}>{b}`` (activations/gradients from stage a to b).

Data parallelism and ZeRO (Rajbhandari et al. 2020; see :class:`ParallelSpec`): gradients of
each layer are reduced (all-reduce, or reduce-scatter for ZeRO >= 1) after that layer's last
backward (every backward for ZeRO 2/3), on the dp stream, overlapped with the remaining
backward when ``dp_overlap``, else after the stage's last backward; ZeRO-1/2 all-gather the
updated parameters (overlapped with the next forward when ``dp_overlap``: modelled as a prefetch
at the start of the iteration, the steady state); ZeRO-3 all-gathers each layer's parameters
before its forward and its backward in every micro-batch (one layer ahead when overlapped).
Without ``grad_accumulation_fusion`` (the DeepSpeed pipeline engine) each layer's backward is
followed by a memory-bound add of its 16-bit weight gradient into the gradient buffer, every
micro-batch, and the reduction reads the buffer's dtype (:func:`grad_buffer_bytes`). With
DeepSpeed's ``BF16_Optimizer`` (``parallel.bf16_optimizer``, :func:`bf16_optimizer_path`) the add
goes through an fp32 temporary and the fp32 gradients are all-reduced in 16 bits, followed by the
optimizer shard's parameter all-gather (DeepSpeed 0.6.5 ``runtime/bf16_optimizer.py``:
``update_hp_grads``, ``step``; ``runtime/pipe/engine.py``: ``_exec_backward_pass``,
``_bf16_reduce_grads``; ``runtime/engine.py``: ``communication_data_type``, ``allreduce_bucket``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import NamedTuple, cast

import numpy as np
from numpy.typing import NDArray

from simcore.errors import InputError
from simcore.hardware.compute import ACTIVATION_BYTES
from simcore.ir.blocks import PipelinedBlock
from simcore.ir.graph import CommType, Graph, GraphBuilder, LazyGraph, NodeKind
from simcore.ir.intsets import unique_sorted
from simcore.ir.ops import OpTable
from simcore.ir.runs import Condensed, RunBuilder
from simcore.ir.streams import CommKind, Stream, StreamKind
from simcore.limits import limit
from simcore.specs.parallel import ParallelSpec
from simcore.workloads._base import Workload
from simcore.workloads.layout import GroupSpan, RankLayout
from simcore.workloads.pipeline import (
    PipeOp,
    pipeline_program_arrays,
    stage_program,
    stage_program_arrays,
)
from simcore.workloads.transformer.emitter import TP_OVERLAP_CHUNKS, Emitter, close_overlap_blocks
from simcore.workloads.transformer.layers import LayerOps, Step, build_layer_ops
from simcore.workloads.transformer.replay import (
    MARKS,
    PREV,
    PassRecorder,
    RecordedPass,
    replay,
)
from simcore.workloads.transformer.spec import ModelSpec

__all__ = ["TP_OVERLAP_CHUNKS", "RunEmitter", "TransformerWorkload", "bf16_optimizer_path",
           "build_transformer", "build_transformer_nodes", "grad_accumulation_bytes",
           "grad_buffer_bytes", "grad_reduce_bytes"]

_DP, _PP = int(CommKind.DP), int(CommKind.PP)
_GRAD_BYTES = 2.0  # gradients reduced in 16-bit (Megatron default, grad_reduce_in_fp32 off)
_FP32 = 4.0
#: HBM bytes per parameter per iteration of the BF16_Optimizer's reduction casts: fp32 -> 16-bit
#: before the all-reduce (read 4, write 2) and back (read 2, write 4)
_REDUCE_CAST_BYTES = 12.0


def bf16_optimizer_path(par: ParallelSpec) -> bool:
    """DeepSpeed's BF16_Optimizer gradient path applies: the stack asks for it, the accumulation
    is unfused, the run is bf16 (or fp8 / fp4 GEMMs in a bf16 run: fp16 runs take DeepSpeed's
    fp16 / ZeRO optimizers, fp32 ones its plain optimizer) and
    ZeRO is at most stage 1 (DeepSpeed builds the BF16_Optimizer for bf16 without ZeRO, where it
    shards the optimizer states itself; ZeRO-2/3 bring their own optimizers)."""
    return (par.bf16_optimizer and not par.grad_accumulation_fusion
            and par.precision in ("bf16", "fp8", "fp4") and par.zero_stage <= 1)


def grad_buffer_bytes(par: ParallelSpec) -> float:
    """Bytes per parameter of the gradient buffer the data-parallel reduction reads: the
    weight gradient's own width (16-bit, or 4 bytes in an fp32 / tf32 run) with accumulation
    fusion (Megatron-Core's default) or in an fp16 run; fp32 when a bf16 / fp8 / fp4 run
    accumulates with a separate kernel (Megatron-LM forces fp32 accumulation with bf16;
    DeepSpeed's bf16 optimizer keeps fp32 gradients)."""
    if par.grad_accumulation_fusion or par.precision == "fp16":
        return ACTIVATION_BYTES[par.precision]
    return _FP32


def grad_accumulation_bytes(par: ParallelSpec) -> float:
    """HBM bytes per parameter per micro-batch of an unfused gradient accumulation (read the
    weight-gradient GEMM's output, 16-bit or fp32 as the run's activations, read and write the
    buffer); 0 when fused into the weight-gradient GEMM."""
    if par.grad_accumulation_fusion:
        return 0.0
    if bf16_optimizer_path(par):
        # hp_grad.add_(lp.grad.to(fp32)): the cast reads 2 and writes a 4-byte temporary, the
        # add reads the buffer and the temporary and writes the buffer (DeepSpeed 0.6.5
        # BF16_Optimizer.update_hp_grads, called after every micro-batch's backward)
        return ACTIVATION_BYTES[par.precision] + _FP32 + 3.0 * _FP32
    return ACTIVATION_BYTES[par.precision] + 2.0 * grad_buffer_bytes(par)


def grad_reduce_bytes(par: ParallelSpec) -> float:
    """Bytes per gradient element the data-parallel reduction moves: the buffer's dtype, or the
    16-bit communication dtype DeepSpeed casts the fp32 gradients to before its all-reduce
    (``communication_data_type`` defaults to the run's 16-bit type; ``allreduce_bucket``)."""
    return _GRAD_BYTES if bf16_optimizer_path(par) else grad_buffer_bytes(par)


_OPTIMIZER_BYTES_PER_PARAM = 28.0  # Adam: read/write fp32 master, m, v; read grad; write weight


@dataclass(frozen=True, eq=False)
class TransformerWorkload(Workload):
    """A generated transformer iteration (:class:`~simcore.workloads._base.Workload`) and its
    layer split.

    Attributes:
        layers_per_chunk: transformer layers of the largest model chunk.
        chunk_layers: layers of each model chunk ``v = c * pp + s`` (uneven splits:
            :mod:`simcore.specs.layer_split`); each stage's graph has its own count, so the
            schedule (and its bubbles) follows the slowest stage.
        condensed: the graph's chains built directly (:mod:`simcore.ir.runs`), for the engine.
    """

    layers_per_chunk: int = 0
    chunk_layers: tuple[int, ...] = ()
    condensed: Condensed | None = None


_SEND_BASE = 1 << 40  # explicit ids of send nodes, referenced before they are added
_EMB_TIED_ID = 1 << 41  # the first/last-stage embedding all-reduce


class _PassRows(NamedTuple):
    """The run rows of a sequence of pipeline passes, one row per :meth:`RunBuilder.runs` row
    (see :func:`_pass_rows`)."""

    pi: NDArray[np.int64]  # the pass of every row
    start: NDArray[np.int64]  # per pass, its first row
    j: NDArray[np.int64]  # per row, its position after the pass's leading op
    has_pre: NDArray[np.int64]  # per pass, 1 when an op precedes the layers
    has_post: NDArray[np.int64]  # per pass, 1 when an op follows the layers
    sends: NDArray[np.bool_]  # per pass, True when it ends with a send to the next stage
    is_main: NDArray[np.bool_]  # per row, a layer run or one of its reductions
    is_send: NDArray[np.bool_]  # per row, the send
    r: NDArray[np.int64]  # per row, 0 for a layer run, 1..g for its reductions
    unit: NDArray[np.int64]  # per row, the run's unit


def _pass_rows(fwd: NDArray[np.bool_], first: NDArray[np.bool_], last: NDArray[np.bool_],
               red: NDArray[np.bool_], n_main: NDArray[np.int64], units: Sequence[int],
               u_grad: NDArray[np.int64], send_unit: int) -> _PassRows:
    """Row layout of passes emitted as runs, per pass in order: the embedding's forward (first
    virtual stage) or the output layer's backward (last), the ``n_main`` layer rows (a backward
    reducing as it goes: per layer its run then its ``len(u_grad)`` reductions), the output
    layer's forward or the embedding's backward, the send (every pass but the pipeline's ends).
    ``units``: the forward, backward, output-forward, output-backward, embedding-forward and
    embedding-backward units."""
    i64 = np.int64
    u_fwd, u_bwd, u_hf, u_hb, u_ef, u_eb = (int(u) for u in units)
    g = int(u_grad.size)
    pre = np.where(fwd & first, u_ef, np.where(~fwd & last, u_hb, -1))
    post = np.where(fwd & last, u_hf, np.where(~fwd & first, u_eb, -1))
    sends = np.where(fwd, ~last, ~first)
    has_pre, has_post = (pre >= 0).astype(i64), (post >= 0).astype(i64)
    n_call = has_pre + n_main + has_post + sends
    start = np.cumsum(n_call) - n_call
    pi = np.repeat(np.arange(n_call.size, dtype=i64), n_call)
    pos = np.arange(pi.size, dtype=i64) - start[pi]
    j = pos - has_pre[pi]
    is_pre = pos < has_pre[pi]
    is_main = ~is_pre & (j < n_main[pi])
    is_post = ~is_pre & ~is_main & (j == n_main[pi]) & (has_post[pi] > 0)
    is_send = ~is_pre & ~is_main & ~is_post
    r = np.where(red[pi] & is_main, j % (1 + g), 0)  # 0: layer run, 1..g: reductions
    unit = np.where(is_pre, pre[pi], np.where(is_post, post[pi], send_unit))
    unit = np.where(is_main & (r == 0), np.where(fwd[pi], u_fwd, u_bwd), unit)
    if g:
        unit = np.where(is_main & (r > 0), u_grad[np.maximum(r - 1, 0)], unit)
    return _PassRows(pi, start, j, has_pre, has_post, sends, is_main, is_send, r, unit)


class _Generator:
    def __init__(self, model: ModelSpec, par: ParallelSpec, gpus_per_node: int) -> None:
        self.model, self.par = model, par
        self.spans: dict[str, GroupSpan] = RankLayout.of(par, gpus_per_node).spans()
        self.ops = OpTable()
        self.lops: LayerOps = build_layer_ops(model, par, self.spans, self.ops)
        self.b = GraphBuilder("transformer")
        self.V = par.pp * par.vp
        self.chunk_layers = par.chunk_layers(model.num_layers,
                                               model.output_layer_equivalents())
        self.m = par.num_micro_batches
        self._templates()
        acc = grad_accumulation_bytes(par)
        if acc:  # per layer, after its backward, every micro-batch (on the compute stream)
            k = self.ops.kernel("mem", self.layer_params * acc)
            step = ("c", self.ops.template("grad_accumulate", [(k, 1.0)]))
            self.lops = replace(self.lops, bwd=(*self.lops.bwd, step))
        # TP overlap and CP rings as pieces (the emitter cuts steps) or as closed-form blocks
        self.pieces = par.tp_comm_overlap and not par.overlap_blocks
        self.blocks: tuple[PipelinedBlock, ...] = ()
        if par.overlap_blocks:
            self.lops, self.blocks = close_overlap_blocks(self.lops, self.ops,
                                                          par.tp_comm_overlap)

    def _templates(self) -> None:
        m, p, ops = self.model, self.par, self.ops
        sp = self.spans
        dense = m.dense_params / p.tp  # attention, the dense MLP or the shared experts
        expert = (m.num_experts // p.ep) * m.expert_params / p.tp if m.is_moe else 0.0
        zero = p.zero_stage
        self.bf16_opt = bf16_optimizer_path(p)
        # BF16_Optimizer: a full all-reduce, its own optimizer-state shards (gather after step)
        rtype = CommType.ALL_REDUCE if zero == 0 or self.bf16_opt else CommType.REDUCE_SCATTER

        grad_bytes = grad_reduce_bytes(p)
        param_bytes = ACTIVATION_BYTES[p.precision]  # the weights' working copy (ZeRO gathers)

        def coll(name: str, ct: CommType, params: float, span: GroupSpan,
                 nbytes: float = grad_bytes) -> int:
            k = ops.kernel("coll", int(ct), params * nbytes, span.size, span.ranks_per_node)
            return ops.template(name, [(k, 1.0)], _DP)

        self.grad_tmpl = [coll("dp_grad_reduce", rtype, dense, sp["dp"])]
        self.gather_tmpl = [coll("dp_param_gather", CommType.ALL_GATHER, dense, sp["dp"],
                                 param_bytes)]
        if expert:
            self.grad_tmpl.append(coll("edp_grad_reduce", rtype, expert, sp["edp"]))
            self.gather_tmpl.append(coll("edp_param_gather", CommType.ALL_GATHER, expert,
                                         sp["edp"], param_bytes))
        shard = p.dp_size * p.cp if zero >= 1 or self.bf16_opt else 1
        self.layer_params = dense + expert
        emb = m.vocab_size * m.hidden_size / p.tp
        self.emb_grad = coll("dp_embedding_grad_reduce", rtype, emb, sp["dp"])
        self.emb_params = emb
        pair = 1 if sp["pp"].cross_node else 2
        # DeepSpeed all-reduces the tied weight's fp32 gradient itself (_exec_reduce_tied_grads:
        # weight._hp_grad with bf16), without the communication-dtype cast
        k = ops.kernel("coll", int(CommType.ALL_REDUCE), emb * grad_buffer_bytes(p), 2, pair)
        self.emb_tied = ops.template("embedding_tied_allreduce", [(k, 1.0)], _DP)
        self.first_stage_end: int | None = None

        def opt(stage_params: float) -> int:
            k = ops.kernel("mem", stage_params / shard * _OPTIMIZER_BYTES_PER_PARAM)
            kernels = [(k, 1.0)]
            if self.bf16_opt:
                kernels.append((ops.kernel("mem", stage_params * _REDUCE_CAST_BYTES), 1.0))
            return ops.template("optimizer_step", kernels)

        self.opt_tmpl = opt
        act = p.micro_batch * m.seq_len // p.cp * m.hidden_size * ACTIVATION_BYTES[p.precision]
        act /= p.tp  # Megatron's scatter/gather: each TP rank sends 1/tp (Narayanan'21 4.1)
        k = ops.kernel("p2p", act, float(sp["pp"].cross_node))
        self.p2p_tmpl = ops.template("pp_send", [(k, 1.0)], _PP)

    def send_id(self, forward: bool, micro_batch: int, v: int) -> int:
        return _SEND_BASE + ((0 if forward else 1) * self.m + micro_batch) * self.V + v

    def emit_plan(self) -> tuple[int, ...]:
        """Emit every stage in order; returns each stage's most micro-batch chunks alive."""
        self.path = "per-stage"
        return tuple(self.stage(s) for s in range(self.par.pp))

    # --- per stage -------------------------------------------------------------------------
    def stage(self, s: int) -> int:
        """Emit stage ``s``; returns the most micro-batch chunks alive at once."""
        p = self.par
        e = self._emitter(s)
        dp_stream = Stream(StreamKind.DP, s)
        zero, overlap = p.zero_stage, p.dp_overlap
        self.gathers: dict[tuple[int, int], int] = {}
        # steady state: last step's gathers overlap this forward
        if (zero in (1, 2) or self.bf16_opt) and overlap:
            for c in range(p.vp):
                for j in range(self.chunk_layers[c * p.pp + s]):
                    self.gathers[(c, j)] = self._dp_nodes(e, dp_stream, self.gather_tmpl, [])
        grads, n_reduce, peak = self._passes(e, dp_stream)
        ends = s == 0 or s == p.pp - 1  # holds the word embedding or the output layer
        if not overlap:  # gradient reduction after the flush, layer by layer
            tail = self._reduce_after_flush(e, dp_stream, n_reduce)
            if ends:
                tail = [e.node(self.emb_grad, dp_stream, tail, "dp_emb")]
            grads = tail
        elif ends:
            grads.append(e.node(self.emb_grad, dp_stream, [e.last] if e.last else [], "dp_emb"))
        if ends and p.pp > 1:
            grads.append(self._tied_embedding(e))
        n_layers = sum(self.chunk_layers[s::p.pp])
        stage_params = self.layer_params * n_layers
        stage_params += self.emb_params if s in (0, p.pp - 1) else 0.0
        opt = e.comp(self.opt_tmpl(stage_params), grads)
        if (zero in (1, 2) or self.bf16_opt) and not overlap:
            for _ in range(n_layers):
                self._dp_nodes(e, dp_stream, self.gather_tmpl, [opt])
        return peak

    def _emitter(self, s: int) -> Emitter:
        return Emitter(self.b, s, self.par.vp, self.ops)

    def _passes(self, e: Emitter, dp: Stream) -> tuple[list[int], int, int]:
        """Emit a stage's passes: (gradient-reduction nodes, reductions left for after the
        flush, most micro-batch chunks alive at once)."""
        overlap = self.par.dp_overlap
        grads: list[int] = []
        n_reduce = 0
        alive = peak = 0
        for op in stage_program(e.stage, self.par.pp, self.par.vp, self.m, self.par.vp_group):
            v = op.chunk * self.par.pp + e.stage
            if op.forward:
                alive += 1
                peak = max(peak, alive)
                self._forward(e, op, v, dp)
            else:
                alive -= 1
                got = self._backward(e, op, v, dp)
                grads += got
                n_reduce += len(got) if overlap else self._reduces(op, v)
        return grads, n_reduce, peak

    def _reduce_after_flush(self, e: Emitter, dp: Stream, n_reduce: int) -> list[int]:
        """Without DP overlap: ``n_reduce`` reductions in a row after the last backward."""
        tail = [e.last] if e.last is not None else []
        for _ in range(n_reduce):
            tail = [self._dp_nodes(e, dp, self.grad_tmpl, tail)]
        return tail

    def _tied_embedding(self, e: Emitter) -> int:
        """Megatron's tied word embedding: the first and the last stage all-reduce its
        gradient before the step. One rendezvous node on both stages' embedding streams
        (rank -1: it stands for both), added with the last stage once both backwards are done;
        the first stage's optimizer already waits for its (reserved) id."""
        if e.stage == 0:
            self.first_stage_end = e.last
            return _EMB_TIED_ID
        deps = [d for d in (self.first_stage_end, e.last) if d is not None]
        self.b.add(NodeKind.COLLECTIVE, resources=[Stream(StreamKind.EMB, 0),
                                                    Stream(StreamKind.EMB, e.stage)], deps=deps,
                   rank=-1, name="embedding_tied_allreduce", node_id=_EMB_TIED_ID,
                   template=self.emb_tied, stage=0)
        return _EMB_TIED_ID

    def _reduces(self, op: PipeOp, v: int) -> int:
        reduce_now = self.par.zero_stage >= 2 or op.micro_batch == self.m - 1
        return self.chunk_layers[v] if reduce_now else 0

    def _dp_nodes(self, e: Emitter, stream: Stream, tmpls: list[int], deps: list[int]) -> int:
        last = -1
        for t in tmpls:
            last = e.node(t, stream, deps, self.ops.template_names[t])
        return last

    def _forward(self, e: Emitter, op: PipeOp, v: int, dp: Stream) -> None:
        lo = self.lops
        deps = [self.send_id(True, op.micro_batch, v - 1)] if v > 0 else []
        if v == 0:
            e.comp(lo.embed_fwd, deps)
            deps = []
        for j in range(self.chunk_layers[v]):
            if self.par.zero_stage == 3:
                deps.append(self._zero3_gather(e, dp))
            gather = self.gathers.pop((op.chunk, j), None)
            if gather is not None:
                deps.append(gather)
            e.steps(lo.fwd, self.pieces, deps)
            e.marks.append(e.last)
            deps = []
        if v == self.V - 1:
            e.steps(lo.head_fwd, self.pieces, deps)
        if v < self.V - 1:
            self._send(e, self.send_id(True, op.micro_batch, v), v + 1)

    def _backward(self, e: Emitter, op: PipeOp, v: int, dp: Stream) -> list[int]:
        lo, p = self.lops, self.par
        deps = [self.send_id(False, op.micro_batch, v + 1)] if v < self.V - 1 else []
        if v == self.V - 1:
            e.steps(lo.head_bwd, self.pieces, deps)
            deps = []
        reduce_now = self._reduces(op, v) > 0 and p.dp_overlap
        grads: list[int] = []
        for _ in range(self.chunk_layers[v]):
            if p.zero_stage == 3:
                deps.append(self._zero3_gather(e, dp))
            if lo.recompute:
                e.steps(lo.recompute, self.pieces, deps)
                deps = []
            e.steps(lo.bwd, self.pieces, deps)
            e.marks.append(e.last)
            deps = []
            if reduce_now:
                assert e.last is not None
                grads.append(self._dp_nodes(e, dp, self.grad_tmpl, [e.last]))
        if v == 0:
            e.comp(lo.embed_bwd)
        if v > 0:
            self._send(e, self.send_id(False, op.micro_batch, v), v - 1)
        return grads

    def _zero3_gather(self, e: Emitter, dp: Stream) -> int:
        """All-gather of one layer's parameters. Overlapped: it may start once the compute
        stream finished the layer before the previous one (one layer of prefetch); else
        only after the previous layer."""
        back = 2 if self.par.dp_overlap else 1
        mark = e.marks[-back] if len(e.marks) >= back else None
        deps = [mark] if mark is not None else []
        return self._dp_nodes(e, dp, self.gather_tmpl, deps)

    def _send(self, e: Emitter, node_id: int, v_dst: int) -> None:
        src, dst = e.stage, v_dst % self.par.pp
        assert e.last is not None
        kind = NodeKind.SEND
        self.b.add(kind, resources=[Stream.link(src, dst)], deps=[e.last], rank=src, name="pp_send",
                   node_id=node_id, template=self.p2p_tmpl, stage=src, peer=dst)


class _RunGenerator(_Generator):
    """The same emission into a :class:`~simcore.ir.runs.RunBuilder`: a pass whose layers wait
    for nothing but the previous op is one run of ``layers`` x the layer's ops (no node objects);
    anything else (ZeRO-3 gathers, TP overlap pieces, CP rings, per-layer gradient reductions)
    goes node by node through the same code as :class:`_Generator`. A plan without ZeRO-3, TP
    overlap or CP is emitted whole by :meth:`_plan_batch`; the per-stage run emission
    (:meth:`_passes`, :meth:`_regular`) then only runs when :meth:`plan_batched` is
    overridden (the tests' reference for the one batch). The plans left to :meth:`stage`
    (ZeRO-3, or passes that are not plain runs) have their passes recorded once per kind
    through that node-by-node code and replayed (:meth:`_replayed`)."""

    def __init__(self, model: ModelSpec, par: ParallelSpec, gpus_per_node: int) -> None:
        super().__init__(model, par, gpus_per_node)
        self.rb = RunBuilder(len(self.ops.templates), "transformer")
        lo = self.lops
        self.fwd_unit = self._unit(lo.fwd)
        self.bwd_unit = self._unit(lo.recompute + lo.bwd)
        self._send_unit = self.rb.unit((self.p2p_tmpl,))
        self._links: dict[tuple[int, int], int] = {}
        self.replayed = 0  # passes issued by :meth:`_replayed`
        self._recorded: dict[tuple[int, int], RecordedPass] = {}  # (stage, kind key) -> pass

    def _unit(self, steps: tuple[Step, ...]) -> int | None:
        return _unit_of(self.rb, steps, self.pieces)

    def plan_batched(self) -> bool:
        """The whole plan is one :meth:`RunBuilder.runs` batch (:meth:`_plan_batch`): no
        ZeRO-3, and every pass's steps are plain runs (no TP overlap pieces, no CP ring)."""
        lo = self.lops
        units = (self.fwd_unit, self.bwd_unit, self._unit(lo.head_fwd), self._unit(lo.head_bwd))
        return self.par.zero_stage != 3 and all(u is not None for u in units)

    def emit_plan(self) -> tuple[int, ...]:
        if not self.plan_batched():
            return super().emit_plan()
        self.path = "batched"
        return self._plan_batch()

    def _stage_params(self, s: int, n_layers: int) -> float:
        stage_params = self.layer_params * n_layers
        return stage_params + (self.emb_params if s in (0, self.par.pp - 1) else 0.0)

    def _last_stage_tail(self, e: RunEmitter, grads: list[int], opt_tmpl: int,
                         n_gathers: int) -> None:
        """The last stage's tied-embedding all-reduce, optimizer step (waiting for ``grads``
        and the all-reduce) and ``n_gathers`` parameter gathers after it, op by op."""
        e.last = self.rb.last_id(e.compute_res)
        grads.append(self._tied_embedding(e))
        opt = e.comp(opt_tmpl, grads)
        dp = Stream(StreamKind.DP, e.stage)
        for _ in range(n_gathers):
            self._dp_nodes(e, dp, self.gather_tmpl, [opt])

    def _plan_streams(self, st: NDArray[np.int64], fwd: NDArray[np.bool_],
                      sends: NDArray[np.bool_], special: NDArray[np.bool_], per_stage: int,
                      pre_gather: bool) -> tuple[list[RunEmitter], NDArray[np.int64],
                                                 NDArray[np.int64], NDArray[np.int64]]:
        """Create the streams of :meth:`_plan_batch` in the order :meth:`stage` creates them
        (per stage: compute, dp if gathers are prefetched, then per group of passes (a
        forward waiting for gathers, then the regular passes up to the next such forward)
        that forward's link, the regular passes' links by destination, dp). Returns the
        emitters and the compute and dp resource of each stage, and the link resource by
        (source, destination) stage (-1: none)."""
        rb, pp, i64 = self.rb, self.par.pp, np.int64
        n_pass = int(st.size)
        stage_first = np.zeros(n_pass, dtype=bool)
        stage_first[::per_stage] = True
        group = np.cumsum(special | stage_first) - 1  # [special forward] + regular passes
        n_grp = int(group[-1]) + 1
        plain = ~special
        seg_any = np.bincount(group[plain], minlength=n_grp) > 0
        seg_f = np.bincount(group[plain & fwd & sends], minlength=n_grp) > 0
        seg_b = np.bincount(group[plain & ~fwd & sends], minlength=n_grp) > 0
        gfirst = np.flatnonzero(special | stage_first)
        g_spec = (special & sends)[gfirst].tolist()
        g_st = st[gfirst].tolist()
        emitters: list[RunEmitter] = []
        dp_res = np.zeros(pp, dtype=i64)
        comp_res = np.zeros(pp, dtype=i64)
        link_tab = np.full((pp, pp), -1, dtype=i64)

        def link(s: int, d: int) -> None:
            if (s, d) not in self._links:
                self._links[(s, d)] = rb.stream(Stream.link(s, d))
            link_tab[s, d] = self._links[(s, d)]

        for s, sp_send, any_, f_, b_ in zip(g_st, g_spec, seg_any.tolist(), seg_f.tolist(),
                                            seg_b.tolist(), strict=True):
            if len(emitters) == s:
                e = cast(RunEmitter, self._emitter(s))
                emitters.append(e)
                comp_res[s] = e.compute_res
                if pre_gather:
                    dp_res[s] = rb.stream(Stream(StreamKind.DP, s))
            df, db = (s + 1) % pp, (s - 1) % pp
            if sp_send:
                link(s, df)
            if any_:
                for d in sorted({d for d, on in ((df, f_), (db, b_)) if on}):
                    link(s, d)
                dp_res[s] = rb.stream(Stream(StreamKind.DP, s))
        return emitters, comp_res, dp_res, link_tab

    def _plan_batch(self) -> tuple[int, ...]:
        """Every stage as :meth:`stage` emits it, in one :meth:`RunBuilder.runs` call.

        Rows per stage, in this order: the prefetched ZeRO-1/2 parameter gathers, the passes
        (as :meth:`_regular`; a forward waiting for gathers has one run per layer, each also
        waiting for its layer's gather), the reductions after the flush, the embedding's
        gradient reduction, the optimizer step (waiting for the stage's reductions and, on
        stage 0, the tied-embedding all-reduce's reserved id) and the gathers after it. The
        rows are built per section for all stages with numpy and put in stage order with one
        stable sort. With pp > 1 the last stage's tied-embedding all-reduce (one node on two
        stages' streams), its optimizer step and the gathers after it follow op by op.
        Streams are created in the order :meth:`stage` creates them (their ids are part of
        the result). Returns each stage's most micro-batch chunks alive at once."""
        p, rb, lo = self.par, self.rb, self.lops
        pp, vp, m, big_v = p.pp, p.vp, self.m, self.V
        i64 = np.int64
        ov = p.dp_overlap
        gathers_on = p.zero_stage in (1, 2) or self.bf16_opt
        pre_gather = gathers_on and ov
        lay = np.asarray(self.chunk_layers, dtype=i64)  # per virtual stage
        lay_cs = lay.reshape(vp, pp)  # [chunk, stage]
        n_layers = lay_cs.sum(axis=0)
        n_layers_l = n_layers.tolist()
        g, gg = len(self.grad_tmpl), len(self.gather_tmpl)
        u_fwd, u_bwd = int(cast(int, self.fwd_unit)), int(cast(int, self.bwd_unit))
        u_hf, u_hb = int(cast(int, self._unit(lo.head_fwd))), int(cast(int,
                                                                     self._unit(lo.head_bwd)))
        u_ef, u_eb = rb.unit((lo.embed_fwd,)), rb.unit((lo.embed_bwd,))
        u_grad = np.asarray([rb.unit((t,)) for t in self.grad_tmpl], dtype=i64)
        u_gather = np.asarray([rb.unit((t,)) for t in self.gather_tmpl], dtype=i64)
        u_embg = rb.unit((self.emb_grad,))
        opt_t = [self.opt_tmpl(self._stage_params(s, n_layers_l[s])) for s in range(pp)]
        u_opt = np.asarray([rb.unit((t,)) for t in opt_t], dtype=i64)

        # --- the passes of all stages ----------------------------------------------------
        group = p.vp_group
        st, fwd, mb, chunk, kk = pipeline_program_arrays(pp, vp, m, group)
        n_pass = int(st.size)
        v = chunk * pp + st
        layers = lay[v]
        first, last = v == 0, v == big_v - 1
        # the first forward of each chunk waits for the chunk's prefetched gathers
        special = (fwd & (kk < group * vp) & (kk % group == 0) if pre_gather
                   else np.zeros(n_pass, bool))
        reduces = ~fwd & ((p.zero_stage >= 2) | (mb == m - 1))
        red = reduces & ov
        n_main = np.where(red, layers * (1 + g), np.where(special, layers, 1))
        rows = _pass_rows(fwd, first, last, red, n_main, (u_fwd, u_bwd, u_hf, u_hb, u_ef, u_eb),
                          u_grad, self._send_unit)
        pi, start, j, is_main, is_send, r, unit = (rows.pi, rows.start, rows.j, rows.is_main,
                                                   rows.is_send, rows.r, rows.unit)
        has_pre, has_post, sends = rows.has_pre, rows.has_post, rows.sends
        n_rows = int(pi.size)
        idx = np.arange(n_rows, dtype=i64)
        rep = np.where(is_main & (r == 0), np.where(red[pi] | special[pi], 1, layers[pi]), 1)
        base = np.where(fwd, 0, m)  # send ids as :meth:`send_id`
        recv = np.where(fwd, np.where(first, -1, _SEND_BASE + (base + mb) * big_v + v - 1),
                        np.where(last, -1, _SEND_BASE + (base + mb) * big_v + v + 1))
        dep = np.where(is_main & (j == 0), recv[pi], -1)
        dep_ref = np.where(is_main & (r > 0), idx - r, -1)
        last_compute = start + has_pre + np.where(
            has_post > 0, n_main, np.where(red, n_main - 1 - g, n_main - 1))
        dep_ref = np.where(is_send, last_compute[pi], dep_ref)
        dst = np.where(fwd, v + 1, v - 1) % pp
        nid = np.where(is_send, _SEND_BASE + (base[pi] + mb[pi]) * big_v + v[pi], -1)
        row_st = st[pi]

        # --- streams, in the order :meth:`stage` creates them -----------------------------
        per_stage = 2 * m * vp
        emitters, comp_res, dp_res, link_tab = self._plan_streams(st, fwd, sends, special,
                                                                  per_stage, pre_gather)
        res = np.where(is_send, link_tab[row_st, dst[pi]],
                       np.where(r > 0, dp_res[row_st], comp_res[row_st]))

        # --- sections of all stages, concatenated as G(athers), P(asses), R(eductions after
        # the flush), E(mbedding reduction), O(ptimizer), A(fter-step gathers); refs index
        # the concatenation
        s_all = np.arange(pp, dtype=i64)

        def spread(counts: NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[np.int64],
                                                        NDArray[np.int64]]:
            """(stage, index within the stage's section, section start) of counts[s] rows."""
            starts = np.cumsum(counts) - counts
            rs = np.repeat(s_all, counts)
            return rs, np.arange(rs.size, dtype=i64) - starts[rs], starts

        n_g = n_layers * gg if pre_gather else np.zeros(pp, dtype=i64)
        g_rs, g_loc, g_start = spread(n_g)
        o_p = int(g_rs.size)
        # a forward waiting for gathers: layer j of chunk c waits for gather (c, j)'s last op
        c_off = np.cumsum(lay_cs, axis=0) - lay_cs  # [chunk, stage] first layer of the chunk
        xs = np.flatnonzero(is_main & special[pi])
        xs_ref = g_start[row_st[xs]] + (c_off[chunk[pi[xs]], row_st[xs]] + j[xs]) * gg + gg - 1
        e_last = o_p + last_compute[np.arange(1, pp + 1, dtype=i64) * per_stage - 1]
        o_r = o_p + n_rows
        n_red = np.zeros(pp, dtype=i64) if ov else np.bincount(
            st[reduces], weights=layers[reduces], minlength=pp).astype(i64)
        if g == 1:
            n_r = (n_red > 0).astype(i64)
            r_rs, r_loc, r_start = spread(n_r)
            r_unit = np.full(r_rs.size, u_grad[0], dtype=i64)
            r_rep = n_red[r_rs]
            r_ref = e_last[r_rs]
        else:
            n_r = n_red * g
            r_rs, r_loc, r_start = spread(n_r)
            r_unit = u_grad[r_loc % g]
            r_rep = np.ones(r_rs.size, dtype=i64)
            r_ref = np.where(r_loc < g, e_last[r_rs], o_r + r_start[r_rs] + (r_loc // g) * g - 1)
        tail = np.where(n_r > 0, o_r + r_start + n_r - 1, e_last)
        o_e = o_r + int(r_rs.size)
        e_rs = np.asarray(sorted({0, pp - 1}), dtype=i64)
        e_ref = (e_last if ov else tail)[e_rs]
        e_row = np.full(pp, -1, dtype=i64)
        e_row[e_rs] = o_e + np.arange(e_rs.size, dtype=i64)
        o_o = o_e + int(e_rs.size)
        tied = pp > 1
        o_rs = s_all[:-1] if tied else s_all
        o_row = np.full(pp, -1, dtype=i64)
        o_row[o_rs] = o_o + np.arange(o_rs.size, dtype=i64)
        # the optimizer step waits for the stage's reductions (and stage 0 for the tied
        # all-reduce's reserved id)
        if ov:
            gr = np.flatnonzero(is_main & (r == g) & (r > 0)) if g else np.zeros(0, dtype=i64)
            x_st = np.concatenate([row_st[gr], e_rs])
            x_ref = np.concatenate([o_p + gr, e_row[e_rs]])
        else:
            x_st = s_all
            x_ref = np.where(e_row >= 0, e_row, tail)
        grads_last = x_ref[x_st == pp - 1] if tied else x_ref[:0]
        keep = o_row[x_st] >= 0
        x_st, x_ref = x_st[keep], x_ref[keep]
        x_row = [o_p + xs, o_row[x_st]]
        x_refs = [xs_ref, x_ref]
        x_ids = [np.full(xs.size + x_st.size, -1, dtype=i64)]
        if tied:
            x_row.append(o_row[:1])
            x_refs.append(np.full(1, -1, dtype=i64))
            x_ids.append(np.full(1, _EMB_TIED_ID, dtype=i64))
        n_a = n_layers * gg if gathers_on and not ov else np.zeros(pp, dtype=i64)
        if tied:
            n_a[-1] = 0
        a_rs, a_loc, _ = spread(n_a)

        sec = (g_rs, row_st, r_rs, e_rs, o_rs, a_rs)
        stage_c = np.concatenate(sec)
        key = stage_c * 6 + np.repeat(np.arange(6, dtype=i64), [x.size for x in sec])
        order = np.argsort(key, kind="stable")
        inv = np.empty_like(order)
        inv[order] = np.arange(order.size, dtype=i64)
        def cat(*parts: NDArray[np.int64]) -> NDArray[np.int64]:
            return np.concatenate(parts)[order]

        def ones(rows: NDArray[np.int64]) -> NDArray[np.int64]:
            return np.ones(rows.size, dtype=i64)

        def none(rows: NDArray[np.int64]) -> NDArray[np.int64]:
            return np.full(rows.size, -1, dtype=i64)

        res_c = cat(dp_res[g_rs], res, dp_res[r_rs], dp_res[e_rs], comp_res[o_rs], dp_res[a_rs])
        unit_c = cat(u_gather[g_loc % gg] if gg else g_loc, unit, r_unit,
                     np.full(e_rs.size, u_embg, dtype=i64), u_opt[o_rs], u_gather[a_loc % gg]
                     if gg else a_loc)
        rep_c = cat(ones(g_rs), rep, r_rep, ones(e_rs), ones(o_rs), ones(a_rs))
        dep_c = cat(none(g_rs), dep, none(r_rs), none(e_rs), none(o_rs), none(a_rs))
        ref_c = cat(none(g_rs), np.where(dep_ref >= 0, o_p + dep_ref, -1), r_ref, e_ref,
                    none(o_rs), o_row[a_rs])
        ref_c = np.where(ref_c >= 0, inv[ref_c], -1)
        nid_c = cat(none(g_rs), nid, none(r_rs), none(e_rs), none(o_rs), none(a_rs))
        xr, xf = np.concatenate(x_refs), np.concatenate(x_ids)
        extra = (inv[np.concatenate(x_row)], np.where(xr >= 0, inv[np.maximum(xr, 0)], -1), xf)
        ids = rb.runs(res_c, unit_c, rep_c, dep_c, ref_c, nid_c, stage_c[order], extra)

        alive = np.cumsum(np.where(fwd, 1, -1))
        peaks = np.maximum(np.maximum.reduceat(alive, np.arange(pp) * per_stage), 0)
        if tied:  # the last stage's tail op by op, as :meth:`stage`
            self.first_stage_end = int(ids[inv[e_last[0]]])
            self._last_stage_tail(emitters[-1], ids[inv[grads_last]].tolist(), opt_t[-1],
                                  int(n_layers[-1]) if gathers_on and not ov else 0)
        return tuple(int(x) for x in peaks)

    def _passes(self, e: Emitter, dp: Stream) -> tuple[list[int], int, int]:
        """Passes whose ops are runs, sends and per-layer gradient reductions are emitted
        together with numpy (:meth:`_regular`); forwards waiting for per-layer parameter
        gathers one by one."""
        lo, p = self.lops, self.par
        units = (self.fwd_unit, self.bwd_unit, self._unit(lo.head_fwd), self._unit(lo.head_bwd))
        assert isinstance(e, RunEmitter)
        fwd, mb, chunk = stage_program_arrays(e.stage, p.pp, p.vp, self.m, p.vp_group)
        special = []  # the first forward of each chunk with gathers pending
        for c in sorted({c for c, _ in self.gathers}):
            special.append(int(np.flatnonzero(fwd & (chunk == c))[0]))
        plain = p.zero_stage != 3 and all(u is not None for u in units)
        grads: list[int] = []
        n_reduce = 0
        lo_i = 0
        for i in [*sorted(special), fwd.size]:
            part = (fwd[lo_i:i], mb[lo_i:i], chunk[lo_i:i])
            got, n = (self._regular(e, *part, units, dp) if plain
                      else self._replayed(e, *part, dp))
            grads += got
            n_reduce += n
            if i < fwd.size:
                self._forward(e, PipeOp(True, int(mb[i]), int(chunk[i])),
                              int(chunk[i]) * p.pp + e.stage, dp)
            lo_i = i + 1
        alive = np.cumsum(np.where(fwd, 1, -1))
        return grads, n_reduce, int(max(0, alive.max(initial=0)))

    def _replayed(self, e: RunEmitter, fwd: NDArray[np.bool_], mb: NDArray[np.int64],
                  chunk: NDArray[np.int64], dp: Stream) -> tuple[list[int], int]:
        """Passes whose ops are not plain runs (TP overlap pieces, CP rings, ZeRO-3's
        per-layer gathers), as :meth:`_forward` and :meth:`_backward` emit them one by one: the
        first pass of each kind recorded, all replayed at once
        (:mod:`simcore.workloads.transformer.replay`). Returns (reduction ids, reductions left
        for after the flush)."""
        k = int(fwd.size)
        if k == 0:
            return [], 0
        p, s = self.par, e.stage
        v = chunk * p.pp + s
        reduces = ~fwd & ((p.zero_stage >= 2) | (mb == self.m - 1))
        has_prev = np.ones(k, dtype=bool)
        has_prev[0] = e.last is not None
        # ZeRO-3: how many layer ends before the pass its gathers may wait for (each pass
        # marks the end of each of its layers)
        back = (2 if p.dp_overlap else 1) if p.zero_stage == 3 else 0
        layers = np.asarray(self.chunk_layers, dtype=np.int64)[v]
        marks = np.minimum(len(e.marks) + np.cumsum(layers) - layers, back)
        key = (((v * 2 + fwd) * 2 + reduces) * 2 + has_prev) * 3 + marks
        _, first, kind_of = np.unique(key, return_index=True, return_inverse=True)
        order = np.argsort(first)  # kinds recorded in program order (templates, units)
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        kinds = []
        for i in first[order].tolist():  # a stage's later stretches reuse its recordings
            rec = self._recorded.get((s, int(key[i])))
            if rec is None:
                rec = self._recorded[(s, int(key[i]))] = self._record(
                    s, PipeOp(bool(fwd[i]), int(mb[i]), int(chunk[i])), bool(has_prev[i]),
                    int(marks[i]), dp)
            kinds.append(rec)
        _, outputs, new_marks = replay(self.rb, kinds, rank[kind_of.reshape(-1)], mb, self.V,
                                       e.last, [m for m in e.marks[-back:] if m is not None]
                                       if back else [])
        self.replayed += k
        e.last = self.rb.last_id(e.compute_res)
        e.marks += new_marks.tolist()
        grads = outputs.tolist()
        if p.dp_overlap:
            return grads, len(grads)
        return grads, int(layers[reduces].sum())

    def _record(self, s: int, op: PipeOp, has_prev: bool, marks: int, dp: Stream
                ) -> RecordedPass:
        """Pass ``op`` of stage ``s`` as :meth:`_forward` / :meth:`_backward` emit it,
        recorded (``has_prev``: an op precedes it on the compute stream; ``marks``: layer
        ends before it that it may wait for)."""
        v = op.chunk * self.par.pp + s
        if op.forward:
            recv = self.send_id(True, op.micro_batch, v - 1) if v > 0 else None
        else:
            recv = self.send_id(False, op.micro_batch, v + 1) if v < self.V - 1 else None
        rec = PassRecorder(self.rb, op.micro_batch, recv,
                           self.send_id(op.forward, op.micro_batch, v))
        e = RunEmitter(cast(RunBuilder, rec), s, self.par.vp, self.ops)
        e.last = PREV if has_prev else None
        e.marks = list(MARKS[:marks][::-1])
        rb, links = self.rb, self._links
        self.rb, self._links = cast(RunBuilder, rec), {}
        try:
            out: list[int] = []
            if op.forward:
                self._forward(e, op, v, dp)
            else:
                out = self._backward(e, op, v, dp)
        finally:
            self.rb, self._links = rb, links
        return rec.finish(e.compute, out, e.marks)

    def _regular(self, e: RunEmitter, fwd: NDArray[np.bool_], mb: NDArray[np.int64],
                 chunk: NDArray[np.int64], units: tuple[int | None, ...], dp: Stream
                 ) -> tuple[list[int], int]:
        """Passes without per-layer gathers, as :meth:`_forward` and :meth:`_backward` emit
        them, in one :meth:`RunBuilder.runs`. Per pass: the embedding or the output layer's
        backward, the layers (one run; a backward reducing gradients as it goes: per layer a
        run and its reductions on the dp stream), the output layer or the embedding's
        backward, the send to the next stage. Returns (reduction ids, reductions left for
        after the flush)."""
        k = int(fwd.size)
        if k == 0:
            return [], 0
        i64 = np.int64
        s, pp, big_v, m, par = e.stage, self.par.pp, self.V, self.m, self.par
        v = chunk * pp + s
        layers = np.asarray(self.chunk_layers, dtype=i64)[v]
        lo, rb = self.lops, self.rb
        u_fwd, u_bwd, u_hf, u_hb = (int(u) for u in units)  # type: ignore[arg-type]
        u_ef, u_eb = rb.unit((lo.embed_fwd,)), rb.unit((lo.embed_bwd,))
        u_grad = [rb.unit((t,)) for t in self.grad_tmpl]
        g = len(u_grad)
        first, last = v == 0, v == big_v - 1
        reduces = ~fwd & ((par.zero_stage >= 2) | (mb == m - 1))
        red = reduces & par.dp_overlap  # reductions issued after each layer's backward
        n_red = int(layers[reduces].sum()) if not par.dp_overlap else 0
        n_main = np.where(red, layers * (1 + g), 1)
        rows = _pass_rows(fwd, first, last, red, n_main, (u_fwd, u_bwd, u_hf, u_hb, u_ef, u_eb),
                          np.asarray(u_grad, dtype=i64), self._send_unit)
        pi, start, j, is_main, is_send, r, unit = (rows.pi, rows.start, rows.j, rows.is_main,
                                                   rows.is_send, rows.r, rows.unit)
        has_pre, has_post, sends = rows.has_pre, rows.has_post, rows.sends
        total = int(pi.size)
        rep = np.where(is_main & (r == 0), np.where(red[pi], 1, layers[pi]), 1)
        base = np.where(fwd, 0, m)  # send ids as :meth:`send_id`
        recv = np.where(fwd, np.where(first, -1, _SEND_BASE + (base + mb) * big_v + v - 1),
                        np.where(last, -1, _SEND_BASE + (base + mb) * big_v + v + 1))
        dep = np.where(is_main & (j == 0), recv[pi], -1)
        idx = np.arange(total, dtype=i64)
        # a reduction waits for its layer's run; a send for the pass's last compute run
        dep_ref = np.where(is_main & (r > 0), idx - r, -1)
        last_compute = start + has_pre + np.where(has_post > 0, n_main,
                                                  np.where(red, n_main - 1 - g, 0))
        dep_ref = np.where(is_send, last_compute[pi], dep_ref)
        dst = np.where(fwd, v + 1, v - 1) % pp
        for d in unique_sorted(dst[sends]).tolist():
            if (s, d) not in self._links:
                self._links[(s, d)] = rb.stream(Stream.link(s, d))
        link = np.asarray([self._links.get((s, d), -1) for d in range(pp)], dtype=i64)
        dp_res = rb.stream(dp)
        res = np.where(is_send, link[dst[pi]], np.where(r > 0, dp_res, e.compute_res))
        nid = np.where(is_send, _SEND_BASE + (base[pi] + mb[pi]) * big_v + v[pi], -1)
        ids = rb.runs(res, unit, rep, dep, dep_ref, nid, s)
        e.last = rb.last_id(e.compute_res)
        grads = ids[is_main & (r == g) & (r > 0)].tolist() if g else []
        return grads, len(grads) + n_red

    def _emitter(self, s: int) -> Emitter:
        return RunEmitter(self.rb, s, self.par.vp, self.ops)

    def _reduce_after_flush(self, e: Emitter, dp: Stream, n_reduce: int) -> list[int]:
        """One reduction per node waiting for the one before: a single run."""
        if len(self.grad_tmpl) != 1 or n_reduce == 0:
            return super()._reduce_after_flush(e, dp, n_reduce)
        deps = [e.last] if e.last is not None else []
        unit = self.rb.unit((self.grad_tmpl[0],))
        return [self.rb.run(self.rb.stream(dp), unit, n_reduce, deps, e.stage)]

    def _forward(self, e: Emitter, op: PipeOp, v: int, dp: Stream) -> None:
        n = self.chunk_layers[v]
        if (self.fwd_unit is None or self.par.zero_stage == 3
                or any((op.chunk, j) in self.gathers for j in range(n))):
            super()._forward(e, op, v, dp)
            return
        assert isinstance(e, RunEmitter)
        lo = self.lops
        deps = [self.send_id(True, op.micro_batch, v - 1)] if v > 0 else []
        if v == 0:
            e.comp(lo.embed_fwd, deps)
            deps = []
        if n:
            e.run(self.fwd_unit, n, deps)
            deps = []
        if v == self.V - 1:
            e.steps(lo.head_fwd, self.pieces, deps)
        if v < self.V - 1:
            self._send(e, self.send_id(True, op.micro_batch, v), v + 1)

    def _backward(self, e: Emitter, op: PipeOp, v: int, dp: Stream) -> list[int]:
        p = self.par
        if self.bwd_unit is None or p.zero_stage == 3:
            return super()._backward(e, op, v, dp)
        assert isinstance(e, RunEmitter)
        lo = self.lops
        deps = [self.send_id(False, op.micro_batch, v + 1)] if v < self.V - 1 else []
        if v == self.V - 1:
            e.steps(lo.head_bwd, self.pieces, deps)
            deps = []
        n = self.chunk_layers[v]
        grads: list[int] = []
        if not (self._reduces(op, v) > 0 and p.dp_overlap):
            if n:
                e.run(self.bwd_unit, n, deps)
        else:
            for _ in range(n):
                e.run(self.bwd_unit, 1, deps)
                deps = []
                assert e.last is not None
                grads.append(self._dp_nodes(e, dp, self.grad_tmpl, [e.last]))
        if v == 0:
            e.comp(lo.embed_bwd)
        if v > 0:
            self._send(e, self.send_id(False, op.micro_batch, v), v - 1)
        return grads

    def _tied_embedding(self, e: Emitter) -> int:
        if e.stage == 0:
            self.first_stage_end = e.last
            return _EMB_TIED_ID
        deps = [d for d in (self.first_stage_end, e.last) if d is not None]
        rb = self.rb
        rb.node([rb.stream(Stream(StreamKind.EMB, 0)), rb.stream(Stream(StreamKind.EMB, e.stage))],
                self.emb_tied, deps, 0, _EMB_TIED_ID)
        return _EMB_TIED_ID

    def _send(self, e: Emitter, node_id: int, v_dst: int) -> None:
        src, dst = e.stage, v_dst % self.par.pp
        assert e.last is not None
        res = self._links.get((src, dst))
        if res is None:
            res = self._links[(src, dst)] = self.rb.stream(Stream.link(src, dst))
        self.rb.run(res, self._send_unit, 1, (e.last,), src, node_id)


def _unit_of(rb: RunBuilder, steps: tuple[Step, ...], overlap_tp: bool) -> int | None:
    """The run unit of ``steps`` when :meth:`Emitter.steps` emits them as plain ops on the
    compute stream (no TP overlap pieces, no CP ring, no chunked all-to-all), else None."""
    tmpls = []
    for step in steps:
        if (overlap_tp and step[0] in ("tp", "c")) or step[0] == "moe":
            return None
        if step[0] == "attn":
            if step[3] != 1:
                return None
            tmpls.append(step[1])
        else:
            tmpls.append(step[1])
    return rb.unit(tmpls) if tmpls else None


class RunEmitter(Emitter):
    """An :class:`Emitter` adding to a :class:`~simcore.ir.runs.RunBuilder`: plain step lists
    become one run; everything else is emitted op by op as before."""

    def __init__(self, rb: RunBuilder, stage: int, chunks: int, ops: OpTable) -> None:
        super().__init__(cast(GraphBuilder, None), stage, chunks, ops)
        self.rb = rb
        self.compute_res = rb.stream(self.compute)
        self._units: dict[tuple[tuple[Step, ...], bool], int | None] = {}

    def node(self, tmpl: int, stream: Stream, deps: Sequence[int], name: str) -> int:
        return self.rb.node([self.rb.stream(stream)], tmpl, deps, self.stage)

    def run(self, unit: int, repeat: int, deps: Sequence[int]) -> None:
        """``repeat`` x ``unit`` on the compute stream, the first op waiting for ``deps``."""
        self.last = self.rb.run(self.compute_res, unit, repeat, deps, self.stage)

    def steps(self, steps: Sequence[Step], overlap_tp: bool, deps: Sequence[int] = ()) -> None:
        key = (tuple(steps), overlap_tp)
        if key not in self._units:
            self._units[key] = _unit_of(self.rb, key[0], overlap_tp)
        unit = self._units[key]
        if unit is None:
            super().steps(steps, overlap_tp, deps)
        else:
            self.run(unit, 1, deps)


def build_transformer(model: ModelSpec, parallel: ParallelSpec, gpus_per_node: int
                      ) -> TransformerWorkload:
    """Generate the iteration graph of ``model`` under the resolved ``parallel`` plan
    (``parallel.dp`` set; shapes already checked by :func:`simcore.api.check_structure`).

    The graph is built condensed (:class:`_RunGenerator`); its nodes
    (:func:`build_transformer_nodes`) only when something reads them (a timeline, an export,
    a fidelity that transforms the graph)."""
    gen = _RunGenerator(model, parallel, gpus_per_node)
    flights = gen.emit_plan()
    chains = gen.rb.build()

    def nodes() -> Graph:  # the exact node count is known: bounded before any node is built
        if chains.num_nodes > limit("graph_nodes"):
            raise InputError("parallel.global_batch", parallel.global_batch,
                             f"building every node of this graph (a timeline, a Chakra export, a "
                             f"fidelity that transforms the graph) means {chains.num_nodes:.3g} "
                             f"nodes, more than {limit('graph_nodes'):.3g} (limit graph_nodes, "
                             "SIMSWEEP_MAX_GRAPH_NODES): fewer micro-batches or layers")
        return build_transformer_nodes(model, parallel, gpus_per_node).graph

    graph = LazyGraph(nodes)
    return TransformerWorkload(graph=graph, ops=gen.ops, num_stages=parallel.pp,
                               in_flight=flights, layers_per_chunk=max(gen.chunk_layers),
                               dp_overlap=parallel.dp_overlap, chunk_layers=gen.chunk_layers,
                               condensed=Condensed(graph, chains), pipelined_blocks=gen.blocks)


def build_transformer_nodes(model: ModelSpec, parallel: ParallelSpec, gpus_per_node: int
                            ) -> TransformerWorkload:
    """:func:`build_transformer` with every node built (one object per op; the reference)."""
    gen = _Generator(model, parallel, gpus_per_node)
    flights = gen.emit_plan()
    return TransformerWorkload(graph=gen.b.build(), ops=gen.ops, num_stages=parallel.pp,
                               in_flight=flights, layers_per_chunk=max(gen.chunk_layers),
                               dp_overlap=parallel.dp_overlap, chunk_layers=gen.chunk_layers,
                               pipelined_blocks=gen.blocks)
