"""Congestion-unaware network backend: one closed-form delay per message, no queueing.

Model: :meth:`simcore.emulator.network.topology.Topology.unaware_delay_ns` (reference §3,
``BasicTopology.cpp``); delivery is an event at ``now + delay``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from simcore.emulator.network.event_queue import EventQueue
from simcore.emulator.network.topology import Topology

__all__ = ["UnawareNetwork"]


class UnawareNetwork:
    """Schedules each message's arrival after its congestion-unaware delay."""

    def __init__(self, topology: Topology, events: EventQueue) -> None:
        self.topology = topology
        self.events = events
        self._cache: dict[tuple[int, int, int], int] = {}

    def delay_ns(self, src: int, dst: int, size_bytes: int) -> int:
        """Delivery time of one message (ns), memoised."""
        key = (src, dst, size_bytes)
        delay = self._cache.get(key)
        if delay is None:
            delay = self.topology.unaware_delay_ns(src, dst, size_bytes)
            self._cache[key] = delay
        return delay

    def send(self, src: int, dst: int, size_bytes: int, callback: Callable[[Any], None], arg: Any) -> None:
        """Inject a message now; ``callback(arg)`` runs when it reaches ``dst``."""
        delay = self._cache.get((src, dst, size_bytes))  # delay_ns inlined: once per message
        if delay is None:
            delay = self.delay_ns(src, dst, size_bytes)
        self.events.after(delay, callback, arg)
