"""A discrete-event queue with ASTRA-sim's tie rule (reference §3, ``EventQueue.cpp``).

Time is an integer number of ns (ASTRA-sim's ``Tick``, ``CLOCK_PERIOD = 1`` ns, reference §1.1).
Events due at the same time run in the order they were scheduled, as in the analytical
backend's sorted list of time buckets — which is also how they are stored here: one bucket (a
flat list of callbacks and arguments) per distinct due time, and a min-heap of the due times.
An unfolded run of a symmetric trace has many NPUs doing the same step at the same ns, so a heap
operation is paid per distinct time rather than per event; an event scheduled for the time being
processed (delay 0) joins the end of the running bucket, i.e. runs after every event already due
then, exactly as a global insertion counter on ties would order it. The hottest callers (ring
steps, the congestion-aware links) append to ``buckets`` / push to ``times`` inline, exactly as
:meth:`EventQueue.after` does, to save a call per event.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any

__all__ = ["EventQueue"]


class EventQueue:
    """Time buckets ``{time_ns: [callback, arg, callback, arg, ...]}`` and a heap of their times."""

    __slots__ = ("buckets", "now_ns", "times")

    def __init__(self) -> None:
        self.buckets: dict[int, list[Any]] = {}  # due time (ns) -> [callback, arg, callback, arg, ...]
        self.times: list[int] = []  # heap of the due times that have a bucket
        self.now_ns = 0

    def schedule(self, time_ns: int, callback: Callable[[Any], None], arg: Any = None) -> None:
        """Run ``callback(arg)`` at ``time_ns`` (>= now)."""
        bucket = self.buckets.get(time_ns)
        if bucket is None:
            self.buckets[time_ns] = [callback, arg]
            heapq.heappush(self.times, time_ns)
        else:
            bucket.append(callback)
            bucket.append(arg)

    def after(self, delay_ns: int, callback: Callable[[Any], None], arg: Any = None) -> None:
        """Run ``callback(arg)`` ``delay_ns`` after now."""
        time_ns = self.now_ns + delay_ns
        bucket = self.buckets.get(time_ns)
        if bucket is None:
            self.buckets[time_ns] = [callback, arg]
            heapq.heappush(self.times, time_ns)
        else:
            bucket.append(callback)
            bucket.append(arg)

    def empty(self) -> bool:
        """True when no event is pending."""
        return not self.times

    def run(self) -> int:
        """Run events until none is left; returns the time of the last event (ns)."""
        times, buckets = self.times, self.buckets
        pop = heapq.heappop
        while times:
            time_ns = pop(times)  # its bucket stays in place (and takes events due now) until done
            self.now_ns = time_ns
            items = iter(buckets[time_ns])  # a list iterator also yields what is appended while it runs
            for callback in items:
                callback(next(items))
            del buckets[time_ns]
        return self.now_ns
