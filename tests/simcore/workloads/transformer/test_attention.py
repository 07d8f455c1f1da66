"""Attention core variants: flash vs Megatron's unfused core, and context-parallel totals."""

from __future__ import annotations

from dataclasses import replace

import pytest

from simcore.api import simulate_batch
from simcore.specs.parallel import ParallelSpec
from simcore.specs.system import SystemSpec
from simcore.workloads.transformer.spec import ModelSpec

MODEL = ModelSpec(name="t", num_layers=4, hidden_size=1024, num_heads=16, seq_len=4096,
                  vocab_size=1024)


def test_unfused_attention_is_slower_than_flash_for_long_sequences() -> None:
    par = ParallelSpec(global_batch=8)
    flash = simulate_batch(MODEL, par, [SystemSpec(num_gpus=8)])
    unfused = simulate_batch(MODEL, replace(par, flash_attention=False), [SystemSpec(num_gpus=8)])
    assert unfused.compute_s[0] > 1.2 * flash.compute_s[0]


def test_context_parallel_splits_the_attention_work_not_multiplies_it() -> None:
    # cp=2 on 2 GPUs does about half the per-GPU compute of 1 GPU (ZeRO-1 shards the step)
    one = simulate_batch(MODEL, ParallelSpec(global_batch=1, zero_stage=1), [SystemSpec(num_gpus=1,
                                                                          gpus_per_node=1)])
    two = simulate_batch(MODEL, ParallelSpec(cp=2, global_batch=1, zero_stage=1), [SystemSpec(num_gpus=2,
                                                                                gpus_per_node=2)])
    assert two.compute_s[0] == pytest.approx(one.compute_s[0] / 2, rel=0.1)
    assert two.exposed_comm_by_kind["cp"][0] >= 0
