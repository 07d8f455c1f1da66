"""Congestion-aware analytical network: store-and-forward over per-link FIFO queues.

Model (reference/astra-sim-and-chakra.md §3, astra-network-analytical ``congestion_aware``
``Link.cpp``, ``Chunk.cpp`` and the multi-dim topology): a message follows a route of devices;
every directed link is a FIFO server. When a link starts sending a message of ``size`` bytes the
message reaches the next device after ``int(latency + size / bw)`` ns and the link is busy for
``int(size / bw)`` ns, after which the next queued message starts. Routes go dimension by
dimension in ascending order: Ring = shortest direction (clockwise on a tie), one link per hop;
FullyConnected = one direct link; Switch = NPU -> switch -> NPU (the switch is an extra device).

The end of a serialization is an event in ASTRA-sim (the link then starts its next queued
message); here it is only *reserved* (:meth:`EventQueue.reserve`) and scheduled at its place when
a message arrives at the link before it (:meth:`EventQueue.fill`): a message entering a link at
the very ns its serialization ends is queued or started exactly as the event order decides. Most
links are idle when their serialization ends, so most of these events never run.

A symmetry-reduced run (simcore.emulator.symmetry) passes ``device_map``: on a single Switch
dimension, the up-link of NPU x and the down-link to x are the links of x's representative,
which carry, by symmetry, exactly the same traffic at the same times.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from heapq import heappush
from typing import Any

from simcore.emulator.network.event_queue import EventQueue
from simcore.emulator.network.topology import Topology

__all__ = ["AwareNetwork", "Link"]

Device = tuple[int, ...]


class Link:
    """One directed link: a FIFO server with integer-ns serialization and latency."""

    __slots__ = ("busy", "bytes_per_ns", "costs", "free_at_ns", "latency_ns", "place", "queue")

    def __init__(self, bytes_per_ns: float, latency_ns: float) -> None:
        self.bytes_per_ns = bytes_per_ns
        self.latency_ns = latency_ns
        self.busy = False  # a release event is scheduled (it starts the queued messages)
        self.free_at_ns = 0  # end of the last serialization started
        self.place: tuple[int, int] | None = None  # the reserved place of its release event at free_at_ns
        self.queue: deque[_Message] = deque()
        self.costs: dict[int, tuple[int, int]] = {}  # message bytes -> (int(size / bw), int(latency + size / bw)) ns


# A message in flight is a list (cheaper to make than an object, one per message):
# [size bytes, route (links), current hop, index of the last hop, callback, arg].
_Message = list[Any]
_SIZE, _ROUTE, _HOP, _LAST, _CALLBACK, _ARG = range(6)


def _message(size: int, route: list[Link], callback: Callable[[Any], None], arg: Any) -> _Message:
    return [size, route, 0, len(route) - 1, callback, arg]


class AwareNetwork:
    """Per-link FIFO queueing on the routes of a :class:`Topology`."""

    def __init__(
        self, topology: Topology, events: EventQueue, device_map: Callable[[int], int] | None = None
    ) -> None:
        """``device_map`` folds NPUs onto their symmetry representatives (1-D Switch only)."""
        self.topology = topology
        self.events = events
        self._map = device_map
        self._links: dict[tuple[Device, Device], Link] = {}
        self._routes: dict[tuple[int, int], list[Link]] = {}
        self._release, self._arrived = self.release, self._arrive  # bound once: scheduled per message

    def _link(self, a: Device, b: Device, dim: int) -> Link:
        if self._map is not None:
            a = (self._map(a[0]),) if len(a) == 1 else a
            b = (self._map(b[0]),) if len(b) == 1 else b
        link = self._links.get((a, b))
        if link is None:
            topo = self.topology
            link = Link(topo.bytes_per_ns[dim], topo.latency_ns[dim])
            self._links[(a, b)] = link
        return link

    def route(self, src: int, dst: int) -> list[Link]:
        """The links from ``src`` to ``dst``, dimension by dimension (ascending)."""
        key = (src, dst)
        cached = self._routes.get(key)
        if cached is not None:
            return cached
        topo = self.topology
        links: list[Link] = []
        cur = src
        for dim, (kind, size, stride) in enumerate(zip(topo.kinds, topo.sizes, topo.strides, strict=True)):
            a, b = topo.coord(cur, dim), topo.coord(dst, dim)
            if a == b:
                continue
            base = cur - a * stride
            if kind == "Ring":
                step = 1 if (b - a) % size <= (a - b) % size else -1
                while a != b:
                    nxt = (a + step) % size
                    links.append(self._link((base + a * stride,), (base + nxt * stride,), dim))
                    a = nxt
            elif kind == "FullyConnected":
                links.append(self._link((base + a * stride,), (base + b * stride,), dim))
            else:  # Switch: one switch per dimension group, identified by (dim, base)
                switch = (-1, dim, base)
                links.append(self._link((base + a * stride,), switch, dim))
                links.append(self._link(switch, (base + b * stride,), dim))
            cur = base + b * stride
        self._routes[key] = links
        return links

    def send(self, src: int, dst: int, size_bytes: int, callback: Callable[[Any], None], arg: Any) -> None:
        """Inject a message now; ``callback(arg)`` runs when it reaches ``dst``."""
        route = self._routes.get((src, dst))
        if route is None:
            route = self.route(src, dst)
        if not route:
            self.events.after(0, callback, arg)
            return
        self.inject(route, size_bytes, callback, arg)

    def inject(self, route: list[Link], size_bytes: int, callback: Callable[[Any], None], arg: Any) -> None:
        """:meth:`send` on a known, non-empty ``route`` (:meth:`route`)."""
        msg = [size_bytes, route, 0, len(route) - 1, callback, arg]
        link = route[0]
        events = self.events
        now = events.now_ns
        if link.busy or (link.place is not None and link.free_at_ns >= now):
            self._contend(link, msg)
            return
        # _start(link, msg), inlined: the hot path of every message
        cost = link.costs.get(size_bytes)
        if cost is None:
            cost = self._cost(link, size_bytes)
        buckets = events.buckets
        free = now + cost[0]
        link.free_at_ns = free
        if free == now or link.queue:
            link.busy = True
            link.place = None
            events.after(cost[0], self._release, link)
        else:
            bucket = buckets.get(free)
            seq = events.reserved
            events.reserved = seq + 1
            link.place = (0 if bucket is None else len(bucket), seq)
        due = now + cost[1]
        if msg[_LAST] != 0:  # more hops: the arrival enters the next link (else it is the delivery)
            callback, arg = self._arrived, msg
        bucket = buckets.get(due)
        if bucket is None:
            buckets[due] = [callback, arg]
            heappush(events.times, due)
        else:
            bucket.append(callback)
            bucket.append(arg)

    def _enter(self, msg: _Message) -> None:
        link = msg[_ROUTE][msg[_HOP]]
        if link.busy or (link.place is not None and link.free_at_ns >= self.events.now_ns):
            self._contend(link, msg)
        else:
            self._start(link, msg)

    def _contend(self, link: Link, msg: _Message) -> None:
        """``msg`` reaches ``link`` while a serialization is on it or ends this ns: queued, or
        started if the release (at its reserved place) has run already."""
        if link.busy:
            link.queue.append(msg)
            return
        events = self.events
        free, place = link.free_at_ns, link.place
        assert place is not None
        if free > events.now_ns or not events.passed(free, place):
            link.busy = True  # its release is needed after all: schedule it at its place
            link.place = None
            events.fill(free, place, self._release, link)
            link.queue.append(msg)
            return
        self._start(link, msg)

    @staticmethod
    def _cost(link: Link, size: int) -> tuple[int, int]:
        """(serialization, serialization + latency) of ``size`` bytes on ``link``, each truncated to ns."""
        serialization = size / link.bytes_per_ns
        cost = link.costs[size] = (int(serialization), int(link.latency_ns + serialization))
        return cost

    def _start(self, link: Link, msg: _Message) -> None:
        """``link`` starts serializing ``msg``: its release (reserved unless messages wait for it or it
        is due this ns), then its arrival at the link's end (the delivery, on the last hop).

        Events are appended to the event queue inline, as :meth:`EventQueue.after` would.
        (:meth:`inject` and :meth:`_arrive` repeat this body inline.)
        """
        cost = link.costs.get(msg[_SIZE])
        if cost is None:
            cost = self._cost(link, msg[_SIZE])
        events = self.events
        buckets = events.buckets
        now = events.now_ns
        free = now + cost[0]
        link.free_at_ns = free
        if free == now or link.queue:  # a real event: released within this ns, or messages wait for it
            link.busy = True
            link.place = None
            events.after(cost[0], self._release, link)
        else:
            bucket = buckets.get(free)
            seq = events.reserved
            events.reserved = seq + 1
            link.place = (0 if bucket is None else len(bucket), seq)  # EventQueue.reserve, inline
        due = now + cost[1]
        if msg[_HOP] == msg[_LAST]:  # the last hop: its arrival is the delivery (one call less)
            callback, arg = msg[_CALLBACK], msg[_ARG]
        else:
            callback, arg = self._arrived, msg
        bucket = buckets.get(due)
        if bucket is None:
            buckets[due] = [callback, arg]
            heappush(events.times, due)
        else:
            bucket.append(callback)
            bucket.append(arg)

    def link(self, a: Device, b: Device, dim: int = 0) -> Link:
        """The directed link between devices ``a`` and ``b`` (NPU ``x`` is ``(x,)``)."""
        return self._link(a, b, dim)

    def occupy_until(self, link: Link, time_ns: int) -> None:
        """Mark ``link`` busy until ``time_ns`` (traffic already on it when a run starts)."""
        if time_ns > self.events.now_ns:
            link.busy = True
            link.free_at_ns = time_ns
            link.place = None
            self.events.schedule(time_ns, self._release, link)

    def enter(self, link: Link, size_bytes: int, callback: Callable[[Any], None], arg: Any) -> None:
        """A message enters ``link`` now (its last hop); ``callback(arg)`` at its arrival."""
        self._enter(_message(size_bytes, [link], callback, arg))

    def release(self, link: Link) -> None:
        """End of a serialization: start the next queued message, if any."""
        link.busy = False
        if link.queue:
            self._start(link, link.queue.popleft())

    def _arrive(self, msg: _Message) -> None:
        """``msg`` reached the end of a hop that is not its last: it enters the next link."""
        hop = msg[_HOP] + 1
        msg[_HOP] = hop
        link = msg[_ROUTE][hop]
        events = self.events
        now = events.now_ns
        if link.busy or (link.place is not None and link.free_at_ns >= now):
            self._contend(link, msg)
            return
        # _start(link, msg), inlined
        cost = link.costs.get(msg[_SIZE])
        if cost is None:
            cost = self._cost(link, msg[_SIZE])
        buckets = events.buckets
        free = now + cost[0]
        link.free_at_ns = free
        if free == now or link.queue:
            link.busy = True
            link.place = None
            events.after(cost[0], self._release, link)
        else:
            bucket = buckets.get(free)
            seq = events.reserved
            events.reserved = seq + 1
            link.place = (0 if bucket is None else len(bucket), seq)
        due = now + cost[1]
        if hop == msg[_LAST]:
            callback, arg = msg[_CALLBACK], msg[_ARG]
        else:
            callback, arg = self._arrived, msg
        bucket = buckets.get(due)
        if bucket is None:
            buckets[due] = [callback, arg]
            heappush(events.times, due)
        else:
            bucket.append(callback)
            bucket.append(arg)
