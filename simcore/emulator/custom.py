"""Custom collectives: run an algorithm given as one Chakra ET graph per rank (reference §1.4).

``CustomAlgorithm.cc``: the whole collective is one stream (no chunking); this rank's graph
``<prefix>.<pos_in_comm>.et`` is walked with every dependency-free node issued at once:
COMM_SEND -> send ``comm_size`` bytes to ``comm_dst``, COMM_RECV -> receive from ``comm_src``,
COMP -> ``duration_micros * 1000`` ns (1 ns if 0), anything else finishes at once. The
algorithm's own ``comm_size`` is used (the workload node's is ignored); algorithm ranks are
positions in the communicator group and are mapped to real NPUs through it. Messages are
matched on the node's ``comm_tag`` offset by the stream id, so that two custom collectives in a
row cannot exchange messages.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from simcore.emulator.program import NodeType, RankProgram

if TYPE_CHECKING:
    from simcore.emulator.system import SystemLayer

__all__ = ["CustomRun"]

TAG_STRIDE = 1 << 32


class CustomRun:
    """One rank's walk of a custom-collective graph; ``on_done()`` when every node finished."""

    def __init__(self, system: SystemLayer, program: RankProgram, members: tuple[int, ...], stream_tag: int,
                 on_done: Callable[[], None]) -> None:
        self.system = system
        self.program = program
        self.members = members
        self.tag_base = stream_tag * TAG_STRIDE
        self.on_done = on_done
        self.left = program.num_nodes
        self.pending = (program.parents_ptr[1:] - program.parents_ptr[:-1]).tolist()
        cptr, cidx = program.children()
        self.cptr, self.cidx = cptr.tolist(), cidx.tolist()
        self.types = program.types.tolist()
        self.size = program.attr("comm_size").tolist()
        self.tag = program.attr("comm_tag").tolist()

    def start(self) -> None:
        """Issue the roots (or finish at once for an empty graph)."""
        if self.left == 0:
            self.on_done()
            return
        for i, p in enumerate(self.pending):
            if p == 0:
                self._issue(i)

    def _peer(self, i: int, name: str) -> int:
        from simcore.errors import InputError

        pos = int(self.program.attr(name)[i])
        if not 0 <= pos < len(self.members):
            raise InputError(f"{self.program.source}:node {int(self.program.ids[i])}:{name}", pos,
                             f"must be a rank of the {len(self.members)}-NPU communicator")
        return self.members[pos]

    def _issue(self, i: int) -> None:
        sys = self.system
        kind = self.types[i]
        tag = self.tag_base + max(self.tag[i], 0)
        size = max(self.size[i], 0)
        if kind == NodeType.SEND:
            peer = self._peer(i, "comm_dst")
            sys.ctx.messenger.send(sys.npu, sys.ctx.rep[peer], tag, size, self._finish, i, route_dst=peer)
        elif kind == NodeType.RECV:
            peer = self._peer(i, "comm_src")
            sys.ctx.messenger.recv(sys.ctx.rep[peer], sys.npu, tag, size, self._finish, i)
        elif kind == NodeType.COMP:
            duration = int(self.program.duration_us[i])
            sys.ctx.events.after(duration * 1000 if duration > 0 else 1, self._finish, i)
        else:
            self._finish(i)

    def _finish(self, i: Any) -> None:
        self.left -= 1
        if self.left == 0:  # the last node: every child has finished already
            self.on_done()
            return
        for k in range(self.cptr[i], self.cptr[i + 1]):  # a child may finish re-entrantly here
            c = self.cidx[k]
            self.pending[c] -= 1
            if self.pending[c] == 0:
                self._issue(c)
