"""The workload/system-layer rules of reference §1.1-§1.2, §2.3, each against a hand calculation.

Networks and systems from tests/data/astra: 50 "GB/s" (GiB/s) links, 500 ns latency, endpoint
delay 10, preferred-dataset-splits 4, local-mem-bw 1600 (decimal GB/s), roofline off (replay).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from simcore.emulator.inputs import read_network, read_system
from simcore.emulator.program import NodeType, RankProgram
from simcore.emulator.run import simulate_astra
from simcore.emulator.specs import CommGroupsSpec, RemoteMemorySpec
from simcore.errors import InputError

DATA = Path(__file__).parents[2] / "data" / "astra"
MIB = 1 << 20
BPNS = 50 * 2**30 / 1e9
SYSTEM = read_system(DATA / "Ring_4chunks.json")


def _programs(per_rank: list[list[dict]]) -> list[RankProgram]:
    return [RankProgram.from_records(nodes, f"r{r}.et") for r, nodes in enumerate(per_rank)]


def _comp(node_id: int, us: int, deps: tuple[int, ...] = ()) -> dict:
    return {"id": node_id, "type": NodeType.COMP, "duration_micros": us, "data_deps": list(deps)}


def test_one_gpu_compute_at_a_time_and_zero_duration_is_one_ns() -> None:
    programs = _programs([[_comp(1, 5), _comp(2, 7), _comp(3, 0)]] * 2)
    results = simulate_astra(programs, SYSTEM, read_network(DATA / "FullyConnected_2.yml"))
    assert [(r.finish_ns, r.exposed_comm_ns) for r in results] == [(12_001, 0)] * 2


@pytest.mark.parametrize("backend", ["unaware", "aware"])
def test_send_completes_on_arrival_one_comm_op_at_a_time_recv_takes_no_slot(backend: str) -> None:
    hop = int(500 + MIB / BPNS)  # one FullyConnected hop
    sender = [
        {"id": 1, "type": NodeType.SEND, "attrs": {"comm_dst": 1, "comm_size": MIB, "comm_tag": 1}},
        {"id": 2, "type": NodeType.SEND, "attrs": {"comm_dst": 1, "comm_size": MIB, "comm_tag": 2}},
        _comp(3, 1, (1,)),
    ]
    receiver = [
        {"id": 1, "type": NodeType.RECV, "attrs": {"comm_src": 0, "comm_size": MIB, "comm_tag": 1}},
        {"id": 2, "type": NodeType.RECV, "attrs": {"comm_src": 0, "comm_size": MIB, "comm_tag": 2}},
        _comp(3, 3),  # runs while both receives are posted
    ]
    results = simulate_astra(_programs([sender, receiver]), SYSTEM, read_network(DATA / "FullyConnected_2.yml"),
                             backend)
    # send 1 arrives at hop (then the comm slot is free for send 2, and the 1 us compute runs)
    assert results[0].finish_ns == 2 * hop
    assert results[1].finish_ns == 2 * hop
    assert results[1].exposed_comm_ns == 2 * hop - 3000


def _allreduce(npus: int) -> list[RankProgram]:
    return _programs([[{"id": 0, "type": NodeType.COLL, "attrs": {"comm_type": 0, "comm_size": MIB}}]] * npus)


@pytest.mark.parametrize(("active", "expected"), [(1, 64_440), (2, 32_220), (4, 16_110), (8, 16_110)])
def test_active_chunks_run_in_waves(active: int, expected: int) -> None:
    system = dataclasses.replace(SYSTEM, active_chunks_per_dimension=active)
    results = simulate_astra(_allreduce(8), system, read_network(DATA / "Ring_8.yml"), "unaware")
    assert {r.finish_ns for r in results} == {expected}  # 64,440 / 4 chunks = 16,110 per chunk


def test_concurrent_chunks_contend_on_aware_links() -> None:
    system = dataclasses.replace(SYSTEM, active_chunks_per_dimension=4)
    aware = simulate_astra(_allreduce(8), system, read_network(DATA / "Ring_8.yml"), "aware")
    assert aware[0].finish_ns > 16_110


def _priority_workload(policy: str, big_priority: int = 0, small_priority: int = 0) -> int:
    big = {"id": 1, "type": NodeType.COLL, "attrs": {"comm_type": 0, "comm_size": MIB, "is_cpu_op": True,
                                                      "comm_priority": big_priority}}
    small = {"id": 3, "type": NodeType.COLL, "data_deps": [2],
             "attrs": {"comm_type": 0, "comm_size": 64 << 10, "comm_priority": small_priority}}
    nodes = [big, _comp(2, 20), small, _comp(4, 100, (3,))]
    system = dataclasses.replace(SYSTEM, scheduling_policy=policy)
    return simulate_astra(_programs([nodes] * 8), system, read_network(DATA / "Ring_8.yml"))[0].finish_ns


def test_priority_lifo_fifo_explicit() -> None:
    # big AR (CPU slot) from t=0: 4 chunks of 16,110; small AR issued at 20,000 in the same queue;
    # small AR chunk: 14 * int(500 + 2048 / B) + 15 * 10 + 7 * 3 * int(2048 / 1600) = 7,703
    small = 4 * 7_703
    jump_ahead = 2 * 16_110 + small + 100_000  # after the running chunk, before the waiting ones
    wait = 4 * 16_110 + small + 100_000
    assert _priority_workload("LIFO") == jump_ahead
    assert _priority_workload("FIFO") == wait
    assert _priority_workload("EXPLICIT", big_priority=1, small_priority=5) == jump_ahead
    assert _priority_workload("EXPLICIT", big_priority=5, small_priority=1) == wait


@pytest.mark.parametrize(
    ("memory", "expected"),
    [
        (RemoteMemorySpec("PER_NPU_MEMORY_EXPANSION", 50, 100), [10_050] * 4),
        (RemoteMemorySpec("MEMORY_POOL", 50, 100), [10_050, 20_100, 30_150, 40_200]),
        (RemoteMemorySpec("PER_NODE_MEMORY_EXPANSION", 50, 100, 2, 2), [10_050, 20_100, 10_050, 20_100]),
    ],
)
def test_remote_memory_contention(memory: RemoteMemorySpec, expected: list[int]) -> None:
    load = [{"id": 1, "type": NodeType.MEM_LOAD, "attrs": {"tensor_size": 1_000_000}}]
    results = simulate_astra(_programs([load] * 4), SYSTEM, read_network(DATA / "Ring_4.yml"),
                             remote_memory=memory)
    assert [r.finish_ns for r in results] == expected  # latency + size // bw, FIFO where shared


def test_no_memory_expansion_rejects_memory_nodes() -> None:
    load = [{"id": 1, "type": NodeType.MEM_STORE, "attrs": {"tensor_size": 64}}]
    with pytest.raises(InputError, match="NO_MEMORY_EXPANSION"):
        simulate_astra(_programs([load] * 4), SYSTEM, read_network(DATA / "Ring_4.yml"),
                       remote_memory=RemoteMemorySpec())


def test_roofline_compute() -> None:
    system = dataclasses.replace(SYSTEM, roofline_enabled=True, local_mem_bw_GBps=1600.0, peak_perf_TFLOPS=900.0)
    memory_bound = {"id": 1, "type": NodeType.COMP, "attrs": {"num_ops": 16_000_000, "tensor_size": 8_000_000}}
    compute_bound = {"id": 2, "type": NodeType.COMP, "attrs": {"num_ops": 9 * 10**12, "tensor_size": 10**6}}
    results = simulate_astra(_programs([[memory_bound, compute_bound]] * 2), system,
                             read_network(DATA / "FullyConnected_2.yml"))
    # memory bound: OI = 2 -> 3.2e12 op/s -> 5,000 ns; compute bound: 9e12 / 900e12 s = 10,000,000 ns
    assert results[0].finish_ns == 5_000 + 10_000_000
    assert results[0].exposed_comm_ns == 0


def test_comm_group_is_a_local_ring_with_a_fixed_10_cycle_delay() -> None:
    system = dataclasses.replace(SYSTEM, endpoint_delay_ns=100)
    groups = CommGroupsSpec(((1, (1, 3, 5, 7)), (2, (0, 2, 4, 6))))
    programs = _programs([[{"id": 0, "type": NodeType.COLL,
                            "attrs": {"comm_type": 0, "comm_size": MIB, "pg_name": "1" if r % 2 else "2"}}]
                          for r in range(8)])
    results = simulate_astra(programs, system, read_network(DATA / "Switch_8.yml"), "unaware", groups)
    m = MIB // 4 // 4  # 4 chunks, ring of 4
    chunk = 6 * int(2 * 500 + m / BPNS) + 7 * 10 + 3 * 3 * int(m / 1600)  # Switch: 2 hops; 10, not 100
    assert {r.finish_ns for r in results} == {4 * chunk}
    world = simulate_astra(_programs([[{"id": 0, "type": NodeType.COLL, "attrs": {"comm_type": 0, "comm_size": MIB}}]]
                                     * 8), system, read_network(DATA / "Switch_8.yml"), "unaware")
    m8 = MIB // 4 // 8
    assert world[0].finish_ns == 4 * (14 * int(1000 + m8 / BPNS) + 15 * 100 + 7 * 3 * int(m8 / 1600))
