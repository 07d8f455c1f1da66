"""HAP's plan on the per-device cost model: baselines ordered as physics says."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from simcore.hetero.hap import hap_plan, instructions, plan_cost, profiled_ratios
from simcore.specs.system import AcceleratorSpec, DevicePool, SystemSpec, TopologyDimSpec
from simcore.workloads.transformer.spec import ModelSpec

BERT = ModelSpec(name="bert_base", num_layers=12, hidden_size=768, num_heads=12, seq_len=128,
                 vocab_size=30522)
FAST = AcceleratorSpec(name="fast", peak_tflops_fp32=15.7, peak_tflops_fp16=125.0)
SLOW = AcceleratorSpec(name="slow", peak_tflops_fp32=10.6, peak_tflops_fp16=21.2,
                       hbm_bandwidth_GBps=732.0)


def _cluster(second: AcceleratorSpec, out_GBps: float = 0.1625) -> SystemSpec:
    return SystemSpec(num_gpus=16, gpus_per_node=8, accelerator=FAST,
                      scaleout=TopologyDimSpec(bandwidth_GBps=out_GBps),
                      pools=(DevicePool(count=8), DevicePool(second, count=8)))


def test_identical_devices_get_even_ratios_and_hap_equals_dp() -> None:
    ins, counts = instructions(BERT, _cluster(replace(FAST, name="twin")), 512)
    plan = hap_plan(ins, counts)
    np.testing.assert_allclose(plan.ratios * 16, [1.0, 1.0], rtol=1e-9)
    dp = tuple("allreduce" for _ in ins)
    assert plan.iteration_s == pytest.approx(plan_cost(ins, dp, np.full(2, 1 / 16)), rel=1e-9)


def test_hap_is_no_worse_than_dp_proportional_which_beats_dp_even() -> None:
    ins, counts = instructions(BERT, _cluster(SLOW), 512)
    dp = tuple("allreduce" for _ in ins)
    even = plan_cost(ins, dp, np.full(2, 1 / 16))
    prop = plan_cost(ins, dp, profiled_ratios(ins, counts))
    plan = hap_plan(ins, counts)
    assert plan.iteration_s <= prop * (1 + 1e-9) < even
    assert plan.ratios[0] > plan.ratios[1] and counts @ plan.ratios == pytest.approx(1.0)


def test_sfb_wins_for_a_tiny_token_batch_on_a_slow_network() -> None:
    """b (k + n) << 2 k n: gathering the factors beats all-reducing the wide FC weights."""
    small = replace(BERT, seq_len=8, hidden_size=2048, num_heads=16)
    ins, counts = instructions(small, _cluster(SLOW, out_GBps=0.05), 16)
    plan = hap_plan(ins, counts)
    assert "sfb" in plan.choice[:4]
