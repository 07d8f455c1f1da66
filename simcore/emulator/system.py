"""ASTRA-sim's system layer for one NPU: streams, per-dimension queues and phase execution.

Model (reference §1.2-§1.3; ``Sys.cc``, ``SchedulerUnit``, ``StreamBaseline``, ``Ring.cc``):
- every chunk of a collective is a stream; all chunks of one collective share a priority
  (LIFO: a counter counting up, FIFO: down, EXPLICIT: the node's ``comm_priority``);
- a stream waits in the queue of its current phase's dimension, ordered: running streams first,
  then by priority (higher first), equal priorities in arrival order (``Sys::insert_stream``);
- at most ceil(active-chunks-per-dimension / queues-per-dim) streams run per queue (one queue per
  dimension, the CLI default); when a stream finishes a phase it moves to the next phase's queue
  (``proceed_to_next_vnet_baseline``) and the freed slot starts the next waiting stream;
- a phase runs the algorithm's lanes of steps (:mod:`simcore.network.collectives`): messages are
  tagged with the stream id and matched per ``(tag, src, dst, size)`` (FIFO per key); a send is
  injected at once (several may be in flight to the same peer with the same tag);
- stream ids are counted per communicator group on each NPU (the k-th stream an NPU creates for a
  group has the same id on every member), so the members of a group whose programs differ
  elsewhere (the tied-embedding all-reduce between the first and the last pipeline stage) still
  match: ASTRA-sim runs such traces to completion with the exchange costed (the reference
  ``gpt3_175b_64npu_sp_export``), which a per-NPU stream counter would deadlock;
- the collective completes when all its streams have finished their last phase.

A ring phase (one lane: every step sends to the next member and receives from the previous one)
of an unfolded run is run by :class:`_RingRun`: its messages are matched by two counters per key
instead of the :class:`~simcore.emulator.network.messaging.Messenger` (the k-th message of a key
meets the k-th receive, as there; messages of one key arrive in the order they were sent on
both networks), when no workload send/recv uses the same key. It schedules exactly the events
the general path does, at the same times and in the same order, so results are unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from heapq import heappush
from typing import TYPE_CHECKING, Any

from simcore.emulator.custom import CustomRun
from simcore.emulator.network.aware import AwareNetwork, Link
from simcore.emulator.network.unaware import UnawareNetwork
from simcore.emulator.plan import Phase, chunk_sizes, phases_for
from simcore.errors import InputError
from simcore.network.collectives import Step, astra_algorithm

if TYPE_CHECKING:
    from simcore.emulator.context import AstraContext

__all__ = ["SystemLayer"]

_LANES: dict[tuple[Any, ...], list[list[Step]]] = {}  # lanes by (algorithm, ..., chunk parity)
_DELAYS: dict[tuple[Any, ...], list[list[int]]] = {}  # per lane and step: arrival -> next step (ns)
_GROUP_STRIDE = 1 << 20  # stream tag = per-group stream index * stride + the group's tag
_RING_ALGORITHMS = frozenset({"ring", "oneRing"})


class _Collective:
    __slots__ = ("arg", "left", "on_done")

    def __init__(self, streams: int, on_done: Callable[[Any], None], arg: Any) -> None:
        self.left = streams
        self.on_done = on_done
        self.arg = arg


class _Stream:
    __slots__ = ("chunk", "coll", "initialized", "phase", "phases", "priority", "tag")

    def __init__(self, tag: int, priority: int, phases: list[Phase], coll: _Collective, chunk: int) -> None:
        self.tag = tag
        self.priority = priority
        self.phases = phases
        self.phase = -1
        self.initialized = False
        self.coll = coll
        self.chunk = chunk


class _PhaseRun:
    """The lanes of one stream's current phase on this NPU."""

    __slots__ = ("delays", "lanes", "left", "pending", "phase", "stream")

    def __init__(self, stream: _Stream, phase: Phase, lanes: list[list[Step]], delays: list[list[int]]) -> None:
        self.stream = stream
        self.phase = phase
        self.lanes = lanes
        self.delays = delays  # per lane, per step: the delay from its last arrival to the next step (ns)
        self.left = len(lanes)
        self.pending = [0] * len(lanes)


class _Inbox:
    """Ring-phase messages of one key (tag, src, dst, size): sent, arrived and received counts.

    The k-th receive posted meets the k-th message to arrive; ``waiter`` is the run whose receive
    is posted and not yet met (a ring rank has at most one receive open per key).
    """

    __slots__ = ("arrived", "posted", "waiter")

    def __init__(self) -> None:
        self.arrived = 0
        self.posted = 0
        self.waiter: _RingRun | None = None


