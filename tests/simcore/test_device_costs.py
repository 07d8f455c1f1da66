"""Per-device costs on mixed device pools (simcore.engine.devices): physics checks by hand."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from simcore.api import simulate_batch
from simcore.engine.result import METRICS
from simcore.errors import InputError
from simcore.specs.parallel import ParallelSpec
from simcore.specs.system import AcceleratorSpec, DevicePool, SystemSpec, TopologyDimSpec
from simcore.workloads.layout import RankLayout
from simcore.workloads.transformer.spec import ModelSpec

MODEL = ModelSpec(name="t", num_layers=8, hidden_size=1024, num_heads=8, seq_len=1024,
                  vocab_size=4096)
DP = ParallelSpec(tp=2, global_batch=64)  # dp=8 over both pools: one stage on both
BASE = SystemSpec(num_gpus=16, gpus_per_node=8,
                  scaleout=TopologyDimSpec(bandwidth_GBps=25.0, latency_ns=5000.0))
# a second device with every number of the first but a different name: takes the mixed path
TWIN = replace(BASE.accelerator, name="twin")
HALF = replace(BASE.accelerator, name="half", peak_tflops_bf16=156.0, peak_tflops_fp16=156.0,
               hbm_bandwidth_GBps=1019.5)


def _pools(acc: AcceleratorSpec, **kw: object) -> SystemSpec:
    return replace(BASE, pools=(DevicePool(count=8), DevicePool(acc, count=8, **kw)))  # type: ignore[arg-type]


@pytest.mark.parametrize("plan", [DP, ParallelSpec(tp=2, pp=2, global_batch=32,
                                                   sequence_parallel=True, zero_stage=1)])
def test_a_twin_device_on_the_per_device_path_gives_the_one_pool_result(plan: ParallelSpec) -> None:
    r1 = simulate_batch(MODEL, plan, [BASE])
    r2 = simulate_batch(MODEL, plan, [_pools(TWIN)])
    assert not _pools(TWIN).uniform_devices
    for name in METRICS:
        np.testing.assert_allclose(getattr(r2, name), getattr(r1, name), rtol=1e-12)


def test_even_split_waits_for_the_slow_device_and_all_slow_equals_it() -> None:
    """DP over a full-speed and a half-speed pool, even split: every compute kernel takes the
    half-speed device's time, so the iteration is the all-half-speed cluster's."""
    slow_all = replace(BASE, accelerator=HALF)
    mixed = simulate_batch(MODEL, DP, [_pools(HALF)]).iteration_time_s[0]
    slow = simulate_batch(MODEL, DP, [slow_all]).iteration_time_s[0]
    fast = simulate_batch(MODEL, DP, [BASE]).iteration_time_s[0]
    assert mixed == pytest.approx(slow, rel=1e-9) and fast < slow


def test_balanced_split_lands_between_fast_and_slow_and_beats_even() -> None:
    """Every kernel of HALF takes exactly twice BASE's (kernel overhead aside), so the balanced
    shares are ~4/3 and 2/3 and the compute time ~ 3/4 of the slow cluster's."""
    t = {w: simulate_batch(MODEL, replace(DP, work_split=w), [_pools(HALF)])
         for w in ("even", "proportional", "balanced")}
    even, bal = t["even"].compute_s[0], t["balanced"].compute_s[0]
    fast = simulate_batch(MODEL, DP, [BASE]).compute_s[0]
    assert bal < even and fast < bal
    assert bal / even == pytest.approx(0.75, rel=0.02)
    # the peak FLOP/s ratio is 2 too, but the fixed kernel overhead does not halve: the
    # proportional split overloads the fast device slightly, balanced is the optimum
    prop = t["proportional"].compute_s[0]
    assert bal <= prop < even and prop == pytest.approx(bal, rel=0.1)


def test_explicit_shares_and_their_errors() -> None:
    even = simulate_batch(MODEL, DP, [_pools(HALF)]).compute_s[0]
    same = simulate_batch(MODEL, replace(DP, work_split="explicit", work_shares=(1.0, 1.0)),
                          [_pools(HALF)]).compute_s[0]
    assert same == pytest.approx(even, rel=1e-12)
    with pytest.raises(InputError, match="work_shares"):
        simulate_batch(MODEL, replace(DP, work_split="explicit", work_shares=(1.0,)),
                       [_pools(HALF)])
    with pytest.raises(InputError, match="work_split"):
        ParallelSpec(work_shares=(1.0, 2.0))


def test_a_slower_scaleup_fabric_on_one_pool_slows_its_collectives() -> None:
    """Asymmetric scale-up: the TP all-reduces inside pool 1's nodes run on its 50 GB/s fabric
    (slowest member) instead of 300 GB/s."""
    slow_up = TopologyDimSpec(kind="Switch", bandwidth_GBps=50.0, latency_ns=700.0)
    r_same = simulate_batch(MODEL, DP, [_pools(TWIN)])
    r_asym = simulate_batch(MODEL, DP, [_pools(TWIN, scaleup=slow_up)])
    assert r_asym.iteration_time_s[0] > r_same.iteration_time_s[0]
    assert r_asym.exposed_comm_s[0] > r_same.exposed_comm_s[0]


def test_layout_places_ranks_on_pools_in_order() -> None:
    lay = RankLayout.of(ParallelSpec(tp=2, pp=2, dp=4), 8, (8, 8))
    assert [lay.device_of(r) for r in (0, 7, 8, 15)] == [0, 0, 1, 1]
    np.testing.assert_array_equal(lay.stage_pools, [[8, 0], [0, 8]])
    lay = RankLayout.of(ParallelSpec(tp=2, pp=2, dp=4, rank_order="tp-pp-dp-cp"), 8, (8, 8))
    np.testing.assert_array_equal(lay.stage_pools, [[4, 4], [4, 4]])


def test_a_stage_that_does_not_fit_its_device_names_device_and_stage() -> None:
    tiny = replace(HALF, name="tiny16", hbm_capacity_gib=0.05)
    pp = ParallelSpec(tp=2, pp=2, global_batch=32)
    r = simulate_batch(MODEL, pp, [_pools(tiny)])
    assert not r.feasible[0]
    assert "stage 1 on pool 1 (tiny16)" in r.reason[0]
