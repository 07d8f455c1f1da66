"""Chunking and phase decomposition of ``Sys::generate_collective`` (reference §1.2)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from simcore.emulator.inputs import read_network, read_system
from simcore.emulator.network.topology import Topology
from simcore.emulator.plan import chunk_sizes, phases_for

DATA = Path(__file__).parents[2] / "data" / "astra"


def test_chunks_split_evenly_with_a_tail() -> None:
    assert chunk_sizes("all_reduce", 1 << 20, 4, 8) == [1 << 18] * 4
    assert chunk_sizes("all_reduce", 1001, 4, 8) == [250, 250, 250, 250, 1]  # ceil(size / chunk) streams


def test_min_chunk_is_one_byte_per_npu_except_all_gather() -> None:
    # 100 B / 4 = 25 B < 64 NPUs: chunk = 64, size = 4 * 64
    assert chunk_sizes("all_reduce", 100, 4, 64) == [64] * 4
    assert chunk_sizes("reduce_scatter", 100, 4, 64) == [64] * 4
    assert chunk_sizes("all_gather", 100, 4, 64) == [25] * 4


def test_local_bw_aware_all_reduce_on_three_dims() -> None:
    topo = Topology(read_network(DATA / "Ring_FullyConnected_Switch.yml"))  # 2 x 8 x 4
    system = dataclasses.replace(read_system(DATA / "Ring_4chunks.json"),
                                 all_reduce_implementation=("ring", "direct", "halvingDoubling"))
    phases = phases_for(system, topo, 37, "all_reduce", 6400, None, None)
    assert [(p.comm, p.algorithm, len(p.members)) for p in phases] == [
        ("reduce_scatter", "ring", 2), ("reduce_scatter", "direct", 8), ("all_reduce", "halvingDoubling", 4),
        ("all_gather", "direct", 8), ("all_gather", "ring", 2)]
    assert [p.size for p in phases] == [6400, 3200, 400, 400, 3200]  # each phase's input
    assert phases[0].members == (36, 37)  # NPU 37's dim-0 ring: same dims 1, 2
    assert phases[2].members == (5, 21, 37, 53)  # dim 2 (stride 16)


def test_baseline_all_gather_runs_dims_in_reverse_and_skips_uninvolved() -> None:
    topo = Topology(read_network(DATA / "Ring_FullyConnected_Switch.yml"))
    system = dataclasses.replace(read_system(DATA / "Ring_4chunks.json"), collective_optimization="baseline",
                                 all_gather_implementation=("ring", "ring", "ring"))
    phases = phases_for(system, topo, 0, "all_gather", 10, None, (True, False, True))
    assert [(len(p.members), p.size) for p in phases] == [(4, 10), (2, 40)]


def test_comm_group_is_one_local_ring() -> None:
    topo = Topology(read_network(DATA / "Ring_FullyConnected_Switch.yml"))
    system = read_system(DATA / "Ring_4chunks.json")
    (phase,) = phases_for(system, topo, 9, "all_reduce", 1000, (1, 9, 17), None)
    assert (phase.members, phase.algorithm, phase.transfer_delay_ns) == ((1, 9, 17), "ring", 10)
    assert phases_for(system, topo, 9, "all_reduce", 1000, (9,), None) == []  # a 1-NPU group: no phase


def test_one_star_algorithms_use_one_dimension_over_all_npus() -> None:
    topo = Topology(read_network(DATA / "Ring_FullyConnected_Switch.yml"))
    system = dataclasses.replace(read_system(DATA / "Ring_4chunks.json"), all_reduce_implementation=("oneDirect4",))
    (phase,) = phases_for(system, topo, 5, "all_reduce", 6400, None, None)
    assert (phase.members, phase.algorithm, phase.window) == (tuple(range(64)), "oneDirect", 4)
