"""A discrete-event queue with ASTRA-sim's tie rule (reference §3, ``EventQueue.cpp``).

Time is an integer number of ns (ASTRA-sim's ``Tick``, ``CLOCK_PERIOD = 1`` ns, reference §1.1).
Events due at the same time run in the order they were scheduled, as in the analytical
backend's sorted list of time buckets.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any

__all__ = ["EventQueue"]


class EventQueue:
    """Min-heap of ``(time_ns, seq, callback, arg)``; ``seq`` keeps insertion order on ties."""

    __slots__ = ("_heap", "_seq", "now_ns")

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, Callable[[Any], None], Any]] = []
        self._seq = 0
        self.now_ns = 0

    def schedule(self, time_ns: int, callback: Callable[[Any], None], arg: Any = None) -> None:
        """Run ``callback(arg)`` at ``time_ns`` (>= now)."""
        self._seq += 1
        heapq.heappush(self._heap, (time_ns, self._seq, callback, arg))

    def after(self, delay_ns: int, callback: Callable[[Any], None], arg: Any = None) -> None:
        """Run ``callback(arg)`` ``delay_ns`` after now."""
        self._seq += 1
        heapq.heappush(self._heap, (self.now_ns + delay_ns, self._seq, callback, arg))

    def empty(self) -> bool:
        """True when no event is pending."""
        return not self._heap

    def run(self) -> int:
        """Run events until none is left; returns the time of the last event (ns)."""
        heap = self._heap
        pop = heapq.heappop
        while heap:
            time_ns, _, callback, arg = pop(heap)
            self.now_ns = time_ns
            callback(arg)
        return self.now_ns
