"""The node writer shared by the algorithms' custom-collective Chakra ET graphs (one per rank).

Sends and receives carry ``comm_size``, ``comm_dst``/``comm_src`` and a ``comm_tag`` that matches
each send with its receive, the shape of the graphs the MSCCL converter writes
(reference/astra-sim-and-chakra.md §4.4). A reduction after a receive is a COMP node of
``reduce_micros`` (ASTRA-sim runs a COMP node of duration t as t*1000 ns, or 1 ns if t = 0); an
optional per-step delay (``step_micros``, the native algorithms' endpoint delay before the first
step and after each step, §1.3) is added to it, or is a COMP node of its own after a
non-reducing receive. Node ids count from 0 in program order.
"""

from __future__ import annotations

from simcore.traces.chakra.build import EtTraceBuilder
from simcore.traces.chakra.schema import NodeType

__all__ = ["RankGraph"]


class RankGraph:
    """The nodes of one rank's collective graph, ids from 0 in program order."""

    def __init__(self, rank: int, reduce_micros: int, step_micros: int = 0) -> None:
        self.rank = rank
        self.reduce_micros = reduce_micros
        self.step_micros = step_micros
        self.builder = EtTraceBuilder(metadata={"schema": "1.0.2-chakra.0.0.4"})

    def _add(self, name: str, kind: NodeType, deps: list[int], micros: int = 0, **attrs: int) -> int:
        nid = len(self.builder)
        self.builder.add_node(nid, name, kind, data_deps=[d for d in deps if d >= 0],
                              attrs={"is_cpu_op": False, **attrs}, duration_micros=micros)
        return nid

    def start(self) -> int:
        """The initial per-step delay node (-1 if ``step_micros`` is 0)."""
        if not self.step_micros:
            return -1
        return self._add("step_delay", NodeType.COMP_NODE, [], self.step_micros)

    def settle(self, recv: int, size: int, reducing: bool) -> int:
        """What follows a receive: the reduction and/or the per-step delay (or the receive itself)."""
        if reducing:
            return self._add(f"reduce_{size}B", NodeType.COMP_NODE, [recv],
                             self.reduce_micros + self.step_micros, tensor_size=size)
        if self.step_micros:
            return self._add("step_delay", NodeType.COMP_NODE, [recv], self.step_micros)
        return recv

    def send(self, dst: int, size: int, tag: int, deps: list[int]) -> int:
        """A COMM_SEND of ``size`` bytes to ``dst``."""
        return self._add(f"send_to_{dst}_tag_{tag}", NodeType.COMM_SEND_NODE, deps,
                         comm_size=size, comm_src=self.rank, comm_dst=dst, comm_tag=tag)

    def recv(self, src: int, size: int, tag: int, deps: list[int]) -> int:
        """A COMM_RECV of ``size`` bytes from ``src``."""
        return self._add(f"recv_from_{src}_tag_{tag}", NodeType.COMM_RECV_NODE, deps,
                         comm_size=size, comm_src=src, comm_dst=self.rank, comm_tag=tag)

    def reduce(self, deps: list[int], size: int) -> int:
        """A COMP node (the reduction of ``size`` received bytes)."""
        return self._add(f"reduce_{size}B", NodeType.COMP_NODE, deps, self.reduce_micros, tensor_size=size)
