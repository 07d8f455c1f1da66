"""Congestion-aware runs folded by symmetry on one Switch dimension: collectives in isolation.

Setting: one Switch dimension, every NPU folded onto its class representative A
(:mod:`simcore.emulator.symmetry`), every collective's group inside A's class. Then (reference §3,
congestion-aware ``Link``; §1.1, one communication op in flight per NPU):
- a collective of A only uses A's up-link and A's down-link (its peers fold onto A);
- A's up-link carries nothing else meanwhile: A's communication slot is taken, and A's earlier
  sends were complete (a send completes on arrival) before the collective could start;
- A's down-link may also carry point-to-point messages from other classes (pipeline sends).
So a collective is simulated step by step, exactly as in a full run (same SystemLayer code and
FIFO links), but in a private event queue starting at its issue time, with the down-link's
initial backlog and the foreign messages that enter A's down-link while it runs. When such a
message reaches the switch during the collective, the collective is re-simulated with it: the
message's own delivery is then final (later arrivals queue behind it, FIFO) and the collective's
completion moves later. Undisturbed collectives are cached by (type, size, group, dims).
Point-to-point messages use per-link "free at" times: FIFO by entry order, as the link queues.
The only approximation: a foreign message reaching the switch at the very same ns as one of the
collective's own is queued first (ASTRA-sim orders such ties by event insertion).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from simcore.emulator.context import AstraContext, make_context
from simcore.emulator.network.aware import AwareNetwork
from simcore.emulator.system import SystemLayer

__all__ = ["FoldedSwitchCollectives", "FoldedSwitchNetwork"]

Handler = Callable[[Any], None]
SWITCH = (-1, 0, 0)  # the AwareNetwork device id of the switch of a 1-D Switch topology


class _Running:
    """A collective in flight on one representative."""

    __slots__ = ("arg", "down_free_ns", "end_ns", "foreign", "key", "on_done", "start_ns", "up_free_ns",
                 "version", "down_busy_ns")

    def __init__(self, key: tuple[Any, ...], start_ns: int, down_busy_ns: int, on_done: Handler, arg: Any) -> None:
        self.key = key
        self.start_ns = start_ns
        self.down_busy_ns = down_busy_ns
        self.on_done = on_done
        self.arg = arg
        self.foreign: list[tuple[int, int]] = []
        self.end_ns = 0
        self.down_free_ns = 0
        self.up_free_ns = 0
        self.version = 0


class FoldedSwitchNetwork:
    """Point-to-point messages on a folded 1-D Switch, aware of representatives' collectives."""

    def __init__(self, ctx: AstraContext) -> None:
        topo = ctx.topology
        self.ctx = ctx
        self.events = ctx.events
        self.bytes_per_ns = topo.bytes_per_ns[0]
        self.latency_ns = topo.latency_ns[0]
        self.up_free = [0] * topo.npus
        self.down_free = [0] * topo.npus
        self.running: dict[int, _Running] = {}
        self.collectives: FoldedSwitchCollectives | None = None

    def send(self, src: int, dst: int, size_bytes: int, callback: Handler, arg: Any) -> None:
        """Up-link of ``src`` now, then the switch (``dst`` is the real destination)."""
        ser = size_bytes / self.bytes_per_ns
        start = max(self.events.now_ns, self.up_free[src])
        self.up_free[src] = start + int(ser)
        self.events.schedule(start + int(self.latency_ns + ser), self._at_switch,
                             (self.ctx.rep[dst], size_bytes, callback, arg))

    def _at_switch(self, state: tuple[int, int, Handler, Any]) -> None:
        down, size, callback, arg = state
        now = self.events.now_ns
        run = self.running.get(down)
        if run is not None and now < run.end_ns and self.collectives is not None:
            self.collectives.disturb(down, run, size, callback, arg)
            return
        ser = size / self.bytes_per_ns
        start = max(now, self.down_free[down])
        self.down_free[down] = start + int(ser)
        self.events.schedule(start + int(self.latency_ns + ser), callback, arg)


