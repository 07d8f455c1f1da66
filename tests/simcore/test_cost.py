"""Cost and power model: fat-tree sizing from Al-Fares et al. (SIGCOMM'08) and hand-computed sums."""

from __future__ import annotations

import numpy as np
import pytest

from simcore.cost import ClusterCostSpec, cluster_cost, fat_tree_tiers
from simcore.errors import InputError


def _spec(**over: float) -> ClusterCostSpec:
    base = dict(
        host_usd_per_gpu=250.0, host_w_per_gpu=25.0,
        scaleup_usd_per_GBps=2.0, scaleup_w_per_GBps=0.5, scaleup_radix_gpus=8,
        nic_usd_per_GBps=3.0, nic_w_per_GBps=1.0,
        switch_port_usd_per_GBps=5.0, switch_port_w_per_GBps=2.0,
        transceiver_usd_per_GBps=7.0, transceiver_w_per_GBps=0.25,
        switch_radix=4, electricity_usd_per_kwh=0.1, pue=1.5, amortization_years=1.0,
    )
    base.update(over)
    return ClusterCostSpec(**base)  # type: ignore[arg-type]


def test_fat_tree_tiers_match_al_fares_capacity() -> None:
    # a k-ary 3-tier fat tree serves k**3/4 hosts: k=4 -> 16, k=48 -> 27,648 (Al-Fares §3)
    assert fat_tree_tiers([16, 17], 4).tolist() == [3, 4]
    assert fat_tree_tiers([27648, 27649], 48).tolist() == [3, 4]
    # one switch serves k hosts, two tiers k**2/2
    assert fat_tree_tiers([1, 2, 48, 49, 1152, 1153], 48).tolist() == [0, 1, 1, 2, 2, 3]


def test_cluster_cost_sums_parts_by_hand() -> None:
    # 16 GPUs, 4 per node (4 nodes), up 10 GB/s, out 2 GB/s; k=4: 16 hosts -> 3 tiers
    spec = _spec()
    cost = cluster_cost(16, 4, 10.0, 2.0, 100.0, 50.0, spec)
    up_hops = 1  # 4 GPUs <= scale-up radix 8: one tier, 2*1-1 hops
    ports, transceivers = 2 * 3 - 1, 2 * 3
    capex = (16 * 100 + 16 * 250 + 16 * 10 * up_hops * 2 + 16 * 2 * 3
             + 16 * 2 * ports * 5 + 16 * 2 * transceivers * 7)
    power = (16 * 50 + 16 * 25 + 16 * 10 * up_hops * 0.5 + 16 * 2 * 1
             + 16 * 2 * ports * 2 + 16 * 2 * transceivers * 0.25)
    assert cost.capex_usd[0] == pytest.approx(capex)
    assert cost.it_power_w[0] == pytest.approx(power)
    assert cost.facility_power_w[0] == pytest.approx(1.5 * power)
    hourly = capex / 8760.0 + 1.5 * power / 1000.0 * 0.1
    assert cost.usd_per_hour[0] == pytest.approx(hourly)
    assert cost.cost_usd_per_iter([36.0])[0] == pytest.approx(hourly / 100.0)


def test_single_node_has_no_scaleout_network() -> None:
    cost = cluster_cost(8, 8, 10.0, 50.0, 100.0, 50.0, _spec(scaleup_radix_gpus=8))
    for part in ("nics", "switches", "transceivers"):
        assert cost.capex_by_part_usd[part][0] == 0.0
        assert cost.power_by_part_w[part][0] == 0.0


def test_cost_grows_with_bandwidth_and_batches() -> None:
    bw = np.array([25.0, 50.0, 100.0, 400.0])
    cost = cluster_cost(1024, 8, 450.0, bw, 30000.0, 700.0, _spec(switch_radix=64))
    assert cost.capex_usd.shape == (4,)
    assert np.all(np.diff(cost.capex_usd) > 0)
    assert np.all(np.diff(cost.facility_power_w) > 0)


def test_rental_price_overrides_ownership() -> None:
    cost = cluster_cost(64, 8, 450.0, 50.0, 30000.0, 700.0, _spec(gpu_hour_usd=2.5))
    assert cost.usd_per_hour[0] == pytest.approx(64 * 2.5)


@pytest.mark.parametrize(("key", "value"), [("pue", 0.9), ("switch_radix", 5), ("nic_usd_per_GBps", -1.0)])
def test_bad_cost_spec_names_key(key: str, value: float) -> None:
    with pytest.raises(InputError, match=key):
        _spec(**{key: value})
