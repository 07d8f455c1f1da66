"""End-to-end golden numbers of ASTRA-sim's system layer (reference §5.1).

One COMM_COLL node per NPU (the microbenchmark traces, written as ET files with the Chakra ET
writer and read back), system JSON and network YAML from tests/data/astra; expected outputs are
ASTRA-sim's published ones.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from simcore.emulator.inputs import read_network, read_system
from simcore.emulator.load import read_programs
from simcore.emulator.program import NodeType, RankProgram
from simcore.emulator.run import simulate_astra
from simcore.traces.chakra.build import EtTraceBuilder
from simcore.traces.chakra.et import write_trace

DATA = Path(__file__).parents[2] / "data" / "astra"
MIB = 1 << 20


def one_collective(npus: int, comm_type: int, size: int) -> list[RankProgram]:
    """``chakra_generator``-style microbenchmark: one collective node per NPU (node id = NPU)."""
    return [
        RankProgram.from_records(
            [{"id": r, "type": NodeType.COLL,
              "attrs": {"is_cpu_op": False, "comm_type": comm_type, "comm_size": size}}],
            f"microbenchmark.{r}.et",
        )
        for r in range(npus)
    ]


def microbenchmark_files(folder: Path, npus: int, comm_type: int, size: int) -> str:
    """``<folder>/coll.<r>.et``: metadata version 0.0.4, one COMM_COLL node (id = NPU), reference §2.6."""
    for r in range(npus):
        builder = EtTraceBuilder(version="0.0.4")
        builder.add_node(r, "coll", 7, attrs={"is_cpu_op": False, "comm_type": comm_type, "comm_size": size})
        write_trace(folder / f"coll.{r}.et", builder.build())
    return str(folder / "coll")


@pytest.mark.parametrize("backend", ["unaware", "aware"])
@pytest.mark.parametrize(
    ("system", "network", "comm_type", "npus", "expected"),
    [
        ("Ring_4chunks_membw50.json", "Ring_8.yml", 0, 8, 117_780),
        ("Ring_4chunks.json", "Ring_8.yml", 0, 8, 64_440),
        ("Ring_4chunks.json", "Ring_16.yml", 2, 16, 323_560),
    ],
)
def test_published_outputs(system: str, network: str, comm_type: int, npus: int, expected: int,
                           backend: str, tmp_path: Path) -> None:
    programs = read_programs(microbenchmark_files(tmp_path, npus, comm_type, MIB), npus)
    results = simulate_astra(programs, read_system(DATA / system), read_network(DATA / network), backend,
                             fold=False)
    assert [r.finish_ns for r in results] == [expected] * npus
    assert [r.exposed_comm_ns for r in results] == [expected] * npus


def test_folded_run_matches_full_run() -> None:
    programs = one_collective(16, 2, MIB)
    system, network = read_system(DATA / "Ring_4chunks.json"), read_network(DATA / "Switch_16.yml")
    full = simulate_astra(programs, system, network, "aware", fold=False)
    folded = simulate_astra(programs, system, network, "aware", fold=True)
    assert full == folded
