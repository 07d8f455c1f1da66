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


@pytest.mark.parametrize(("dropout", "bytes_per_score"), [(True, 9.0), (False, 4.0)])
def test_unfused_core_without_dropout_has_no_dropout_pass(dropout: bool,
                                                          bytes_per_score: float) -> None:
    """Megatron's unfused core: scale-mask-softmax reads and writes the 2-byte scores (4 B);
    dropout reads and writes them again and writes a 1-byte mask (5 B), none of it at p = 0."""
    from simcore.ir.ops import OpTable
    from simcore.workloads.transformer.layers import attention_core

    ops = OpTable()
    kernels = attention_core(ops, 16.0, 2048.0, 2048.0, 64.0, flash=False, fwd=True,
                             act_bytes=2.0, dropout=dropout)
    mem = [ops.kernels[k] for k, _ in kernels if ops.kernels[k][0] == "mem"]
    assert len(mem) == 1
    assert mem[0][1][0] == pytest.approx(16.0 * 2048.0 * 2048.0 * bytes_per_score)


def test_model_without_dropout_is_faster_only_with_the_unfused_core() -> None:
    par = ParallelSpec(global_batch=8)
    systems = [SystemSpec(num_gpus=8)]
    without = replace(MODEL, dropout=0.0)
    unfused = replace(par, flash_attention=False)
    assert simulate_batch(without, unfused, systems).compute_s[0] < simulate_batch(
        MODEL, unfused, systems).compute_s[0]
    assert simulate_batch(without, par, systems).compute_s[0] == simulate_batch(
        MODEL, par, systems).compute_s[0]


def test_context_parallel_splits_the_attention_work_not_multiplies_it() -> None:
    # cp=2 on 2 GPUs does about half the per-GPU compute of 1 GPU (ZeRO-1 shards the step)
    one = simulate_batch(MODEL, ParallelSpec(global_batch=1, zero_stage=1), [SystemSpec(num_gpus=1,
                                                                          gpus_per_node=1)])
    two = simulate_batch(MODEL, ParallelSpec(cp=2, global_batch=1, zero_stage=1), [SystemSpec(num_gpus=2,
                                                                                gpus_per_node=2)])
    assert two.compute_s[0] == pytest.approx(one.compute_s[0] / 2, rel=0.1)
    assert two.exposed_comm_by_kind["cp"][0] >= 0
