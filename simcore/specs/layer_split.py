"""How many transformer layers each pipeline model chunk holds (even and uneven splits).

Model chunks are the ``V = pp * vp`` virtual pipeline stages in model order: chunk
``v = c * pp + s`` is model chunk ``c`` of physical stage ``s`` (Narayanan et al. 2021, Sec.
2.2.2, Megatron-LM's interleaved schedule). Default split, as even as possible: every chunk
gets ``L // V`` layers and the FIRST ``L % V`` chunks (in model order) get one more. This is
DeepSpeed's ``partition_uniform`` (the pipeline partitioner of Megatron-DeepSpeed, the stack
BLOOM-176B and MT-NLG ran on); with ``vp = 1`` it is the split of
:func:`simcore.workloads.transformer.memory.layers_in_stage`. Megatron-LM itself requires
``L % V == 0`` unless the first/last stage counts are given, so every even split is unchanged.

Explicit override (Megatron-Core's ``decoder_first_pipeline_num_layers`` /
``decoder_last_pipeline_num_layers``, i.e. ``parallel.first_stage_layers`` /
``parallel.last_stage_layers``): the first and/or last pipeline stage get the given counts and
the remaining layers are split over the other stages as above (Megatron asks them to divide
evenly; we accept any remainder, first middle stages get one more). The override needs
``vp = 1`` (Megatron's per-chunk rule for interleaving is not modelled).

Balanced split (``parallel.layer_split = balanced``): the last model chunk also runs the output
layer (the ``2 s h V`` logits GEMM and the loss), worth ``output_layers`` transformer layers of
forward FLOPs (:meth:`simcore.workloads.transformer.spec.ModelSpec.output_layer_equivalents`;
0.34 for GPT-3 175B, 0.61 for Llama 3 405B). Chunks get whole layers so that the largest chunk
cost (layers, plus ``output_layers`` on the last chunk) is the least possible, every chunk at
least one layer; of chunks that tie, the earliest are left the lighter, so the first stage (the
embedding, and in 1F1B the most micro-batches of activations in flight) gives up a layer first.
This is the hand balance of Llama 3 405B (Dubey et al. 2024, Sec. 3.3.2, as recalled: not in
reference/: one transformer layer fewer on the first and on the last pipeline stage): 126
layers on 16 stages give ``7, 8 x 14, 7``. The minimum is reached by adding layers one at a
time to the chunk whose cost after the addition is least (layers are equal items, so the
greedy is optimal for the largest cost). It is a compute balance; stage memory is not
balanced.
"""

from __future__ import annotations

import heapq

from simcore.errors import require

__all__ = ["LAYER_SPLITS", "balanced_split", "check_layer_split", "chunk_layers", "layers_by_speed",
           "stage_layers"]

#: ``parallel.layer_split``: as even as possible, or balanced against the output layer's work
LAYER_SPLITS = ("even", "balanced")


