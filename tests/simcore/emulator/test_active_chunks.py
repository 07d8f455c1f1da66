"""More than one active chunk per dimension (``active-chunks-per-dimension`` > 1).

No ASTRA-sim output with active > 1 is shipped, so these tests check invariants: every run
finishes, folding does not change a number, and two identical collectives issued back to back on
an idle network take exactly twice one (the second starts at the ns the first ends, on the same
empty queues and links: a send completes on arrival, reference §1.1).

The case that broke: the last chunk of a collective finishing lets the workload issue the next
collective at once (from its completion callback), while that chunk is still in its queue. ASTRA-sim
(``Sys::proceed_to_next_vnet_baseline``) notifies the dataset before it erases the stream, and its
scheduler unit starts streams from ``begin() + running_streams``, so the new chunks queue behind
the finished one and start in order.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from simcore.emulator.inputs import read_comm_groups, read_network, read_system
from simcore.emulator.load import read_programs
from simcore.emulator.program import NodeType, RankProgram
from simcore.emulator.run import simulate_astra
from simcore.emulator.specs import SystemSpec

DATA = Path(__file__).parents[2] / "data" / "astra"
MIB = 1 << 20


def _all_reduces(npus: int, count: int, dependent: bool) -> list[RankProgram]:
    """``count`` 1 MiB all-reduces per NPU, each depending on the previous one if ``dependent``."""
    return [
        RankProgram.from_records(
            [{"id": i, "type": NodeType.COLL, "data_deps": [i - 1] if dependent and i else [],
              "attrs": {"is_cpu_op": False, "comm_type": 0, "comm_size": MIB}} for i in range(count)],
            f"ar.{r}.et")
        for r in range(npus)
    ]


def _system(active: int, splits: int) -> SystemSpec:
    return dataclasses.replace(read_system(DATA / "Ring_4chunks.json"), active_chunks_per_dimension=active,
                               preferred_dataset_splits=splits)


@pytest.mark.parametrize("backend", ["unaware", "aware"])
@pytest.mark.parametrize("network", ["Ring_8.yml", "Switch_8.yml"])
@pytest.mark.parametrize(("active", "splits"), [(2, 2), (2, 4), (4, 4), (4, 8), (1, 4)])
@pytest.mark.parametrize("dependent", [True, False])
def test_back_to_back_all_reduces_take_twice_one(backend: str, network: str, active: int, splits: int,
                                                 dependent: bool) -> None:
    system, net = _system(active, splits), read_network(DATA / network)
    one = simulate_astra(_all_reduces(8, 1, True), system, net, backend, fold=False)
    unfolded = simulate_astra(_all_reduces(8, 2, dependent), system, net, backend, fold=False)
    folded = simulate_astra(_all_reduces(8, 2, dependent), system, net, backend, fold=True)
    assert folded == unfolded
    assert len({r.finish_ns for r in one}) == 1
    assert [r.finish_ns for r in unfolded] == [2 * one[0].finish_ns] * 8
    assert [r.exposed_comm_ns for r in unfolded] == [2 * one[0].finish_ns] * 8


@pytest.mark.parametrize("active", [2, 4])
def test_more_active_chunks_never_slow_a_lone_collective(active: int) -> None:
    """With one collective alone on the network, more chunks in flight can only help: the chunks
    run in parallel instead of one after another (the 1-chunk time is ASTRA-sim's 64,440 ns)."""
    net = read_network(DATA / "Ring_8.yml")
    serial = simulate_astra(_all_reduces(8, 1, True), _system(1, 4), net, "unaware", fold=False)
    parallel = simulate_astra(_all_reduces(8, 1, True), _system(active, 4), net, "unaware", fold=False)
    assert serial[0].finish_ns == 64_440  # reference §5.1
    assert parallel[0].finish_ns < serial[0].finish_ns


@pytest.mark.parametrize("active", [2, 4])
@pytest.mark.parametrize("backend", ["unaware", "aware"])
def test_exported_llm_with_active_chunks_folds_as_it_runs_unfolded(tmp_path: Path, active: int,
                                                                   backend: str) -> None:
    """``chakra export`` of GPT-tiny TP2 x PP2 x DP2 with the system's active chunks raised: the
    unfolded run stalled (a chunk skipped, another started twice); now it finishes and folding
    changes nothing."""
    from search.commands import chakra

    out = tmp_path / "w"
    assert chakra.main(["export", "--out", str(out), "workload=gpt_tiny", "system=dgx_a100_80g",
                        "system.num_gpus=8", "parallel.tp=2", "parallel.pp=2"]) == 0
    system = dataclasses.replace(read_system(Path(f"{out}.system.json")), active_chunks_per_dimension=active)
    network = read_network(Path(f"{out}.network.yml"))
    groups = read_comm_groups(Path(f"{out}.comm_groups.json"), network.npus)
    folded = simulate_astra(read_programs(out), system, network, backend, groups, fold=True)
    unfolded = simulate_astra(read_programs(out), system, network, backend, groups, fold=False)
    assert folded == unfolded
    assert len(unfolded) == 8 and all(r.finish_ns > 0 for r in unfolded)
