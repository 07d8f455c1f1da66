"""Golden tests of the analytical network (reference/astra-sim-and-chakra.md §3 / §5.2).

Expected values are astra-network-analytical's own unit-test expectations; the inputs are the
YAML files in tests/data/astra (1 MiB messages).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from simcore.emulator.inputs import read_network
from simcore.emulator.network.aware import AwareNetwork
from simcore.emulator.network.event_queue import EventQueue
from simcore.emulator.network.topology import Topology
from simcore.emulator.network.unaware import UnawareNetwork

DATA = Path(__file__).parents[3] / "data" / "astra"
MIB = 1 << 20


def _topology(name: str) -> Topology:
    return Topology(read_network(DATA / name))


def _deliver(backend: str, name: str, pairs: list[tuple[int, int]]) -> list[int]:
    events = EventQueue()
    topo = _topology(name)
    net = AwareNetwork(topo, events) if backend == "aware" else UnawareNetwork(topo, events)
    arrivals: list[int] = []
    for src, dst in pairs:
        net.send(src, dst, MIB, lambda _: arrivals.append(events.now_ns), None)
    events.run()
    return arrivals


@pytest.mark.parametrize(
    ("name", "src", "dst", "expected_ns"),
    [
        ("Ring_16.yml", 1, 4, 21_031),
        ("FullyConnected_16.yml", 1, 4, 20_031),
        ("Switch_16.yml", 1, 4, 20_531),
        ("Ring_FullyConnected_Switch.yml", 0, 1, 4_932),
        ("Ring_FullyConnected_Switch.yml", 37, 41, 10_265),
        ("Ring_FullyConnected_Switch.yml", 26, 42, 23_531),
    ],
)
def test_unaware_golden(name: str, src: int, dst: int, expected_ns: int) -> None:
    assert _topology(name).unaware_delay_ns(src, dst, MIB) == expected_ns
    assert _deliver("unaware", name, [(src, dst)]) == [expected_ns]


@pytest.mark.parametrize(
    ("name", "expected_ns"),
    [("Ring_16.yml", 60_093), ("FullyConnected_16.yml", 20_031), ("Switch_16.yml", 40_062)],
)
def test_aware_golden_single_message(name: str, expected_ns: int) -> None:
    assert _deliver("aware", name, [(1, 4)]) == [expected_ns]


def test_aware_all_pairs_on_ring_golden() -> None:
    pairs = [(i, j) for i in range(16) for j in range(16) if i != j]
    arrivals = _deliver("aware", "Ring_16.yml", pairs)
    assert len(arrivals) == len(pairs)
    assert max(arrivals) == 704_116


def test_aware_equals_unaware_without_contention_on_one_hop() -> None:
    # one FullyConnected hop: store-and-forward and closed form agree, for any size
    topo = _topology("FullyConnected_16.yml")
    for size in (1, 1000, 123_457, 8 * MIB):
        events = EventQueue()
        got: list[int] = []
        AwareNetwork(topo, events).send(3, 9, size, got.append, size)
        events.run()
        assert got == [size] and events.now_ns == topo.unaware_delay_ns(3, 9, size)


def test_ring_hops_take_the_short_way() -> None:
    topo = _topology("Ring_16.yml")
    assert topo.unaware_delay_ns(1, 15, MIB) == topo.unaware_delay_ns(1, 3, MIB)
    assert topo.unaware_delay_ns(0, 8, MIB) == int(8 * 500 + MIB / (50 * (1 << 30) / 1e9))
