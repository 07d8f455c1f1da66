"""simulate_batch on clusters of device pools: identical pools = one pool, exactly."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import yaml

from simcore.api import simulate_batch
from simcore.cost import ClusterCostSpec, system_cost
from simcore.engine.result import METRICS
from simcore.errors import InputError
from simcore.specs.parallel import ParallelSpec
from simcore.specs.system import AcceleratorSpec, DevicePool, SystemSpec, TopologyDimSpec
from simcore.workloads.transformer.spec import ModelSpec

CONF = Path(__file__).resolve().parents[2] / "conf"
MODEL = ModelSpec(name="t", num_layers=8, hidden_size=512, num_heads=8, seq_len=1024,
                  vocab_size=4096)
PLAN = ParallelSpec(tp=2, pp=2, global_batch=32, sequence_parallel=True, zero_stage=1)
SPEC = ClusterCostSpec(**yaml.safe_load((CONF / "search" / "default.yaml").read_text())["cost"])


def _system(out_GBps: float, hbm_gib: float = 80.0) -> SystemSpec:
    return SystemSpec(num_gpus=16, gpus_per_node=8,
                      accelerator=AcceleratorSpec(hbm_capacity_gib=hbm_gib),
                      scaleout=TopologyDimSpec(bandwidth_GBps=out_GBps, latency_ns=5000.0))


def _halves(s: SystemSpec) -> SystemSpec:
    return replace(s, pools=(DevicePool(count=8), DevicePool(s.accelerator, count=8)))


@pytest.mark.parametrize("fidelity", ["calibrated", "astra"])
def test_two_identical_pools_give_exactly_the_one_pool_result(fidelity: str) -> None:
    one = [_system(12.5), _system(100.0), _system(25.0, hbm_gib=0.01)]
    two = [_halves(s) for s in one]
    assert all(s.num_pools == 2 for s in two)
    r1 = simulate_batch(MODEL, PLAN, one, fidelity)
    r2 = simulate_batch(MODEL, PLAN, two, fidelity)
    for name in METRICS:
        np.testing.assert_array_equal(getattr(r2, name), getattr(r1, name))
    assert r2.reason == r1.reason and r1.feasible.tolist() == [True, True, False]
    for kind, v in r1.exposed_comm_by_kind.items():
        np.testing.assert_array_equal(r2.exposed_comm_by_kind[kind], v)
    c1, c2 = system_cost(one, SPEC), system_cost(two, SPEC)
    np.testing.assert_array_equal(c2.capex_usd, c1.capex_usd)
    np.testing.assert_array_equal(c2.facility_power_w, c1.facility_power_w)
    np.testing.assert_array_equal(c2.cost_usd_per_iter(r2.iteration_time_s),
                                  c1.cost_usd_per_iter(r1.iteration_time_s))


def test_pool_structure_splits_batches() -> None:
    with pytest.raises(InputError, match="pools"):
        simulate_batch(MODEL, PLAN, [_system(25.0), _halves(_system(25.0))])


def test_mixed_pools_run_per_device_and_astra_names_what_it_lacks() -> None:
    fast = AcceleratorSpec(name="fast", peak_tflops_bf16=989.0, peak_tflops_fp16=989.0)
    mixed = replace(_system(25.0), pools=(DevicePool(count=8), DevicePool(fast, count=8)))
    r = simulate_batch(MODEL, PLAN, [_halves(_system(25.0)), mixed])
    assert r.feasible.tolist() == [True, True]
    # stage 1 runs on the faster pool: the iteration can only get shorter
    assert r.iteration_time_s[1] < r.iteration_time_s[0]
    a = simulate_batch(MODEL, PLAN, [mixed], "astra")
    assert not a.feasible[0] and a.reason[0].startswith("system.pools:")
