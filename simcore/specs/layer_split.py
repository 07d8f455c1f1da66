"""How many transformer layers each pipeline model chunk holds (even and uneven splits).

Model chunks are the ``V = pp * vp`` virtual pipeline stages in model order: chunk
``v = c * pp + s`` is model chunk ``c`` of physical stage ``s`` (Narayanan et al. 2021, Sec.
2.2.2, Megatron-LM's interleaved schedule). Default split, as even as possible: every chunk
gets ``L // V`` layers and the FIRST ``L % V`` chunks (in model order) get one more. This is
DeepSpeed's ``partition_uniform`` (the pipeline partitioner of Megatron-DeepSpeed, the stack
BLOOM-176B and MT-NLG ran on); with ``vp = 1`` it is the split of
:func:`simcore.workloads.transformer.memory.layers_in_stage`. Megatron-LM itself requires ``L % V == 0``
unless the first/last stage counts are given, so every even split is unchanged.

Explicit override (Megatron-Core's ``decoder_first_pipeline_num_layers`` /
``decoder_last_pipeline_num_layers``, i.e. ``parallel.first_stage_layers`` /
``parallel.last_stage_layers``): the first and/or last pipeline stage get the given counts and
the remaining layers are split over the other stages as above (Megatron asks them to divide
evenly; we accept any remainder, first middle stages get one more). The override needs
``vp = 1`` (Megatron's per-chunk rule for interleaving is not modelled).
"""

from __future__ import annotations

from simcore.errors import require

__all__ = ["chunk_layers", "layers_by_speed", "stage_layers"]


def _even(num_layers: int, parts: int) -> list[int]:
    base, extra = divmod(num_layers, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def chunk_layers(num_layers: int, pp: int, vp: int = 1, first_stage_layers: int | None = None,
                 last_stage_layers: int | None = None) -> tuple[int, ...]:
    """Layers of each model chunk ``v = c * pp + s`` (length ``pp * vp``, model order).

    Raises:
        InputError: a chunk would get no layer, or the override does not add up.
    """
    chunks = pp * vp
    require(num_layers >= chunks, "workload.num_layers", num_layers,
            f"every model chunk needs a layer: must be >= pp*vp={chunks}")
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
