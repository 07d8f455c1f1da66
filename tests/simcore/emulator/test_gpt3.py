"""GPT-3 175B on 64 NPUs: every NPU's finish time and exposed communication against the numbers
ASTRA-sim printed on the same inputs (shared/astra-inputs/gpt3_175b_64npu/expected_*.csv)."""

from __future__ import annotations

import csv

import pytest

from simcore.emulator.inputs import (
    read_comm_groups,
    read_network,
    read_remote_memory,
    read_system,
)
from simcore.emulator.load import read_programs
from simcore.emulator.run import simulate_astra
from tests.shared_paths import GPT3_INPUTS, needs_shared

GPT3 = GPT3_INPUTS
pytestmark = needs_shared


@pytest.fixture(scope="module")
def programs() -> list:
    return list(read_programs(GPT3 / "workload", 64))


@pytest.mark.parametrize("backend", ["unaware", "aware"])
def test_gpt3_all_npus_match_astra_sim(programs: list, backend: str) -> None:
    network = read_network(GPT3 / "network.yml")
    results = simulate_astra(programs, read_system(GPT3 / "system.json"), network, backend,
                             read_comm_groups(GPT3 / "comm_groups.json", network.npus),
                             read_remote_memory(GPT3 / "remote_memory.json"))
    with open(GPT3 / f"expected_{backend}.csv") as fh:
        expected = {int(r["npu"]): (int(r["finish_cycles"]), int(r["exposed_comm_cycles"])) for r in csv.DictReader(fh)}
    got = {r.npu: (r.finish_ns, r.exposed_comm_ns) for r in results}
    assert len(got) == 64
    worst = max(abs(got[n][0] - expected[n][0]) / expected[n][0] for n in range(64))
    assert worst <= 0.005  # the acceptance bound; exact is what the emulation aims for:
    assert got == expected
