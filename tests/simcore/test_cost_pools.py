"""Cost and power sum over device pools (simcore.cost.system_cost), by hand from the YAML prices."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from simcore.cost import ClusterCostSpec, cluster_cost, system_cost
from simcore.specs.system import AcceleratorSpec, DevicePool, SystemSpec, TopologyDimSpec

CONF = Path(__file__).resolve().parents[2] / "conf"


def _acc(name: str) -> AcceleratorSpec:
    return AcceleratorSpec(**yaml.safe_load(
        (CONF / "system" / "accelerator" / f"{name}.yaml").read_text()))


SPEC = ClusterCostSpec(**yaml.safe_load((CONF / "search" / "default.yaml").read_text())["cost"])
A100, H100 = _acc("a100_80g"), _acc("h100_80g")
BASE = SystemSpec(num_gpus=32, gpus_per_node=8, accelerator=A100,
                  scaleout=TopologyDimSpec(bandwidth_GBps=50.0))


def test_two_pools_sum_accelerator_price_and_tdp_by_hand() -> None:
    mixed = SystemSpec(num_gpus=32, gpus_per_node=8, accelerator=A100,
                       scaleout=TopologyDimSpec(bandwidth_GBps=50.0),
                       pools=(DevicePool(count=24), DevicePool(H100, count=8)))
    one = system_cost([BASE], SPEC)
    two = system_cost([mixed], SPEC)
    # conf/system/accelerator: a100_80g $15,000 / 400 W, h100_80g $30,000 / 700 W
    assert two.capex_by_part_usd["accelerators"].tolist() == [24 * 15000.0 + 8 * 30000.0]
    assert two.power_by_part_w["accelerators"].tolist() == [24 * 400.0 + 8 * 700.0]
    for part in ("hosts", "scaleup", "nics", "switches", "transceivers"):  # per GPU slot
        np.testing.assert_array_equal(two.capex_by_part_usd[part], one.capex_by_part_usd[part])
        np.testing.assert_array_equal(two.power_by_part_w[part], one.power_by_part_w[part])
    extra_usd, extra_w = 8 * (30000.0 - 15000.0), 8 * (700.0 - 400.0)
    np.testing.assert_allclose(two.capex_usd, one.capex_usd + extra_usd, rtol=1e-15)
    np.testing.assert_allclose(two.it_power_w, one.it_power_w + extra_w, rtol=1e-15)
    np.testing.assert_allclose(two.facility_power_w, (one.it_power_w + extra_w) * SPEC.pue,
                               rtol=1e-15)


def test_identical_pools_cost_exactly_one_pool() -> None:
    halves = SystemSpec(num_gpus=32, gpus_per_node=8, accelerator=A100,
                        scaleout=TopologyDimSpec(bandwidth_GBps=50.0),
                        pools=(DevicePool(count=16), DevicePool(count=16)))
    one, two = system_cost([BASE], SPEC), system_cost([halves], SPEC)
    for name in ("capex_usd", "it_power_w", "facility_power_w", "usd_per_hour"):
        np.testing.assert_array_equal(getattr(two, name), getattr(one, name))


def test_system_cost_of_one_pool_is_the_old_call() -> None:
    systems = [BASE, SystemSpec(num_gpus=32, gpus_per_node=8, accelerator=H100)]
    new = system_cost(systems, SPEC)
    old = cluster_cost(
        num_gpus=[s.num_gpus for s in systems], gpus_per_node=[s.gpus_per_node for s in systems],
        scaleup_bandwidth_GBps=[s.scaleup.bandwidth_GBps for s in systems],
        scaleout_bandwidth_GBps=[s.scaleout.bandwidth_GBps for s in systems],
        accelerator_price_usd=[s.accelerator.price_usd for s in systems],
        accelerator_tdp_w=[s.accelerator.tdp_w for s in systems], spec=SPEC)
    for name in ("capex_usd", "it_power_w", "facility_power_w", "usd_per_hour"):
        np.testing.assert_array_equal(getattr(new, name), getattr(old, name))


def test_batches_with_different_pool_counts_pad_with_empty_pools() -> None:
    mixed = SystemSpec(num_gpus=32, gpus_per_node=8, accelerator=A100,
                       pools=(DevicePool(count=24), DevicePool(H100, count=8)))
    out = system_cost([BASE, mixed], SPEC)
    assert out.capex_by_part_usd["accelerators"].tolist() == [32 * 15000.0,
                                                              24 * 15000.0 + 8 * 30000.0]


def test_pool_counts_must_sum_to_num_gpus() -> None:
    from simcore.errors import InputError

    with pytest.raises(InputError, match="pool_gpus"):
        cluster_cost(16, 8, 300.0, 25.0, [[1.0], [2.0]], [[1.0], [1.0]], SPEC,
                     pool_gpus=[[8], [4]])
