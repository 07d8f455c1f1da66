"""Congestion-aware links whose end-of-serialization event is only reserved (EventQueue.reserve/fill)
behave exactly as links that schedule it as an event (ASTRA-sim's ``Link.cpp``): the oracle here is
that event-per-release FIFO link on a heap of ``(time, insertion counter)``, and random scripts with
many same-ns ties (messages entering a link at the very ns its serialization ends, before or after
the release's place) must give the same deliveries in the same order."""

from __future__ import annotations

import heapq
import random
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from simcore.emulator.inputs import read_network
from simcore.emulator.network.aware import AwareNetwork
from simcore.emulator.network.event_queue import EventQueue
from simcore.emulator.network.topology import Topology

DATA = Path(__file__).parents[3] / "data" / "astra"
Script = list[tuple[int, int, list[int]]]  # per action: link, message size, delays of the actions it starts


def _oracle(script: Script, bytes_per_ns: float, latency_ns: float) -> list[tuple[int, int]]:
    heap: list[tuple[int, int, Callable[[Any], None], Any]] = []
    seq = [0]
    now = [0]
    busy = [False, False]
    queues: list[deque[int]] = [deque(), deque()]
    out: list[tuple[int, int]] = []
    nxt = [1]

    def push(time_ns: int, fn: Callable[[Any], None], arg: Any) -> None:
        seq[0] += 1
        heapq.heappush(heap, (time_ns, seq[0], fn, arg))

    def start(link: int, e: int) -> None:
        busy[link] = True
        ser = script[e][1] / bytes_per_ns
        push(now[0] + int(ser), release, link)
        push(now[0] + int(latency_ns + ser), arrive, e)

    def arrive(e: int) -> None:
        out.append((now[0], e))

    def release(link: int) -> None:
        busy[link] = False
        if queues[link]:
            start(link, queues[link].popleft())

    def action(e: int) -> None:
        link = script[e][0]
        if busy[link]:
            queues[link].append(e)
        else:
            start(link, e)
        for delay in script[e][2]:
            if nxt[0] < len(script):
                push(now[0] + delay, action, nxt[0])
                nxt[0] += 1

    push(0, action, 0)
    while heap:
        now[0], _, fn, arg = heapq.heappop(heap)
        fn(arg)
    return out


def _reserved(script: Script) -> list[tuple[int, int]]:
    events = EventQueue()
    net = AwareNetwork(Topology(read_network(DATA / "Switch_16.yml")), events)
    links = [net.link((0,), (-1, 0, 0)), net.link((1,), (-1, 0, 0))]
    out: list[tuple[int, int]] = []
    nxt = [1]

    def action(e: int) -> None:
        link, size, delays = script[e]
        net.enter(links[link], size, lambda k: out.append((events.now_ns, k)), e)
        for delay in delays:
            if nxt[0] < len(script):
                events.after(delay, action, nxt[0])
                nxt[0] += 1

    events.schedule(0, action, 0)
    events.run()
    return out


def test_reserved_releases_order_ties_as_release_events() -> None:
    topo = Topology(read_network(DATA / "Switch_16.yml"))
    bpn, latency = topo.bytes_per_ns[0], topo.latency_ns[0]
    rng = random.Random(11)
    for _ in range(60):  # serializations of 0-5 ns and action delays of 0-3 ns: many same-ns ties
        script = [(rng.randint(0, 1), int(rng.choice((0, 1, 2, 3, 5)) * bpn),
                   [rng.choice((0, 1, 2, 3)) for _ in range(rng.randint(0, 3))]) for _ in range(300)]
        assert _reserved(script) == _oracle(script, bpn, latency)
