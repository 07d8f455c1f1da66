"""Symmetry folding must not change any number: folded runs against full runs of every NPU."""

from __future__ import annotations

from pathlib import Path

import pytest

from simcore.emulator.inputs import read_network, read_system
from simcore.emulator.network.topology import Topology
from simcore.emulator.program import NodeType, RankProgram
from simcore.emulator.run import simulate_astra
from simcore.emulator.specs import CommGroupsSpec
from simcore.emulator.symmetry import representatives
from tests.shared_paths import SHARED, needs_shared

DATA = Path(__file__).parents[2] / "data" / "astra"
GROUPS = CommGroupsSpec(((1, (0, 1, 2, 3)), (2, (4, 5, 6, 7))))


def _pipeline(rank: int, delay_us: int) -> RankProgram:
    """Ranks 0-3: all-gather, then a recv; ranks 4-7: compute, then send to rank-4 (lands mid-collective)."""
    if rank < 4:
        nodes = [
            {"id": 1, "type": NodeType.COLL, "attrs": {"comm_type": 2, "comm_size": 1 << 20, "pg_name": "1"}},
            {"id": 2, "type": NodeType.RECV, "attrs": {"comm_src": rank + 4, "comm_size": 3 << 20, "comm_tag": 9}},
            {"id": 3, "type": NodeType.COLL, "data_deps": [1, 2],
             "attrs": {"comm_type": 7, "comm_size": 1 << 20, "pg_name": "1"}},
        ]
    else:
        nodes = [
            {"id": 1, "type": NodeType.COMP, "duration_micros": delay_us},
            {"id": 2, "type": NodeType.SEND, "data_deps": [1],
             "attrs": {"comm_dst": rank - 4, "comm_size": 3 << 20, "comm_tag": 9}},
            {"id": 3, "type": NodeType.COLL, "data_deps": [2],
             "attrs": {"comm_type": 0, "comm_size": 1 << 20, "pg_name": "2"}},
        ]
    return RankProgram.from_records(nodes, f"pipe.{rank}.et")


def test_classes_are_found_from_the_traces() -> None:
    programs = [_pipeline(r, 30) for r in range(8)]
    topo = Topology(read_network(DATA / "Switch_8.yml"))
    assert representatives(programs, GROUPS, topo, "aware") == [0, 0, 0, 0, 4, 4, 4, 4]
    assert representatives(programs, GROUPS, Topology(read_network(DATA / "Ring_8.yml")), "aware") == list(range(8))
    odd = [_pipeline(r, 30 if r != 6 else 31) for r in range(8)]
    assert representatives(odd, GROUPS, topo, "aware") == list(range(8))  # group 2 spans two classes


@pytest.mark.parametrize("backend", ["unaware", "aware"])
@pytest.mark.parametrize("delay_us", [0, 3, 17, 40, 200])
def test_folded_equals_full(backend: str, delay_us: int) -> None:
    programs = [_pipeline(r, delay_us) for r in range(8)]
    system, network = read_system(DATA / "Ring_4chunks.json"), read_network(DATA / "Switch_8.yml")
    full = simulate_astra(programs, system, network, backend, GROUPS, fold=False)
    folded = simulate_astra(programs, system, network, backend, GROUPS, fold=True)
    assert folded == full
    assert len({r.finish_ns for r in full}) == 2


@pytest.mark.parametrize("backend", ["unaware", "aware"])
@pytest.mark.parametrize("policy", ["LIFO", "FIFO"])
def test_overlapping_cpu_and_gpu_collectives_fold_exactly(backend: str, policy: str) -> None:
    """A CPU-op collective overlaps a GPU one (separate slots): their chunks share one queue."""
    import dataclasses

    big = {"id": 1, "type": NodeType.COLL, "attrs": {"comm_type": 0, "comm_size": 1 << 20, "is_cpu_op": True}}
    nodes = [big, {"id": 2, "type": NodeType.COMP, "duration_micros": 20},
             {"id": 3, "type": NodeType.COLL, "data_deps": [2], "attrs": {"comm_type": 0, "comm_size": 1 << 16}},
             {"id": 4, "type": NodeType.COMP, "duration_micros": 100, "data_deps": [3]}]
    programs = [RankProgram.from_records(nodes, f"o.{r}.et") for r in range(8)]
    system = dataclasses.replace(read_system(DATA / "Ring_4chunks.json"), scheduling_policy=policy)
    network = read_network(DATA / "Switch_8.yml")
    full = simulate_astra(programs, system, network, backend, fold=False)
    assert simulate_astra(programs, system, network, backend, fold=True) == full


