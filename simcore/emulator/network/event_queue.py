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

An event that is usually not needed can be *reserved* instead of scheduled (:meth:`reserve`: its
place among the events due then, as if appended now) and scheduled at that very place later only
if it turns out to be needed (:meth:`fill`), or asked whether the run has already passed that place
(:meth:`passed`). The congestion-aware links reserve their end-of-serialization events this way.
A place is (index in the bucket's list when reserved, a global reservation counter); places filled
into a future bucket are inserted into it when it starts, in place order.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, insort
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["EventQueue"]


class EventQueue:
    """Time buckets ``{time_ns: [callback, arg, callback, arg, ...]}`` and a heap of their times."""

    __slots__ = ("_cursor", "_filled", "_late", "buckets", "now_ns", "reserved", "times")

    def __init__(self) -> None:
        self.buckets: dict[int, list[Any]] = {}  # due time (ns) -> [callback, arg, callback, arg, ...]
        self.times: list[int] = []  # heap of the due times that have a bucket
        self.now_ns = 0
        self.reserved = 0  # places reserved so far (the second key of a place)
        self._late: dict[int, list[tuple[tuple[int, int], Callable[[Any], None], Any]]] = {}  # filled, not due yet
        self._cursor: Any = None  # the iterator over the bucket being run (None: not running)
        self._filled: Sequence[tuple[int, int]] = ()  # places filled into the running bucket, sorted

    def reserve(self, time_ns: int) -> tuple[int, int]:
        """The place an event due at ``time_ns`` (> now) would take if scheduled now."""
        bucket = self.buckets.get(time_ns)
        seq = self.reserved
        self.reserved = seq + 1
        return (0 if bucket is None else len(bucket), seq)

    def _index(self, place: tuple[int, int]) -> int:
        """Index of ``place`` in the running bucket's list (shifted by the places filled before it)."""
        return place[0] + 2 * bisect_left(self._filled, place)

    def passed(self, time_ns: int, place: tuple[int, int]) -> bool:
        """Whether the run is past ``place`` at ``time_ns`` (the event there would have run)."""
        now = self.now_ns
        if time_ns != now or self._cursor is None:
            return time_ns < now
        current = len(self.buckets[now]) - self._cursor.__length_hint__() - 2  # the event running now
        return self._index(place) <= current

    def fill(self, time_ns: int, place: tuple[int, int], callback: Callable[[Any], None], arg: Any) -> None:
        """Schedule ``callback(arg)`` at a reserved ``place`` of ``time_ns`` not :meth:`passed` yet."""
        if time_ns == self.now_ns and self._cursor is not None:
            index = self._index(place)
            self.buckets[time_ns][index:index] = [callback, arg]
            filled = list(self._filled)
            insort(filled, place)
            self._filled = filled
            return
        self._late.setdefault(time_ns, []).append((place, callback, arg))
        if time_ns not in self.buckets:
            self.buckets[time_ns] = []
            heapq.heappush(self.times, time_ns)

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
        times, buckets, late = self.times, self.buckets, self._late
        pop = heapq.heappop
        while times:
            time_ns = pop(times)  # its bucket stays in place (and takes events due now) until done
            self.now_ns = time_ns
            bucket = buckets[time_ns]
            self._filled = ()
            if late and time_ns in late:  # filled places, last first: an insertion moves no place before it
                filled = late.pop(time_ns)
                filled.sort(key=lambda entry: entry[0], reverse=True)
                for place, callback, arg in filled:
                    bucket[place[0]:place[0]] = [callback, arg]
                self._filled = sorted(entry[0] for entry in filled)
            items = iter(bucket)  # a list iterator also yields what is inserted ahead of it while it runs
            self._cursor = items
            for callback in items:
                callback(next(items))
            del buckets[time_ns]
        self._cursor = None
        return self.now_ns
