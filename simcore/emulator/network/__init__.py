"""The analytical network backends of the emulator, by the name ``--network-backend`` takes.

``BACKENDS[name](topology, events, device_map)`` builds a fresh network: ``unaware`` is
ASTRA-sim's congestion-unaware closed form (:mod:`.unaware`), ``aware`` its congestion-aware
store-and-forward FIFO links (:mod:`.aware`; ``device_map`` folds NPUs onto their symmetry
representatives, None when nothing is folded). Source: reference/astra-sim-and-chakra.md §3.
"""

from __future__ import annotations

from collections.abc import Callable

from simcore.emulator.network.aware import AwareNetwork
from simcore.emulator.network.event_queue import EventQueue
from simcore.emulator.network.topology import Topology
from simcore.emulator.network.unaware import UnawareNetwork

__all__ = ["BACKENDS", "Network", "NetworkFactory"]

Network = AwareNetwork | UnawareNetwork
NetworkFactory = Callable[[Topology, EventQueue, Callable[[int], int] | None], Network]


def _unaware(topology: Topology, events: EventQueue, device_map: Callable[[int], int] | None) -> Network:
    return UnawareNetwork(topology, events)  # closed form per message: nothing to fold


def _aware(topology: Topology, events: EventQueue, device_map: Callable[[int], int] | None) -> Network:
    return AwareNetwork(topology, events, device_map)


BACKENDS: dict[str, NetworkFactory] = {"unaware": _unaware, "aware": _aware}