class FoldedSwitchCollectives:
    """The collective handler of one folded aware run (shared by all representatives)."""

    def __init__(self, ctx: AstraContext, network: FoldedSwitchNetwork) -> None:
        self.ctx = ctx
        self.network = network
        network.collectives = self
        self.cache: dict[tuple[Any, ...], tuple[int, int, int]] = {}

    def handler(self, npu: int) -> Callable[..., None]:
        """The ``collective_handler`` of representative ``npu``."""
        def generate(comm: str, size: int, group: tuple[int, ...] | None, involved: tuple[bool, ...] | None,
                     priority: int, on_done: Handler, arg: Any) -> None:
            self.start(npu, (comm, size, group, involved, priority), on_done, arg)
        return generate

    def start(self, npu: int, key: tuple[Any, ...], on_done: Handler, arg: Any) -> None:
        """Issue a collective on ``npu`` now."""
        net, now = self.network, self.ctx.events.now_ns
        busy = max(net.down_free[npu], now)
        run = _Running(key, now, busy, on_done, arg)
        cache_key = key[:4]
        if busy == now and net.up_free[npu] <= now and cache_key in self.cache:
            duration, down_off, up_off = self.cache[cache_key]
            run.end_ns, run.down_free_ns, run.up_free_ns = now + duration, now + down_off, now + up_off
        else:
            self._simulate(npu, run, [])
            if busy == now and net.up_free[npu] <= now:
                self.cache[cache_key] = (run.end_ns - now, run.down_free_ns - now, run.up_free_ns - now)
        net.running[npu] = run
        self.ctx.events.schedule(run.end_ns, self._complete, (npu, run, run.version))

    def disturb(self, npu: int, run: _Running, size: int, callback: Handler, arg: Any) -> None:
        """A foreign message reached the switch for ``npu``'s down-link during ``run``."""
        now = self.ctx.events.now_ns
        run.foreign.append((now, size))
        deliveries = self._simulate(npu, run, run.foreign)
        run.version += 1
        self.ctx.events.schedule(deliveries[-1], callback, arg)
        self.ctx.events.schedule(run.end_ns, self._complete, (npu, run, run.version))

    def _complete(self, state: tuple[int, _Running, int]) -> None:
        npu, run, version = state
        if version != run.version:
            return  # superseded by a re-simulation
        net = self.network
        del net.running[npu]
        net.down_free[npu] = max(net.down_free[npu], run.down_free_ns)
        net.up_free[npu] = max(net.up_free[npu], run.up_free_ns)
        run.on_done(run.arg)

    def _simulate(self, npu: int, run: _Running, foreign: list[tuple[int, int]]) -> list[int]:
        """Run the collective from its start in a private queue; returns foreign delivery times."""
        ctx = self.ctx
        alone = make_context(ctx.system, ctx.topology, "aware", [npu] * ctx.topology.npus, ctx.groups,
                             ctx.remote_memory)
        alone.events.now_ns = run.start_ns
        net = alone.messenger.network
        assert isinstance(net, AwareNetwork)
        down, up = net.link(SWITCH, (npu,)), net.link((npu,), SWITCH)
        net.occupy_until(down, run.down_busy_ns)
        deliveries = [0] * len(foreign)
        done: list[int] = []

        def delivered(k: int) -> None:
            deliveries[k] = alone.events.now_ns

        def enter(k: int) -> None:
            net.enter(down, foreign[k][1], delivered, k)

        for k, (time_ns, _) in enumerate(foreign):
            alone.events.schedule(time_ns, enter, k)
        comm, size, group, involved, priority = run.key
        SystemLayer(npu, alone).generate(comm, size, group, involved, priority,
                                         lambda _: done.append(alone.events.now_ns), None)
        alone.events.run()
        run.end_ns = done[0]
        run.down_free_ns, run.up_free_ns = down.free_at_ns, up.free_at_ns
        return deliveries
