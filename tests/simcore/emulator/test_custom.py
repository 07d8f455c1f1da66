"""Execution of a custom collective given as per-rank graphs (reference §1.4, CustomAlgorithm.cc)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from simcore.emulator.inputs import read_network, read_system
from simcore.emulator.program import NodeType, RankProgram
from simcore.emulator.run import simulate_astra

DATA = Path(__file__).parents[2] / "data" / "astra"
BW = 50 * (1 << 30) / 1e9  # bytes per ns of a 50 "GB/s" (GiB/s) link


def _ring_allreduce_graph(n: int, pos: int, msg: int) -> RankProgram:
    """An MSCCL-style ring: (n-1) rounds of send-to-next / recv-from-prev, a 2 us reduce after each recv."""
    records: list[dict] = []
    prev = None
    for k in range(n - 1):
        base = 3 * k
        deps = [prev] if prev is not None else []
        records.append({"id": base, "type": NodeType.SEND, "data_deps": deps,
                        "attrs": {"comm_dst": (pos + 1) % n, "comm_size": msg, "comm_tag": 0}})
        records.append({"id": base + 1, "type": NodeType.RECV, "data_deps": deps,
                        "attrs": {"comm_src": (pos - 1) % n, "comm_size": msg, "comm_tag": 0}})
        records.append({"id": base + 2, "type": NodeType.COMP, "duration_micros": 2, "data_deps": [base, base + 1]})
        prev = base + 2
    return RankProgram.from_records(records, f"custom.{pos}.et")


def test_custom_collective_walks_each_rank_graph(tmp_path: Path) -> None:
    n, msg = 8, 131_072
    graphs = {pos: _ring_allreduce_graph(n, pos, msg) for pos in range(n)}
    system = dataclasses.replace(read_system(DATA / "Ring_4chunks.json"),
                                 all_reduce_implementation_custom=str(tmp_path / "custom"))
    workload = [RankProgram.from_records(
        [{"id": 7, "type": NodeType.COLL, "attrs": {"comm_type": 0, "comm_size": 1 << 20}}], f"w.{r}.et")
        for r in range(n)]
    results = simulate_astra(workload, system, read_network(DATA / "Ring_8.yml"), "unaware",
                             custom_loader=lambda prefix, pos: graphs[pos])
    hop = int(500 + msg / BW)  # one ring hop, the algorithm's comm_size (not the node's 1 MiB), no chunking
    expected = (n - 1) * (hop + 2000)
    assert [r.finish_ns for r in results] == [expected] * n
    assert results[0].exposed_comm_ns == expected