TIED = CommGroupsSpec(GROUPS.groups + tuple((3 + r, (r, r + 4)) for r in range(4)))


def _tied(rank: int, delay_us: int) -> RankProgram:
    """:func:`_pipeline`, then an all-reduce of each rank with its partner of the other class."""
    program = _pipeline(rank, delay_us)
    nodes = [
        {"id": int(program.ids[i]), "type": int(program.types[i]), "duration_micros": int(program.duration_us[i]),
         "data_deps": [int(program.ids[j]) for j in program.parents[program.parents_ptr[i]:program.parents_ptr[i + 1]]],
         "attrs": {k: (int(v[i]) if k != "pg_name" else v) for k, v in
                   {**{n: program.ints[n] for n in program.ints if program.ints[n][i] >= 0},
                    **({"pg_name": program.pg_name(i)} if program.pg_name(i) else {})}.items()}}
        for i in range(program.num_nodes)
    ]
    nodes.append({"id": 4, "type": NodeType.COLL, "data_deps": [3],
                  "attrs": {"comm_type": 0, "comm_size": 1 << 18, "pg_name": str(3 + rank % 4)}})
    return RankProgram.from_records(nodes, f"tied.{rank}.et")


@pytest.mark.parametrize(("backend", "network"), [
    ("unaware", "Switch_8.yml"), ("aware", "Switch_8.yml"), ("unaware", "Switch_4x2.yml"),
])
@pytest.mark.parametrize("delay_us", [0, 40, 200])
def test_groups_across_classes_fold_exactly(backend: str, network: str, delay_us: int, tmp_path: Path) -> None:
    """A group whose members are of different classes (the tied embedding of the first and last stage):
    each member's representative takes part; on a 2-D network classes also key messages by dimension."""
    path = DATA / network
    if not path.exists():
        path = tmp_path / network
        path.write_text("topology: [ Switch, Switch ]\nnpus_count: [ 4, 2 ]\nbandwidth: [ 200.0, 25.0 ]\n"
                        "latency: [ 500.0, 2500.0 ]\n")
    programs = [_tied(r, delay_us) for r in range(8)]
    system, net = read_system(DATA / "Ring_4chunks.json"), read_network(path)
    assert representatives(programs, TIED, Topology(net), backend) == [0, 0, 0, 0, 4, 4, 4, 4]
    full = simulate_astra(programs, system, net, backend, TIED, fold=False)
    assert simulate_astra(programs, system, net, backend, TIED, fold=True) == full


@needs_shared
@pytest.mark.parametrize("network", ["network.yml", "network_1d.yml"])
@pytest.mark.parametrize("backend", ["unaware", "aware"])
def test_folding_from_patches_equals_folding_from_each_decoded_trace(network: str, backend: str) -> None:
    """The 256-NPU export read by templates and patches folds exactly as every rank decoded on its own."""
    from simcore.emulator.inputs import read_comm_groups
    from simcore.emulator.load import LazyPrograms, read_programs
    from simcore.traces.chakra.et import read_traces
    from simcore.traces.chakra.patch import RankTraces

    folder = SHARED / "astra-inputs" / "gpt3_175b_256npu_export"
    topo = Topology(read_network(folder / network))
    groups = read_comm_groups(folder / "comm_groups.json", topo.npus)
    patched = read_programs(folder / "workload", topo.npus)
    assert isinstance(patched.traces, RankTraces)
    decoded = LazyPrograms(read_traces(folder / "workload", topo.npus, cache=False))
    rep = representatives(patched, groups, topo, backend)
    assert rep == representatives(decoded, groups, topo, backend)
    assert len(set(rep)) == (256 if (backend, network) == ("aware", "network.yml") else 8)
