"""Emission of one pipeline stage's ops as graph nodes, in program order.

An :class:`Emitter` adds the nodes of one representative GPU to a :class:`GraphBuilder`: compute
and blocking collectives on the stage's in-order compute stream, overlapped TP collectives on its
tp stream (Megatron-LM's TP communication overlap: compute and collectives cut into
``TP_OVERLAP_CHUNKS`` pieces, piece j waiting for piece j of the step before), the
context-parallel ring of KV blocks on its cp stream, each attention chunk waiting for the block
it needs (ring attention; Liu et al. 2023, as Megatron-Core's context parallelism), and a MoE
layer's chunked all-to-all on its ep stream (``parallel.ep_overlap_chunks``: chunk j's dispatch,
experts and combine in turn, pieces ordered as TP overlap's; FasterMoE, He et al. PPoPP 2022;
Tutel, Hwang et al. MLSys 2023 [R]).
:func:`close_overlap_blocks` rewrites a layer's steps so that each such group of pieces is one
closed-form block instead (``parallel.overlap_blocks``, :mod:`simcore.ir.blocks`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from simcore.ir.blocks import PipelinedBlock
from simcore.ir.graph import GraphBuilder, NodeKind
from simcore.ir.ops import COMPUTE, OpTable
from simcore.ir.streams import Stream, StreamKind
from simcore.workloads.transformer.layers import LayerOps, Step

__all__ = ["TP_OVERLAP_CHUNKS", "Emitter", "close_overlap_blocks"]

TP_OVERLAP_CHUNKS = 4


class Emitter:
    """Adds nodes of one stage in program order; tracks the last compute node."""

    def __init__(self, b: GraphBuilder, stage: int, chunks: int, ops: OpTable) -> None:
        self.b, self.stage, self.ops, self.chunks = b, stage, ops, chunks
        self.compute = Stream.compute(stage)
        self.tp = Stream(StreamKind.TP, stage)
        self.cp = Stream(StreamKind.CP, stage)
        self.ep = Stream(StreamKind.EP, stage)
        self.last: int | None = None  # last node on the compute stream
        self.marks: list[int | None] = []  # last compute node at each layer boundary

    def node(self, tmpl: int, stream: Stream, deps: Sequence[int], name: str) -> int:
        kind = NodeKind.COMPUTE if self.ops.template_kind[tmpl] == COMPUTE else NodeKind.COLLECTIVE
        return self.b.add(kind, resources=[stream], deps=list(deps), rank=self.stage, name=name,
                          template=tmpl, stage=self.stage)

    def comp(self, tmpl: int, deps: Sequence[int] = ()) -> int:
        self.last = self.node(tmpl, self.compute, deps, self.ops.template_names[tmpl])
        return self.last

    def steps(self, steps: Sequence[Step], overlap_tp: bool, deps: Sequence[int] = ()) -> None:
        """Emit ``steps``; the first node also waits for ``deps``.

        With ``overlap_tp`` every compute step and TP collective is cut into
        ``TP_OVERLAP_CHUNKS`` pieces pipelined across the compute and tp streams: piece j of a
        step waits for piece j of the step before it (Megatron's TP communication overlap:
        a GEMM chunk runs while the previous chunk's all-gather / reduce-scatter is in flight).
        The attention core is not cut: it waits for every piece before it.
        """
        pending = list(deps)
        pieces: list[int] = []  # piece ids of the previous step when it was cut
        for step in steps:
            if overlap_tp and step[0] in ("tp", "c"):
                pieces = self._pieces(step[0], step[1], pieces, pending)
                pending = []
                continue
            pending += pieces
            pieces = []
            if step[0] == "moe":  # the step after it waits for every combine piece
                pending = self._chunked_moe(step, pending)
                continue
            if step[0] == "attn":
                self._attention(step[1], step[2], step[3], pending)
            else:
                self.comp(step[1], pending)
            pending = []
        if pieces:
            self.comp(self.ops.template("sync", []), pieces)

    def _pieces(self, kind: str, tmpl: int, prev: list[int], pending: list[int]) -> list[int]:
        """``TP_OVERLAP_CHUNKS`` pieces of a compute step or a TP collective."""
        n = TP_OVERLAP_CHUNKS
        return self._cut(kind == "c", self.ops.scaled(tmpl, 1.0 / n, f"/{n}"), n, prev, pending,
                         self.tp, "tp_chunk")

    def _cut(self, on_compute: bool, piece: int, n: int, prev: list[int], pending: list[int],
             stream: Stream, name: str) -> list[int]:
        """``n`` pieces ``piece`` of one step, piece j waiting for ``prev[j]`` (the step before,
        when cut) and the first for ``pending``; on ``stream`` (named ``name``) unless
        ``on_compute``. Communication pieces of a first step wait for the last compute op."""
        out = []
        for j in range(n):
            deps = ([prev[j]] if prev else []) + (pending if j == 0 else [])
            if on_compute:
                out.append(self.comp(piece, deps))
            else:
                if not prev and self.last is not None:
                    deps.append(self.last)
                out.append(self.node(piece, stream, deps, name))
        return out

    def _chunked_moe(self, step: Step, pending: list[int]) -> list[int]:
        """Dispatch, experts and combine of ``n`` token chunks (a ``("moe", a2a, experts, a2a,
        n)`` step), each piece one chunk's template; returns the combine pieces."""
        _, dispatch, experts, combine, n = step
        sent = self._cut(False, dispatch, n, [], pending, self.ep, "ep_chunk")
        done = self._cut(True, experts, n, sent, [], self.ep, "")
        return self._cut(False, combine, n, done, [], self.ep, "ep_chunk")

    def _attention(self, core: int, kv: int, n: int, pending: list[int]) -> None:
        if n == 1:
            self.comp(core, pending)
            return
        chunk = self.ops.scaled(core, 1.0 / n, f"/{n}")
        sends = []
        src = self.last
        for _ in range(n - 1):
            deps = [src] if src is not None else []
            sends.append(self.node(kv, self.cp, deps + pending, "cp_kv"))
        self.comp(chunk, pending)
        for j in range(1, n):
            self.comp(chunk, [sends[j - 1]])


def close_overlap_blocks(lo: LayerOps, ops: OpTable, tp_runs: bool
                         ) -> tuple[LayerOps, tuple[PipelinedBlock, ...]]:
    """``lo`` with its pieces replaced by closed-form blocks (:mod:`simcore.ir.blocks`): every
    context-parallel ring (an ``attn`` step of ``n > 1`` chunks), every chunked all-to-all (a
    ``moe`` step) and, with ``tp_runs``, every
    run of steps that :meth:`Emitter.steps` cuts into pieces for TP overlap (compute steps and
    TP collectives). A block becomes a compute step of its work (the GEMMs, the whole attention
    core) and a collective step of its exposed time; emitted without ``overlap_tp``, the steps
    are plain runs. Returns the blocks, one per distinct exposed step."""
    blocks: dict[int, PipelinedBlock] = {}

    def close(steps: tuple[Step, ...]) -> tuple[Step, ...]:
        out: list[Step] = []
        run: list[Step] = []
        for step in (*steps, ("end",)):
            if tp_runs and step[0] in ("tp", "c"):
                run.append(step)
                continue
            if run:
                out += _closed_run(run, ops, blocks)
                run = []
            if step[0] == "attn" and step[3] > 1:
                out += _closed_ring(step, ops, blocks)
            elif step[0] == "moe":
                out += _closed_moe(step, ops, blocks)
            elif step[0] != "end":
                out.append(step)
        return tuple(out)

    closed = replace(lo, fwd=close(lo.fwd), bwd=close(lo.bwd), recompute=close(lo.recompute),
                     head_fwd=close(lo.head_fwd), head_bwd=close(lo.head_bwd))
    return closed, tuple(blocks.values())


def _closed_run(run: list[Step], ops: OpTable, blocks: dict[int, PipelinedBlock]
                ) -> list[Step]:
    """The compute step and the exposed-TP step of one run of cut steps."""
    compute = [t for kind, t in run if kind == "c"]
    comm = [t for kind, t in run if kind == "tp"]
    out: list[Step] = []
    if compute:
        parts = [part for t in compute for part in ops.templates[t]]
        name = "tp_overlap_compute[" + "+".join(ops.template_names[t] for t in compute) + "]"
        out.append(("c", ops.template(name, parts)))
    if comm:
        steps = tuple((kind == "c", int(t)) for kind, t in run)
        name = "tp_overlap_exposed[" + ",".join(
            f"{'c' if c else 'tp'}:{ops.template_names[t]}#{t}" for c, t in steps) + "]"
        exposed = ops.template(name, [], ops.template_kind[comm[0]])
        blocks.setdefault(exposed, PipelinedBlock.pipelined_steps(exposed, steps,
                                                                  TP_OVERLAP_CHUNKS))
        out.append(("tp", exposed))
    return out


def _closed_ring(step: Step, ops: OpTable, blocks: dict[int, PipelinedBlock]) -> list[Step]:
    """The whole attention core and the exposed-CP step of one ring (:meth:`Emitter._attention`:
    ``n - 1`` KV blocks received in turn, chunk ``j`` waiting for the ``j``-th)."""
    _, core, kv, n = step
    name = f"cp_ring_exposed[{ops.template_names[core]}#{core},{ops.template_names[kv]}#{kv},{n}]"
    exposed = ops.template(name, [], ops.template_kind[kv])
    blocks.setdefault(exposed, PipelinedBlock.ring(exposed, core, kv, int(n)))
    return [("c", core), ("cp", exposed)]


def _closed_moe(step: Step, ops: OpTable, blocks: dict[int, PipelinedBlock]) -> list[Step]:
    """The experts of every chunk and the exposed-EP step of one chunked all-to-all
    (:meth:`Emitter._chunked_moe`)."""
    _, dispatch, experts, combine, n = step
    name = (f"ep_chunks_exposed[{ops.template_names[dispatch]}#{dispatch},"
            f"{ops.template_names[experts]}#{experts},{ops.template_names[combine]}#{combine},{n}]")
    exposed = ops.template(name, [], ops.template_kind[dispatch])
    steps = ((False, int(dispatch)), (True, int(experts)), (False, int(combine)))
    blocks.setdefault(exposed, PipelinedBlock.pipelined_steps(exposed, steps, int(n), 1.0))
    return [("c", ops.scaled(experts, float(n), f"x{n}")), ("ep", exposed)]
