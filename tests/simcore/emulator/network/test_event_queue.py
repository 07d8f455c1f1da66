"""The event queue's tie rule (reference §3, ``EventQueue.cpp``): events due at the same ns run in the
order they were scheduled, including events scheduled for the running ns while it runs; a
heap of ``(time, insertion counter)`` pairs, the previous implementation, is the oracle."""

from __future__ import annotations

import heapq
import random

from simcore.emulator.network.event_queue import EventQueue


def _oracle(script: list[tuple[int, list[int]]]) -> list[tuple[int, int]]:
    """Event ``e`` (due at ``script[e][0]``) schedules events ``script[e][1]`` with the delays given."""
    heap: list[tuple[int, int, int]] = []
    seq = 0
    out = []
    heapq.heappush(heap, (0, seq, 0))
    nxt = 1
    while heap:
        now, _, e = heapq.heappop(heap)
        out.append((now, e))
        for delay in script[e][1]:
            if nxt < len(script):
                seq += 1
                heapq.heappush(heap, (now + delay, seq, nxt))
                nxt += 1
    return out


def _bucketed(script: list[tuple[int, list[int]]]) -> list[tuple[int, int]]:
    events = EventQueue()
    out: list[tuple[int, int]] = []
    counter = [1]

    def run(e: int) -> None:
        out.append((events.now_ns, e))
        for delay in script[e][1]:
            if counter[0] < len(script):
                events.after(delay, run, counter[0])
                counter[0] += 1

    events.schedule(0, run, 0)
    assert events.run() == out[-1][0]
    assert events.empty()
    return out


def test_same_time_events_run_in_scheduling_order() -> None:
    rng = random.Random(7)
    for _ in range(50):  # delays from {0, 1, 2, 3}: many ties, and events due at the running ns
        script = [(0, [rng.choice((0, 1, 2, 3)) for _ in range(rng.randint(0, 3))]) for _ in range(400)]
        assert _bucketed(script) == _oracle(script)


def test_an_event_scheduled_for_now_runs_after_those_already_due() -> None:
    events = EventQueue()
    seen: list[str] = []

    def first_at_5(_: object) -> None:
        seen.append("a")
        events.after(0, seen.append, "c")

    events.schedule(5, first_at_5)
    events.schedule(5, seen.append, "b")
    events.schedule(3, seen.append, "first")
    assert events.run() == 5
    assert seen == ["first", "a", "b", "c"]
