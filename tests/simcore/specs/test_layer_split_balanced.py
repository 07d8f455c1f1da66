"""``parallel.layer_split = balanced``: whole layers per model chunk against the output layer.

Goldens: Llama 3 405B's hand balance (Dubey et al. 2024, Sec. 3.3.2, as recalled, not in
reference/: 126 layers on 16 pipeline stages, one layer fewer on the first and on the last
stage) and the output layer's FLOP share from the reference's model-FLOP formula ``72 s l h^2 (1 + s/6h + V/12lh)``
(reference/peers-hardware-measurements.md, Part B): per layer ``1 + s/6h``, output ``V/12h``,
so the output layer is worth ``V / (12 h + 2 s)`` layers. Optimality is checked against every
split of small layer counts.
"""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest

from simcore.api import simulate_batch
from simcore.errors import InputError
from simcore.memory import footprint_bytes
from simcore.specs.layer_split import balanced_split, chunk_layers
from simcore.specs.parallel import ParallelSpec
from simcore.specs.system import SystemSpec
from simcore.workloads.transformer.spec import ModelSpec


def test_llama3_405b_sixteen_stages_lose_a_layer_first_and_last() -> None:
    llama = ModelSpec(name="llama3_405b", num_layers=126, hidden_size=16384, num_heads=128,
                      num_kv_heads=8, ffn_hidden_size=53248, seq_len=8192, vocab_size=128256,
                      mlp="swiglu")
    split = chunk_layers(126, 16, policy="balanced", output_layers=llama.output_layer_equivalents())
    assert split == (7, *[8] * 14, 7)


def test_gpt3_output_layer_share_follows_the_flop_formula() -> None:
    h, s, v = 12288, 2048, 51200
    gpt3 = ModelSpec(name="gpt3", num_layers=96, hidden_size=h, num_heads=96, seq_len=s,
                     vocab_size=v)
    assert gpt3.output_layer_equivalents() == pytest.approx(v / (12 * h + 2 * s), rel=1e-12)


def _cost(split: tuple[int, ...], output: float) -> float:
    return max(*split[:-1], split[-1] + output) if len(split) > 1 else split[0] + output


@pytest.mark.parametrize("output", [0.0, 0.34, 0.61, 1.0, 1.5, 2.7])
def test_balanced_is_the_least_largest_chunk_and_otherwise_even_early_chunks_lighter(output: float
                                                                             ) -> None:
    for chunks in range(1, 5):
        for layers in range(chunks, 11):
            splits = [c for c in itertools.product(range(1, layers + 1), repeat=chunks)
                      if sum(c) == layers]
            best = min(_cost(c, output) for c in splits)
            got = balanced_split(layers, chunks, output)
            assert sum(got) == layers and min(got) >= 1
            assert _cost(got, output) == best, (layers, chunks, got)
            body = got[:-1]  # the chunks without the output layer: as even as they can be,
            assert max(body, default=0) - min(body, default=0) <= 1  # the lighter ones first
            assert list(body) == sorted(body), (layers, chunks, got)


def test_bad_layer_split_is_named() -> None:
    with pytest.raises(InputError, match=r"parallel\.layer_split.*'uneven'.*even, balanced"):
        ParallelSpec(pp=2, layer_split="uneven")
    with pytest.raises(InputError, match=r"parallel\.layer_split.*first_stage_layers"):
        ParallelSpec(pp=4, layer_split="balanced", first_stage_layers=3)


TINY = ModelSpec(name="t", num_layers=10, hidden_size=256, num_heads=4, seq_len=512,
                 vocab_size=8192)  # output layer worth 8192 / (12 * 256 + 1024) = 2 layers


def test_balanced_plan_is_the_explicit_plan_of_its_split() -> None:
    """The generator and the memory model read the balanced split: the plan simulates and
    weighs exactly as the Megatron first/last-stage counts of the same split, and not as the
    even split."""
    balanced = ParallelSpec(pp=4, global_batch=8, layer_split="balanced")
    assert balanced.chunk_layers(10, TINY.output_layer_equivalents()) == (3, 3, 3, 1)
    explicit = replace(balanced, layer_split="even", first_stage_layers=3, last_stage_layers=1)
    even = replace(balanced, layer_split="even")
    system = SystemSpec(num_gpus=4, gpus_per_node=4)
    balanced, explicit, even = (p.resolve(4) for p in (balanced, explicit, even))
    times = {name: float(simulate_batch(TINY, par, [system]).iteration_time_s[0])
             for name, par in (("balanced", balanced), ("explicit", explicit), ("even", even))}
    assert times["balanced"] == times["explicit"] != times["even"]
    for stage in range(4):
        assert footprint_bytes(TINY, balanced, stage) == footprint_bytes(TINY, explicit, stage)
    assert footprint_bytes(TINY, balanced, 3) != footprint_bytes(TINY, even, 3)


def test_balanced_beats_even_when_the_output_layer_dominates_the_last_stage() -> None:
    """16 layers of h = 2,048 and a 128,256-word vocabulary: the output layer is worth 4.47
    layers of FLOPs, so the even split's last stage carries 8.47 and sets the 1F1B steady
    state; balanced (5, 5, 5, 1) caps every stage at 5.47. With GEMMs this size the time
    follows the FLOPs (on a tiny model launch costs dominate and it need not)."""
    wide = ModelSpec(name="wide_vocab", num_layers=16, hidden_size=2048, num_heads=16,
                     seq_len=2048, vocab_size=128256)
    system = SystemSpec(num_gpus=4, gpus_per_node=4)
    times = {}
    for split in ("even", "balanced"):
        par = ParallelSpec(pp=4, global_batch=16, layer_split=split).resolve(4)
        times[split] = float(simulate_batch(wide, par, [system]).iteration_time_s[0])
    assert ParallelSpec(pp=4, layer_split="balanced").chunk_layers(
        16, wide.output_layer_equivalents()) == (5, 5, 5, 1)
    assert times["balanced"] < 0.8 * times["even"]  # steady state 5.47 / 8.47 of the stage
