"""Shared state of one ASTRA-sim-compatible run: clock, network, message matching, configs.

``rep[npu]`` is the NPU that stands for ``npu`` in a symmetry-reduced run (identity otherwise);
messages are matched between representatives while the network still costs the real route.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from simcore.emulator.network import BACKENDS
from simcore.emulator.network.event_queue import EventQueue
from simcore.emulator.network.messaging import Messenger
from simcore.emulator.network.topology import Topology
from simcore.emulator.program import RankProgram
from simcore.emulator.specs import CommGroupsSpec, RemoteMemorySpec, SystemSpec

__all__ = ["AstraContext", "make_context"]


@dataclass
class AstraContext:
    """Everything the workload and system layers of all simulated NPUs share."""

    system: SystemSpec
    topology: Topology
    events: EventQueue
    messenger: Messenger
    rep: list[int]
    groups: CommGroupsSpec = field(default_factory=CommGroupsSpec)
    remote_memory: RemoteMemorySpec = field(default_factory=RemoteMemorySpec)
    backend: str = "unaware"
    memory_free_at_ns: dict[int, int] = field(default_factory=dict)
    custom_programs: dict[tuple[str, int], RankProgram] = field(default_factory=dict)
    custom_loader: Callable[[str, int], RankProgram] | None = None
    group_tags: dict[tuple[int, ...] | None, int] = field(default_factory=lambda: {None: 0})
    # (tag, src, dst, size) of every workload send/recv, when known: a ring phase whose messages
    # can share a key with none of them is matched by counters (simcore.emulator.system._Inbox)
    identity: bool = False  # nothing folded: rep[npu] == npu for every NPU
    p2p_keys: frozenset[tuple[int, int, int, int]] | None = None
    p2p_tags: frozenset[int] = frozenset()  # the tags of p2p_keys
    inboxes: dict[tuple[int, int, int, int], Any] = field(default_factory=dict)

    def group_tag(self, members: tuple[int, ...] | None) -> int:
        """A small id for a communicator group (by its members; None = all NPUs), the same on every NPU."""
        tag = self.group_tags.get(members)
        if tag is None:
            tag = self.group_tags[members] = len(self.group_tags)
        return tag

    def load_custom(self, prefix: str, pos: int) -> RankProgram:
        """Rank ``pos``'s graph of the custom algorithm ``prefix`` (``<prefix>.<pos>.et``), cached."""
        key = (prefix, pos)
        program = self.custom_programs.get(key)
        if program is None and self.custom_loader is not None:
            program = self.custom_loader(prefix, pos)
        if program is None:
            from simcore.emulator.load import program_from_trace
            from simcore.emulator.program import check_acyclic
            from simcore.traces.chakra.et import read_trace

            program = program_from_trace(read_trace(f"{prefix}.{pos}.et"))
            check_acyclic(program)
            self.custom_programs[key] = program
        return program


def make_context(system: SystemSpec, topology: Topology, backend: str, rep: list[int] | None = None,
                 groups: CommGroupsSpec | None = None, remote_memory: RemoteMemorySpec | None = None
                 ) -> AstraContext:
    """A fresh context; ``rep`` folds NPUs onto representatives (identity if None)."""
    events = EventQueue()
    reps = list(range(topology.npus)) if rep is None else rep
    identity = reps == list(range(topology.npus))
    network = BACKENDS[backend](topology, events, None if identity else reps.__getitem__)
    return AstraContext(system, topology, events, Messenger(network), reps,
                        groups or CommGroupsSpec(), remote_memory or RemoteMemorySpec(), backend, identity=identity)
