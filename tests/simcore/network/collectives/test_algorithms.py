"""Explicit collective algorithms (simcore.network.collectives.calibrated_algorithms): closed forms by hand.

System used throughout (numbers chosen so the closed forms are easy to check by hand):
scale-up 100 GB/s x efficiency 0.5 = 50 GB/s, hop 1000 ns + step 1 us = 2 us per step;
scale-out 10 GB/s x 0.5 = 5 GB/s, hop 3000 ns + 1 us = 4 us; base latency 10 us.
Step and byte counts: reference/astra-sim-and-chakra.md §1.4; in-switch all-reduce ~D on the
wire: reference/methods-hap-ace-echo.md §4.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from simcore.hardware.batch import SystemBatch
from simcore.ir.graph import CommType
from simcore.network.collectives.calibrated_algorithms import algorithm_collective_time_s
from simcore.network.collectives.nccl import collective_time_s
from simcore.specs.collective import CollectiveSpec
from simcore.specs.system import CalibrationSpec, SystemSpec, TopologyDimSpec

AR, AG, RS, A2A = (int(CommType.ALL_REDUCE), int(CommType.ALL_GATHER),
                   int(CommType.REDUCE_SCATTER), int(CommType.ALL_TO_ALL))


def _system(num_gpus: int = 8, **coll: object) -> SystemSpec:
    calib = CalibrationSpec(scaleup_efficiency=0.5, scaleout_efficiency=0.5,
                            collective_base_latency_us=10.0, collective_step_latency_us=1.0)
    return SystemSpec(
        num_gpus=num_gpus, gpus_per_node=min(num_gpus, 8), calibration=calib,
        scaleup=TopologyDimSpec(kind="Switch", bandwidth_GBps=100.0, latency_ns=1000.0),
        scaleout=TopologyDimSpec(kind="Switch", bandwidth_GBps=10.0, latency_ns=3000.0),
        collective=CollectiveSpec(**coll))  # type: ignore[arg-type]


def _time_us(system: SystemSpec, ct: int, nbytes: float, n: int, k: int) -> float:
    sb = SystemBatch.from_specs([system])
    return float(algorithm_collective_time_s(sb, ct, nbytes, n, k)[0, 0]) * 1e6


@pytest.mark.parametrize(("alg", "expected_us"), [
    ("ring", 10 + 6 * 2 + 1.5 * 4e6 / 50e9 * 1e6),             # 2(n-1) steps, 2(n-1)/n D
    ("direct", 10 + 2 * 2 + 1.5 * 4e6 / 50e9 * 1e6),           # 2 steps
    ("halvingDoubling", 10 + 4 * 2 + 1.5 * 4e6 / 50e9 * 1e6),  # 2 log2 n steps
    ("doubleBinaryTree", 10 + 4 * 2 + 2 * 4e6 / 50e9 * 1e6),   # 2 log2 n steps, 2 D
])
def test_all_reduce_inside_a_node_closed_forms(alg: str, expected_us: float) -> None:
    got = _time_us(_system(all_reduce=(alg,)), AR, 4e6, 4, 4)
    assert got == pytest.approx(expected_us, rel=1e-12)


def test_reduce_scatter_all_gather_and_all_to_all_closed_forms() -> None:
    assert _time_us(_system(reduce_scatter=("ring",)), RS, 4e6, 4, 4) == pytest.approx(
        10 + 3 * 2 + 0.75 * 4e6 / 50e9 * 1e6)
    assert _time_us(_system(all_gather=("halvingDoubling",)), AG, 4e6, 4, 4) == pytest.approx(
        10 + 2 * 2 + 0.75 * 4e6 / 50e9 * 1e6)
    assert _time_us(_system(all_to_all=("direct",)), A2A, 4e6, 4, 4) == pytest.approx(
        10 + 1 * 2 + 0.75 * 4e6 / 50e9 * 1e6)
    # ring all-to-all: n(n-1)/2 = 6 messages of D/n = 1e6 bytes
    assert _time_us(_system(all_to_all=("ring",)), A2A, 4e6, 4, 4) == pytest.approx(
        10 + 6 * 2 + 6e6 / 50e9 * 1e6)


def test_hierarchical_ring_all_reduce_and_chunk_pipelining() -> None:
    # 16 ranks, 8 per node: RS over 8 (7 steps, 7/8 D), AR over 2 nodes of D/8, AG over 8
    d = 8e6
    rs = 7 * 2 + 7 / 8 * d / 50e9 * 1e6
    ar = 2 * 4 + 2 * (1 / 2) * (d / 8) / 5e9 * 1e6
    got = _time_us(_system(16, all_reduce=("ring",)), AR, d, 16, 8)
    assert got == pytest.approx(10 + rs + ar + rs)
    # 2 chunks of D/2 pipelined through the 3 phases: sum(t(D/2)) + (2-1) max(t(D/2))
    rs2 = 7 * 2 + 7 / 8 * (d / 2) / 50e9 * 1e6
    ar2 = 2 * 4 + (d / 16) / 5e9 * 1e6
    got2 = _time_us(_system(16, all_reduce=("ring",), chunks_per_collective=2), AR, d, 16, 8)
    assert got2 == pytest.approx(10 + rs2 + ar2 + rs2 + max(rs2, ar2))


def test_per_dimension_lists_pick_the_scale_out_algorithm() -> None:
    d = 8e6  # one rank per node: only the scale-out phase, 16 ranks
    ring = _time_us(_system(128, all_reduce=("ring", "ring")), AR, d, 16, 1)
    hd = _time_us(_system(128, all_reduce=("ring", "halvingDoubling")), AR, d, 16, 1)
    bw_us = 2 * 15 / 16 * d / 5e9 * 1e6
    assert ring == pytest.approx(10 + 30 * 4 + bw_us)
    assert hd == pytest.approx(10 + 8 * 4 + bw_us)


def test_tree_beats_ring_for_small_messages_and_loses_for_large() -> None:
    ring, tree = _system(all_reduce=("ring",)), _system(all_reduce=("doubleBinaryTree",))
    assert _time_us(tree, AR, 1e3, 8, 8) < _time_us(ring, AR, 1e3, 8, 8)
    assert _time_us(ring, AR, 1e9, 8, 8) < _time_us(tree, AR, 1e9, 8, 8)


def test_in_network_all_reduce_puts_d_on_the_wire_and_is_faster() -> None:
    got = _time_us(_system(all_reduce=("ring",), in_network=True), AR, 4e6, 4, 4)
    assert got == pytest.approx(10 + 2 * 2 + 4e6 / 50e9 * 1e6)  # 2 steps, D
    # auto + in_network: calibrated bus bandwidth carries D, 2 steps per spanned dimension
    assert _time_us(_system(in_network=True), AR, 4e6, 8, 8) == pytest.approx(
        10 + 2 * 2 + 4e6 / 50e9 * 1e6)
    assert _time_us(_system(16, in_network=True), AR, 8e6, 16, 8) == pytest.approx(
        10 + 2 * 2 + 2 * 4 + 8e6 / min(50e9, 8 * 5e9) * 1e6)
    for nbytes in (1e4, 1e6, 1e9):
        default = _time_us(_system(), AR, nbytes, 8, 8)
        ring = _time_us(_system(all_reduce=("ring",)), AR, nbytes, 8, 8)
        net = _time_us(_system(in_network=True), AR, nbytes, 8, 8)  # auto + in_network
        assert net < ring and net < default
    # a Ring dimension has no switch: in_network changes nothing there
    ring_dim = SystemSpec(scaleup=TopologyDimSpec(kind="Ring"),
                          collective=CollectiveSpec(all_reduce=("ring",), in_network=True))
    plain = SystemSpec(scaleup=TopologyDimSpec(kind="Ring"),
                       collective=CollectiveSpec(all_reduce=("ring",)))
    assert _time_us(ring_dim, AR, 1e8, 8, 8) == _time_us(plain, AR, 1e8, 8, 8)


def test_auto_is_the_calibrated_model_exactly_even_in_a_mixed_batch() -> None:
    systems = [SystemSpec(num_gpus=64), SystemSpec(num_gpus=64, collective=CollectiveSpec(
        all_reduce=("ring",), all_gather=("direct",), chunks_per_collective=4))]
    sb = SystemBatch.from_specs(systems)
    args = (np.array([AR, AG, RS, A2A, int(CommType.BROADCAST)]),
            np.array([1e6, 1e7, 1e8, 1e5, 1e6]), np.array([8, 16, 64, 8, 8]),
            np.array([8, 8, 8, 1, 8]))
    calibrated = collective_time_s(SystemBatch.from_specs(systems[:1]), *args)[:, 0]
    got = algorithm_collective_time_s(sb, *args)
    np.testing.assert_array_equal(got[:, 0], calibrated)
    np.testing.assert_array_equal(got[2:, 1], calibrated[2:])  # RS, A2A, broadcast stay auto
    assert not np.allclose(got[:2, 1], calibrated[:2])


def test_simulate_batch_in_network_lowers_dp_time_and_default_is_unchanged() -> None:
    from simcore.api import simulate_batch
    from simcore.specs.parallel import ParallelSpec
    from simcore.workloads.transformer.spec import ModelSpec

    model = ModelSpec(name="m", num_layers=4, hidden_size=1024, num_heads=8, seq_len=512,
                      vocab_size=1024)
    par = ParallelSpec(global_batch=64, dp_overlap=False)  # DP all-reduce fully exposed
    base = SystemSpec(num_gpus=64)
    systems = [base, dataclasses.replace(base, collective=CollectiveSpec(in_network=True)),
               dataclasses.replace(base, collective=CollectiveSpec(all_reduce=("ring",)))]
    res = simulate_batch(model, par, systems)
    dp = res.exposed_comm_by_kind["dp"]
    assert dp[1] < dp[0] and dp[1] < dp[2]
    assert res.iteration_time_s[1] < res.iteration_time_s[0]
    alone = simulate_batch(model, par, [base])
    assert alone.iteration_time_s[0] == pytest.approx(res.iteration_time_s[0], rel=1e-12)
