"""Custom collectives end to end: ET graphs written here, run by the ASTRA-sim system layer.

Workload: one all-reduce COMM_COLL node per rank (written with the ET builder). The collective
runs either natively or as a custom algorithm (``all-reduce-implementation-custom``: per-rank
``<prefix>.<pos>.et``). Expected times are hand calculations from reference §1.3-§1.4 and
§3 (unaware delay = int(hops x latency + bytes / (GBps x 2^30 / 1e9))).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from chakra_testdata import DATA

from simcore.network.collectives.et_graphs import build_collective, write_collective
from simcore.traces.chakra.build import EtTraceBuilder
from simcore.traces.chakra.et import NodeType, write_trace
from simcore.traces.msccl import msccl_to_traces

astra_run = pytest.importorskip("simcore.emulator.run")
astra_load = pytest.importorskip("simcore.emulator.load")
inputs = pytest.importorskip("simcore.emulator.inputs")

CFG = DATA / "astra"
BPNS = 50 * 2**30 / 1e9  # 50 "GB/s" network links in bytes/ns (reference §3)


def _workload(tmp_path: Path, n: int, size: int) -> str:
    prefix = tmp_path / "workload"
    for r in range(n):
        b = EtTraceBuilder()
        b.add_node(1, "allreduce", NodeType.COMM_COLL_NODE,
                   attrs={"is_cpu_op": False, "comm_type": 0, "comm_size": size})
        write_trace(f"{prefix}.{r}.et", b.build())
    return str(prefix)


def _run(tmp_path: Path, n: int, size: int, network: str, custom: str | None) -> list[int]:
    system = inputs.read_system(CFG / "ring_native.json")
    if custom is not None:
        system = dataclasses.replace(system, all_reduce_implementation_custom=custom)
    programs = astra_load.read_programs(_workload(tmp_path, n, size))
    results = astra_run.simulate_astra(programs, system, inputs.read_network(CFG / network), "unaware")
    return [r.finish_ns for r in results]


def test_custom_ring_all_reduce_equals_the_native_ring(tmp_path: Path) -> None:
    n, size = 8, 8_000_000
    native = _run(tmp_path, n, size, "Ring_8.yml", None)
    # the native ring's system-layer costs as graph nodes: endpoint-delay 1000 ns before the
    # first step and after each step, reduction 3 x floor(1e6 B / 1000 GB/s) = 3000 ns
    graphs = build_collective("ring", "all_reduce", n, size, reduce_micros=3, step_micros=1)
    write_collective(tmp_path / "ring_custom", graphs)
    custom = _run(tmp_path, n, size, "Ring_8.yml", str(tmp_path / "ring_custom"))
    assert custom == native
    hop = int(500 + 1_000_000 / BPNS)
    assert native == [1000 + 14 * (hop + 1000) + 7 * 3000] * n  # hand calculation


def test_hand_written_msccl_ring_matches_hand_calculation(tmp_path: Path) -> None:
    traces = msccl_to_traces(DATA / "ring_allreduce_4gpu.xml", 1 << 20)
    write_collective(tmp_path / "msccl_ring", traces)
    finish = _run(tmp_path, 4, 1 << 20, "Ring_4.yml", str(tmp_path / "msccl_ring"))
    # one chain per GPU: s, rrc, s, rrc, s, rrc, s, r, s, r, s, r; a send ends when its
    # message arrives, the neighbour's message has arrived by then; 262144 B per message,
    # rrc's reduction floor(3 x 262144 / 50e9 s) = 15 us
    hop = int(500 + 262_144 / BPNS)
    assert hop == 5382
    assert finish == [6 * hop + 3 * 15_000] * 4 == [77_292] * 4


def test_one_algorithm_on_two_topologies_orders_by_hop_count(tmp_path: Path) -> None:
    n, size = 8, 1 << 20
    graphs = build_collective("halvingDoubling", "all_reduce", n, size, reduce_micros=1)
    write_collective(tmp_path / "hd", graphs)
    times = {net: _run(tmp_path, n, size, f"{net}_8.yml", str(tmp_path / "hd"))[0]
             for net in ("FullyConnected", "Switch", "Ring")}
    msgs = [size >> 1, size >> 2, size >> 3]
    hops = {"FullyConnected": [1, 1, 1], "Switch": [2, 2, 2], "Ring": [1, 2, 4]}  # distance 1, 2, 4
    for net, h in hops.items():
        rs = sum(int(hk * 500 + m / BPNS) + 1000 for hk, m in zip(h, msgs, strict=True))
        ag = sum(int(hk * 500 + m / BPNS) for hk, m in zip(h[::-1], msgs[::-1], strict=True))
        assert times[net] == rs + ag
    assert times["FullyConnected"] < times["Switch"] < times["Ring"]