class _RingRun:
    """One NPU's ring phase: ``steps`` steps, each one message out and one in."""

    __slots__ = ("delays", "dst", "events", "inbox", "inject", "k", "nbytes", "outbox", "route", "step", "steps",
                 "stream", "wire_ns")

    def __init__(self, stream: _Stream, layer: SystemLayer, steps: int, delays: list[int], dst: int, nbytes: int,
                 wire_ns: int, route: list[Link] | None, inbox: _Inbox, outbox: _Inbox) -> None:
        self.stream = stream
        self.steps = steps
        self.delays = delays  # per step: the delay from its arrival to the next step (ns)
        self.dst = dst
        self.nbytes = nbytes
        self.wire_ns = wire_ns  # the message's fixed delay (congestion-unaware), -1: ask the network
        self.route = route  # its links (congestion-aware), None: ask the network
        network = layer.ctx.messenger.network
        self.inject = network.inject if route is not None and isinstance(network, AwareNetwork) else None
        self.inbox = inbox
        self.outbox = outbox
        self.k = 0
        self.events = layer.ctx.events
        self.step = layer._ring_step


def _ring_arrive(box: _Inbox) -> None:
    """A ring message reached its destination: meet the open receive, if any."""
    arrived = box.arrived + 1
    box.arrived = arrived
    run = box.waiter
    if run is not None and arrived >= box.posted:
        box.waiter = None
        k = run.k
        run.k = k + 1
        events = run.events
        due = events.now_ns + run.delays[k]
        bucket = events.buckets.get(due)
        if bucket is None:
            events.buckets[due] = [run.step, run]
            heappush(events.times, due)
        else:
            bucket.append(run.step)
            bucket.append(run)


