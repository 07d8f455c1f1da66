"""Pipelined overlap blocks in closed form: one op instead of a grid of pieces.

Megatron-LM's TP communication overlap cuts every GEMM step and TP collective of a run of
such steps into ``n`` pieces pipelined across two in-order streams (compute, tp): piece ``j``
of step ``k`` waits for piece ``j`` of step ``k - 1`` and for the piece before it on its own
stream (:mod:`simcore.workloads.transformer.emitter`). As a graph that is ``n`` nodes per step,
each heading its own chain, and a hardware sweep walks all of them for every point.

A block touches the rest of the iteration only at its ends: its first pieces wait for the op
before it, nothing else runs on its streams while it runs, and the op after it waits for its
last pieces. So it is one op whose duration is the makespan of its grid (``span``), a
max-plus recurrence over the pieces::

    finish(k, j) = max(finish(k, j - 1) or the stream's last finish, finish(k - 1, j)) + d_k / n

computed here for a batch of points at once. Its compute pieces are stretched by the stage's
overlap slowdown like any compute; its communication still counts as overlappable (it runs
beside the compute pieces). The op is emitted as two ops on the compute stream: the block's
compute (the sum of its GEMM steps) and a TP collective whose duration is ``span - compute``,
the TP time the pipeline could not hide. Inside a block some piece always runs (the
recurrence's longest path covers the span), so that difference is exactly the time the tp
stream runs alone: the exposed TP time of the piece graph.

Same iteration times as the piece graph up to rounding (the sums are taken in another order:
~1e-15 relative); the breakdown may move exposed time between communication kinds where a DP
or PP transfer runs beside a block's exposed TP time (it counts as covered here, as beside any
blocking collective).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

__all__ = ["PipelinedBlock", "block_exposed_s"]

FloatArray = NDArray[np.float64]


@dataclass(frozen=True)
class PipelinedBlock:
    """A run of steps cut into ``pieces`` pieces pipelined across the compute and tp streams.

    Attributes:
        exposed_template: the template of the block's exposed TP op (no kernels: its
            duration is :func:`block_exposed_s`).
        steps: per step in program order, (on the compute stream, template of the whole step).
        pieces: pieces per step.
    """

    exposed_template: int
    steps: tuple[tuple[bool, int], ...]
    pieces: int


def block_exposed_s(block: PipelinedBlock, tdur: FloatArray, scale: FloatArray) -> FloatArray:
    """(P, B) exposed TP seconds of ``block`` on each stage: its span minus its compute.

    Args:
        tdur: (U, B) seconds of every template (the steps' whole durations).
        scale: (P, B) factor stretching each stage's compute (the overlap slowdown).
    """
    n = block.pieces
    p, b = scale.shape
    last = {True: np.zeros((p, b)), False: np.zeros((p, b))}  # each stream's last finish
    prev: list[FloatArray] | None = None
    compute = np.zeros((p, b))
    for on_compute, template in block.steps:
        whole = tdur[template] * scale if on_compute else np.broadcast_to(tdur[template], (p, b))
        if on_compute:
            compute += whole
        piece = whole / n
        finish = last[on_compute]
        out = []
        for j in range(n):
            start = finish if prev is None else np.maximum(finish, prev[j])
            finish = start + piece
            out.append(finish)
        last[on_compute] = finish
        prev = out
    span = np.maximum(last[True], last[False])
    return np.asarray(np.maximum(span - compute, 0.0))