def _even(num_layers: int, parts: int) -> list[int]:
    base, extra = divmod(num_layers, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def check_layer_split(policy: str, first_stage_layers: int | None,
                      last_stage_layers: int | None) -> None:
    """``parallel.layer_split`` is a known policy, and ``balanced`` has no explicit counts.

    Raises:
        InputError: naming ``parallel.layer_split``.
    """
    require(policy in LAYER_SPLITS, "parallel.layer_split", policy,
            f"must be one of {', '.join(LAYER_SPLITS)}")
    require(policy == "even" or (first_stage_layers is None and last_stage_layers is None),
            "parallel.layer_split", policy,
            "explicit parallel.first_stage_layers / last_stage_layers need layer_split=even")


def balanced_split(num_layers: int, chunks: int, output_layers: float) -> tuple[int, ...]:
    """Whole layers per chunk minimizing the largest of ``layers + output_layers`` on the last
    chunk and ``layers`` on the others, every chunk at least one layer; ties leave the earliest
    chunks lighter (module docstring). ``num_layers >= chunks`` is the caller's check."""
    counts = [1] * chunks
    extra = [0.0] * chunks
    extra[-1] = float(output_layers)
    # (cost after one more layer, -chunk): the least cost first, the latest chunk of a tie
    heap = [(1.0 + 1.0 + extra[v], -v) for v in range(chunks)]
    heapq.heapify(heap)
    for _ in range(num_layers - chunks):
        _, neg = heapq.heappop(heap)
        v = -neg
        counts[v] += 1
        heapq.heappush(heap, (counts[v] + 1.0 + extra[v], neg))
    return tuple(counts)


def chunk_layers(num_layers: int, pp: int, vp: int = 1, first_stage_layers: int | None = None,
                 last_stage_layers: int | None = None, policy: str = "even",
                 output_layers: float = 0.0) -> tuple[int, ...]:
    """Layers of each model chunk ``v = c * pp + s`` (length ``pp * vp``, model order).

    Args:
        policy: ``even`` or ``balanced`` (``parallel.layer_split``; module docstring).
        output_layers: the output layer's work in transformer layers (``balanced`` only).

    Raises:
        InputError: a chunk would get no layer, the override does not add up, or an override
            is given with the balanced split.
    """
    chunks = pp * vp
    check_layer_split(policy, first_stage_layers, last_stage_layers)
    require(num_layers >= chunks, "workload.num_layers", num_layers,
            f"every model chunk needs a layer: must be >= pp*vp={chunks}")
    if policy == "balanced":
        return balanced_split(num_layers, chunks, output_layers)
    if first_stage_layers is None and last_stage_layers is None:
        return tuple(_even(num_layers, chunks))
    key = "parallel.first_stage_layers" if first_stage_layers is not None \
        else "parallel.last_stage_layers"
    value = first_stage_layers if first_stage_layers is not None else last_stage_layers
    require(vp == 1, key, value, "an explicit first/last stage layer count needs vp=1")
    require(pp >= 2, key, value, "an explicit first/last stage layer count needs pp >= 2")
    head = [first_stage_layers] if first_stage_layers is not None else []
    tail = [last_stage_layers] if last_stage_layers is not None else []
    middle_stages = pp - len(head) - len(tail)
    rest = num_layers - sum(head) - sum(tail)
    if middle_stages == 0:
        require(rest == 0, key, value,
                f"first + last stage layers must equal workload.num_layers={num_layers}")
        return tuple(head + tail)
    require(rest >= middle_stages, key, value,
            f"leaves {rest} of workload.num_layers={num_layers} for {middle_stages} other "
            "stages (each needs a layer)")
    return tuple(head + _even(rest, middle_stages) + tail)


def stage_layers(split: tuple[int, ...], pp: int, stage: int) -> int:
    """Layers on physical pipeline ``stage``: the sum over its chunks ``stage, stage + pp, ...``."""
    return sum(split[stage::pp])


def layers_by_speed(num_layers: int, speeds: tuple[float, ...]) -> tuple[int, ...]:
    """Layers per pipeline stage proportional to each stage's device speed (stages on mixed
    device pools): largest-remainder rounding of ``L * speed / sum(speeds)``, every stage at
    least one layer. With ``pp = 2`` pass the first count as ``parallel.first_stage_layers``.

    Raises:
        InputError: fewer layers than stages, or a speed that is not positive.
    """
    require(num_layers >= len(speeds) >= 1, "workload.num_layers", num_layers,
            f"every stage needs a layer: must be >= {len(speeds)}")
    require(all(x > 0 for x in speeds), "speeds", speeds, "must be positive")
    share = [max(1.0, num_layers * x / sum(speeds)) for x in speeds]
    counts = [int(x) for x in share]
    order = sorted(range(len(speeds)), key=lambda i: counts[i] - share[i])
    for i in order[:num_layers - sum(counts)]:
        counts[i] += 1
    while sum(counts) > num_layers:  # the floor of one layer overshot: take from the largest
        counts[counts.index(max(counts))] -= 1
    return tuple(counts)