class SystemLayer:
    """Collectives of one NPU (in a symmetry-reduced run: of one representative NPU)."""

    def __init__(self, npu: int, ctx: AstraContext) -> None:
        self.npu = npu
        self.ctx = ctx
        self.spec = ctx.system
        self._priority_counter = 0
        self._queues: dict[int, list[_Stream]] = {}
        self._running: dict[int, int] = {}
        self._threshold = self.spec.active_chunks_per_dimension  # one queue per dimension
        self._group_streams: dict[tuple[int, ...] | None, int] = {}  # streams created per group
        self._rep, self._messenger, self._events = ctx.rep, ctx.messenger, ctx.events  # hot-path lookups
        # chunk plans per (comm, size, group, involved), and per (id of a cached Phase, chunk parity) what
        # starting it needs: a collective repeats the same phases many times in a trace
        self._plans: dict[tuple[Any, ...], list[list[Phase]]] = {}
        self._group_keys: dict[tuple[int, ...] | None, tuple[tuple[int, ...] | None, int]] = {}  # -> (key, tag)
        self._prepared: dict[tuple[int, int], tuple[int, list[list[Step]], list[list[int]], tuple[Any, ...] | None]] = {}

    # ----------------------------------------------------------------- collectives
    def generate(self, comm: str, size: int, group: tuple[int, ...] | None, involved: tuple[bool, ...] | None,
                 explicit_priority: int, on_done: Callable[[Any], None], arg: Any, custom: str | None = None
                 ) -> None:
        """Start a collective; ``on_done(arg)`` runs when every chunk has finished.

        ``custom`` is the path prefix of a custom algorithm (one stream, no chunking).
        """
        total = len(group) if group is not None else self.ctx.topology.npus
        plans: list[list[Phase]]
        if custom is not None:
            members = group if group is not None else tuple(range(self.ctx.topology.npus))
            plans = [[Phase(comm, members, "custom", 0, size, 0, 0, custom)]]
        else:
            plan_key = (comm, size, group, involved)
            cached = self._plans.get(plan_key)
            if cached is None:
                chunks = chunk_sizes(comm, size, self.spec.preferred_dataset_splits, total)
                cached = [phases_for(self.spec, self.ctx.topology, self.npu, comm, c, group, involved) for c in chunks]
                cached = self._plans[plan_key] = [p for p in cached if p]
            plans = cached
        if not plans:
            self.ctx.events.after(0, on_done, arg)
            return
        policy = self.spec.scheduling_policy
        if policy == "LIFO":
            priority = self._priority_counter
            self._priority_counter += 1
        elif policy == "FIFO":
            priority = self._priority_counter
            self._priority_counter -= 1
        else:
            priority = explicit_priority
        coll = _Collective(len(plans), on_done, arg)
        tagged = self._group_keys.get(group)
        if tagged is None:
            rep = self.ctx.rep  # a folded run tags by the representatives' group (the same on each end)
            key = tuple(rep[m] for m in group) if group is not None and len(group) < self.ctx.topology.npus else None
            tagged = self._group_keys[group] = (key, self.ctx.group_tag(key))
        key, gid = tagged
        base = self._group_streams.get(key, 0)
        self._group_streams[key] = base + len(plans)
        for k, phases in enumerate(plans):
            stream = _Stream((base + k) * _GROUP_STRIDE + gid, priority, phases, coll, k)
            self._advance(stream)

    def _insert(self, queue: list[_Stream], stream: _Stream) -> None:
        pos = 0
        while pos < len(queue) and (queue[pos].initialized or queue[pos].priority >= stream.priority):
            pos += 1
        queue.insert(pos, stream)

    def _advance(self, stream: _Stream) -> None:
        """Move ``stream`` to its next phase (``proceed_to_next_vnet_baseline``).

        After its last phase the collective is told first (``notify_stream_finished``), while the
        stream is still in its queue, running and counted: the callback may issue the next
        collective at once, and its streams queue behind this one, so ``_fill`` indexing the queue
        by the running count starts the right ones (ASTRA-sim's scheduler unit starts streams from
        ``begin() + running_streams`` and erases the finished stream only after the callback).
        Then the stream leaves the queue and its slot is refilled.
        """
        phase = stream.phase
        previous = stream.phases[phase].queue if phase >= 0 else -1
        if phase + 1 == len(stream.phases):
            coll = stream.coll
            coll.left -= 1
            if coll.left == 0:
                coll.on_done(coll.arg)
            stream.phase = phase + 1
            stream.initialized = False
            self._queues[previous].remove(stream)
            self._running[previous] -= 1
            self._fill(previous)
            return
        if previous >= 0:
            self._queues[previous].remove(stream)
        stream.phase = phase + 1
        stream.initialized = False
        queue_id = stream.phases[phase + 1].queue
        self._insert(self._queues.setdefault(queue_id, []), stream)
        self._fill(queue_id)
        if previous >= 0:
            self._running[previous] -= 1
            self._fill(previous)

    def _fill(self, queue_id: int) -> None:
        queue = self._queues[queue_id]
        running = self._running.get(queue_id, 0)
        while running < self._threshold and running < len(queue):
            self._start_phase(queue[running])  # only schedules events: the queue stays as it is
            running += 1
        self._running[queue_id] = running

    # ----------------------------------------------------------------- phase execution
    def _start_phase(self, stream: _Stream) -> None:
        stream.initialized = True
        phase = stream.phases[stream.phase]
        parity = stream.chunk % 2
        prepared = self._prepared.get((id(phase), parity)) if phase.custom is None else None
        if prepared is None:
            if self.npu not in phase.members:
                raise InputError(f"npu {self.npu}", list(phase.members), "issues a collective of a group it is not in")
            pos = phase.members.index(self.npu)
            if phase.custom is not None:
                program = self.ctx.load_custom(phase.custom, pos)
                CustomRun(self, program, phase.members, stream.tag, lambda: self._advance(stream)).start()
                return
            prepared = self._prepare(phase, pos, parity)
        _, lanes, delays, ring = prepared
        if ring is not None and self._ring(stream, phase, ring, len(lanes[0]), delays[0]):
            return
        run = _PhaseRun(stream, phase, lanes, delays)
        for lane in range(len(lanes)):
            self.ctx.events.after(phase.transfer_delay_ns, self._step, (run, lane, 0))

    def _prepare(self, phase: Phase, pos: int, parity: int
                 ) -> tuple[int, list[list[Step]], list[list[int]], tuple[Any, ...] | None]:
        """Lanes and step delays of ``phase`` at ``pos``; for a ring phase of an unfolded run, also
        (next member, previous member, message bytes, fixed wire delay or -1). Cached per phase object
        (the plans that hold it are cached too, so its id stays unique)."""
        key = (phase.algorithm, phase.window, phase.comm, len(phase.members), pos, phase.size, parity)
        lanes = _LANES.get(key)
        if lanes is None:  # steps are immutable: one list per distinct phase shape is shared
            lanes = _LANES[key] = astra_algorithm(phase.algorithm).lanes(
                phase.comm, len(phase.members), pos, phase.size, parity, phase.window)
        delays_key = (key, phase.transfer_delay_ns, self.spec.local_mem_bw_GBps)
        delays = _DELAYS.get(delays_key)
        if delays is None:
            delays = _DELAYS[delays_key] = [
                [phase.transfer_delay_ns + (3 * self.reduction_ns(step.nbytes) if step.reduce else 0) for step in lane]
                for lane in lanes]
        ring = None
        ctx = self.ctx
        if (phase.algorithm in _RING_ALGORITHMS and ctx.p2p_keys is not None and ctx.identity and len(lanes) == 1
                and lanes[0]):
            first = lanes[0][0]
            dst, src, nbytes = phase.members[first.send_to[0]], phase.members[first.recv_from[0]], first.nbytes
            network = self._messenger.network
            wire = network.delay_ns(self.npu, dst, nbytes) if type(network) is UnawareNetwork else -1
            route = network.route(self.npu, dst) if type(network) is AwareNetwork else None
            ring = (dst, src, nbytes, wire, route or None)
        prepared = (pos, lanes, delays, ring)
        if phase.custom is None:
            self._prepared[(id(phase), parity)] = prepared
        return prepared

    def _ring(self, stream: _Stream, phase: Phase, ring: tuple[Any, ...], steps: int, delays: list[int]) -> bool:
        """Start ``phase`` as a :class:`_RingRun` unless a workload send/recv shares its keys."""
        dst, src, nbytes, wire, route = ring
        npu, tag = self.npu, stream.tag
        send_key, recv_key = (tag, npu, dst, nbytes), (tag, src, npu, nbytes)
        if tag in self.ctx.p2p_tags:
            keys = self.ctx.p2p_keys
            if keys and (send_key in keys or recv_key in keys):
                return False
        inboxes = self.ctx.inboxes
        outbox = inboxes.get(send_key)
        if outbox is None:
            outbox = inboxes[send_key] = _Inbox()
        inbox = inboxes.get(recv_key)
        if inbox is None:
            inbox = inboxes[recv_key] = _Inbox()
        run = _RingRun(stream, self, steps, delays, dst, nbytes, wire, route, inbox, outbox)
        self._events.after(phase.transfer_delay_ns, self._ring_step, run)
        return True

    def _ring_step(self, run: _RingRun) -> None:
        """Step ``run.k`` of a ring phase: send to the next member, receive from the previous one.

        Events are appended to the queue inline, as :meth:`EventQueue.after` would.
        """
        k = run.k
        if k == run.steps:
            self._advance(run.stream)
            return
        events = self._events
        buckets = events.buckets
        wire = run.wire_ns
        if wire >= 0:
            due = events.now_ns + wire
            bucket = buckets.get(due)
            if bucket is None:
                buckets[due] = [_ring_arrive, run.outbox]
                heappush(events.times, due)
            else:
                bucket.append(_ring_arrive)
                bucket.append(run.outbox)
        elif run.inject is not None and run.route is not None:
            run.inject(run.route, run.nbytes, _ring_arrive, run.outbox)
        else:
            self._messenger.network.send(self.npu, run.dst, run.nbytes, _ring_arrive, run.outbox)
        box = run.inbox
        posted = box.posted + 1
        box.posted = posted
        if box.arrived >= posted:
            run.k = k + 1
            due = events.now_ns + run.delays[k]
            bucket = buckets.get(due)
            if bucket is None:
                buckets[due] = [run.step, run]
                heappush(events.times, due)
            else:
                bucket.append(run.step)
                bucket.append(run)
        else:
            box.waiter = run

    def _step(self, state: tuple[_PhaseRun, int, int]) -> None:
        run, lane, k = state
        steps = run.lanes[lane]
        if k == len(steps):
            run.left -= 1
            if run.left == 0:
                self._advance(run.stream)
            return
        step = steps[k]
        members, tag, nbytes = run.phase.members, run.stream.tag, step.nbytes
        rep, messenger, npu = self._rep, self._messenger, self.npu
        for peer in step.send_to:
            real = members[peer]
            messenger.send(npu, rep[real], tag, nbytes, None, None, real)
        recv_from = step.recv_from
        if not recv_from:
            self._after_step(state)
            return
        run.pending[lane] = len(recv_from)
        received = self._received
        for peer in recv_from:
            messenger.recv(rep[members[peer]], npu, tag, nbytes, received, state)

    def _received(self, state: tuple[_PhaseRun, int, int]) -> None:
        run, lane, k = state
        pending = run.pending
        pending[lane] -= 1
        if pending[lane] == 0:
            self._events.after(run.delays[lane][k], self._step, (run, lane, k + 1))

    def _after_step(self, state: tuple[_PhaseRun, int, int]) -> None:
        run, lane, k = state
        self._events.after(run.delays[lane][k], self._step, (run, lane, k + 1))

    def reduction_ns(self, nbytes: int) -> int:
        """One memory pass over ``nbytes`` at local-mem-bw (decimal GB/s), floored (``Sys::mem_read``)."""
        if self.spec.local_mem_bw_GBps <= 0:
            raise InputError("local-mem-bw", 0, "must be > 0 when a collective reduces data")
        return int(nbytes / (self.spec.local_mem_bw_GBps * 1e9) * 1e9)
