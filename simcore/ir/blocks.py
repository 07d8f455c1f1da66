"""Pipelined overlap blocks in closed form: one op instead of a graph of pieces.

Two overlaps are modelled as small graphs of pieces on two in-order streams, the compute
stream and one communication stream (:mod:`simcore.workloads.transformer.emitter`):
- Megatron-LM's TP communication overlap cuts every GEMM step and TP collective of a run of
  such steps into ``n`` pieces: piece ``j`` of step ``k`` waits for piece ``j`` of step ``k - 1``
  and for the piece before it on its own stream;
- a context-parallel ring (Liu et al. 2023, ring attention) runs the attention core in ``n``
  chunks: chunk ``j`` waits for the ``j``-th KV block, received in turn on the cp stream;
- a MoE layer's all-to-all pipelined with its experts (FasterMoE, He et al. PPoPP 2022; Tutel,
  Hwang et al. MLSys 2023 [R]) splits the tokens into ``n`` chunks: dispatch, experts and
  combine of chunk ``j`` follow each other, each a collective or GEMM of the chunk's own size
  (not a fraction of the whole), the pieces ordered as TP overlap's.
As a graph every piece heads its own chain, and a hardware sweep walks all of them for every
point (GPT-3 175B, tp 8, pp 8 with TP overlap: ~1 million chains, against ~5,700 without).

Such a block touches the rest of the iteration only at its ends: its first pieces wait for the
op before it, nothing else runs on its two streams while it runs, and the op after it waits
for its last pieces. So it is one op whose duration is the makespan of its pieces (``span``),
a max-plus recurrence in program order::

    finish(i) = max(finish of the last piece on i's stream, finish of i's dependencies) + d_i

computed here per stage and for a batch of points at once. Its compute pieces are stretched by
the stage's overlap slowdown like any compute; its communication still counts as overlappable
(it runs beside the compute pieces). The block is emitted as two ops on the compute stream: the
block's compute (its GEMM steps or attention core, whole) and a collective of the block's kind
whose duration is ``span - compute``: inside a block some piece always runs (the recurrence's
longest path covers the span), so that difference is exactly the time the communication stream
runs alone, the block's exposed communication in the piece graph.

Same iteration times as the piece graph up to rounding (the sums are taken in another order:
~1e-12 relative); the breakdown may move exposed time between communication kinds where a DP
or PP transfer runs beside a block's exposed time (it counts as covered here, as beside any
blocking collective).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

__all__ = ["Piece", "PipelinedBlock", "block_exposed_s"]

FloatArray = NDArray[np.float64]


@dataclass(frozen=True)
class Piece:
    """One piece of a block, in program order.

    Attributes:
        on_compute: on the compute stream (else on the block's communication stream).
        template: the template whose duration ``fraction`` of is the piece's.
        fraction: the piece's share of the template.
        deps: earlier pieces of the block it waits for, besides the piece before it on its
            stream.
    """

    on_compute: bool
    template: int
    fraction: float
    deps: tuple[int, ...] = ()


@dataclass(frozen=True)
class PipelinedBlock:
    """Pieces on the compute stream and one communication stream, replaced by one op.

    Attributes:
        exposed_template: the template of the block's exposed-communication op (no kernels:
            its duration is :func:`block_exposed_s`).
        pieces: the pieces in program order.
    """

    exposed_template: int
    pieces: tuple[Piece, ...]

    @classmethod
    def pipelined_steps(cls, exposed_template: int, steps: tuple[tuple[bool, int], ...],
                        n: int, fraction: float | None = None) -> PipelinedBlock:
        """Steps (on the compute stream, template) each cut into ``n`` pieces, piece ``j`` of
        a step waiting for piece ``j`` of the step before (TP communication overlap). A piece
        is ``fraction`` of its step's template: ``1 / n`` (None) when the template is the whole
        step, 1 when it is one chunk's (a chunked all-to-all)."""
        share = 1.0 / n if fraction is None else fraction
        pieces = [Piece(on, t, share, (n * (k - 1) + j,) if k else ())
                  for k, (on, t) in enumerate(steps) for j in range(n)]
        return cls(exposed_template, tuple(pieces))

    @classmethod
    def ring(cls, exposed_template: int, whole_template: int, block_template: int, n: int
             ) -> PipelinedBlock:
        """A ring of ``n`` chunks of ``whole_template`` (computed, each ``1 / n`` of it) beside
        ``n - 1`` transfers of ``block_template``: chunk ``j`` waits for the ``j``-th transfer
        (ring attention)."""
        sends = [Piece(False, block_template, 1.0) for _ in range(n - 1)]
        chunks = [Piece(True, whole_template, 1.0 / n, (j - 1,) if j else ()) for j in range(n)]
        return cls(exposed_template, (*sends, *chunks))


def block_exposed_s(block: PipelinedBlock, tdur: FloatArray, scale: FloatArray) -> FloatArray:
    """(P, B) exposed communication seconds of ``block`` on each stage: its span minus its
    compute.

    Args:
        tdur: (U, B) seconds of every template.
        scale: (P, B) factor stretching each stage's compute (the overlap slowdown).
    """
    p, b = scale.shape
    last = {True: np.zeros((p, b)), False: np.zeros((p, b))}  # each stream's last finish
    finish: list[FloatArray] = []
    compute = np.zeros((p, b))
    for piece in block.pieces:
        d = tdur[piece.template] * piece.fraction
        if piece.on_compute:
            d = d * scale
            compute += d
        start = last[piece.on_compute]
        for dep in piece.deps:
            start = np.maximum(start, finish[dep])
        end = start + d
        finish.append(end)
        last[piece.on_compute] = end
    span = np.maximum(last[True], last[False])
    return np.asarray(np.maximum(span - compute, 0.0))
