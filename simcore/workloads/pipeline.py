"""Pipeline-parallel schedules: the per-stage program order of forward and backward passes.

1F1B (PipeDream-Flush; Narayanan et al. 2021, Sec. 2.2.1): stage ``s`` of ``p`` runs
``min(p - s - 1, m)`` warm-up forwards, then alternates one forward and one backward, then
drains the remaining backwards. The interleaved schedule (same paper, Sec. 2.2.2) gives every
GPU ``v`` model chunks (virtual stages ``c * p + s``); micro-batches advance in groups of ``g``
through the chunks, with ``(p - s - 1) * 2 + (v - 1) * g`` warm-up forwards (Megatron-LM's
``forward_backward_pipelining_with_interleaving``: ``g = p``; Megatron-Core's
``microbatch_group_size_per_vp_stage`` sets ``g >= p``; as its schedule table, the last group
holds the ``m mod g`` micro-batches left, which must then be at least ``p``, e.g. ``g = m`` when
``p`` does not divide ``m``). The bubbles are *not* computed here: the engine schedules these
programs with their cross-stage dependencies and the idle time comes out of the schedule.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

__all__ = ["PipeOp", "pipeline_program_arrays", "stage_program", "stage_program_arrays"]


class PipeOp(NamedTuple):
    """One pass of one micro-batch through one model chunk on one stage."""

    forward: bool
    micro_batch: int
    chunk: int


def _table(k: NDArray[np.int64], group: int, vp: int, num_micro_batches: int
           ) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """(micro-batch, chunk) of the ``k``-th forward of a stage: groups of ``group``
    micro-batches, each run through chunk 0, 1, ... in turn; the last group is what is left
    (Megatron-Core's schedule table)."""
    full = (num_micro_batches // group) * group * vp  # passes of the whole groups
    last = max(num_micro_batches % group, 1)
    mb = np.where(k < full, (k // (group * vp)) * group + k % group,
                  (num_micro_batches // group) * group + (k - full) % last)
    chunk = np.where(k < full, (k // group) % vp, (k - full) // last)
    return mb, chunk


def stage_program(stage: int, pp: int, vp: int, num_micro_batches: int,
                  group: int | None = None) -> list[PipeOp]:
    """The in-order program of pipeline ``stage``.

    Args:
        stage: physical stage 0..pp-1.
        pp: pipeline stages.
        vp: model chunks per stage (1 = plain 1F1B).
        num_micro_batches: micro-batches per iteration (with ``vp > 1``: a multiple of
            ``group``, or a remainder of at least ``pp`` for the last group).
        group: micro-batches a chunk runs in a row (``vp > 1``; None = ``pp``).

    Returns:
        2 x ``num_micro_batches`` x ``vp`` passes, forwards and backwards, in issue order.
    """
    g = pp if group is None else group
    total = num_micro_batches * vp
    if vp == 1:
        warmup = min(pp - stage - 1, num_micro_batches)
    else:
        warmup = min((pp - stage - 1) * 2 + (vp - 1) * g, total)
    mbs, chunks = _table(np.arange(total, dtype=np.int64), g, vp, num_micro_batches)

    def fwd(k: int) -> PipeOp:
        return PipeOp(True, int(mbs[k]), int(chunks[k]))

    def bwd(k: int) -> PipeOp:
        return PipeOp(False, int(mbs[k]), vp - 1 - int(chunks[k]))

    program = [fwd(k) for k in range(warmup)]
    steady = total - warmup
    for i in range(steady):
        program.append(fwd(warmup + i))
        program.append(bwd(i))
    program.extend(bwd(k) for k in range(steady, total))
    return program


def stage_program_arrays(stage: int, pp: int, vp: int, num_micro_batches: int,
                         group: int | None = None
                         ) -> tuple[NDArray[np.bool_], NDArray[np.int64], NDArray[np.int64]]:
    """:func:`stage_program` as arrays (forward?, micro-batch, chunk), built with numpy."""
    _, fwd, mb, chunk, _ = _programs(np.asarray([stage], dtype=np.int64), pp, vp,
                                     num_micro_batches, group)
    return fwd, mb, chunk


def pipeline_program_arrays(pp: int, vp: int, num_micro_batches: int, group: int | None = None
                            ) -> tuple[NDArray[np.int64], NDArray[np.bool_], NDArray[np.int64],
                                       NDArray[np.int64], NDArray[np.int64]]:
    """Every stage's :func:`stage_program_arrays`, concatenated in stage order, with one set of
    numpy calls: (stage, forward?, micro-batch, chunk, k) per pass, where ``k`` is the pass's
    index among its stage's forwards (or backwards)."""
    return _programs(np.arange(pp, dtype=np.int64), pp, vp, num_micro_batches, group)


def _programs(stages: NDArray[np.int64], pp: int, vp: int, num_micro_batches: int,
              group: int | None = None
              ) -> tuple[NDArray[np.int64], NDArray[np.bool_], NDArray[np.int64],
                         NDArray[np.int64], NDArray[np.int64]]:
    """:func:`stage_program` of each of ``stages``, concatenated: (stage, forward?,
    micro-batch, chunk, k) per pass; warm-up forwards, then forward/backward pairs, then the
    remaining backwards."""
    i64 = np.int64
    g = pp if group is None else group
    total = num_micro_batches * vp
    if vp == 1:
        warmup = np.minimum(pp - stages - 1, num_micro_batches)
    else:
        warmup = np.minimum((pp - stages - 1) * 2 + (vp - 1) * g, total)
    steady = total - warmup
    n = stages.size
    stage = np.repeat(stages, 2 * total)
    row = np.repeat(np.arange(n, dtype=i64), 2 * total)
    q = np.arange(2 * total * n, dtype=i64) - row * (2 * total)  # position in the program
    w, st = warmup[row], steady[row]
    r = q - w
    mid = (r >= 0) & (r < 2 * st)
    fwd = (r < 0) | (mid & (r % 2 == 0))
    k = np.where(r < 0, q, np.where(mid, np.where(fwd, w + r // 2, r // 2), r - st))
    mb, c = _table(k, g, vp, num_micro_batches)
    return stage, fwd, mb, np.where(fwd, c, vp - 1 - c), k
