"""Native collective algorithms written out as custom-collective Chakra ET graphs (one per rank).

Each algorithm is the message pattern of ASTRA-sim's native implementation (reference/
astra-sim-and-chakra.md §1.4, notation n ranks, D bytes):
- ``ring`` all-reduce: n-1 reduce-scatter steps then n-1 all-gather steps, each a message of
  D/n to the clockwise neighbour; the next step's send waits for the previous receive (and its
  reduction). Reduce-scatter / all-gather alone are the first / second half (all-gather's
  input is one shard, so its messages are D, the ASTRA-sim semantics of ``comm_size``).
- ``direct``: every rank sends its D/n shard to each peer at once (reduce-scatter), then
  sends the reduced shard to each peer (all-gather).
- ``halvingDoubling`` (n a power of two): log2 n steps with the peer at distance 1, 2, 4, ...
  (rank XOR 2^k), messages D/2, D/4, ... then back up.
- ``doubleBinaryTree``: two binary trees over the ranks (the second mirrored), each carrying
  half of the data: reduce to the root, then broadcast down.
A reduction after a receive is a COMP node of ``reduce_micros`` (ASTRA-sim runs a COMP node of
duration t as t*1000 ns, or 1 ns if t = 0); an optional per-step delay (``step_micros``, the
native algorithms' endpoint delay before the first step and after each step, §1.3) is added to
it, or is a COMP node of its own after a non-reducing receive. Sends and receives carry ``comm_size``,
``comm_dst``/``comm_src`` and a ``comm_tag`` that matches each send with its receive, the
shape of the graphs the MSCCL converter writes (§4.4). Ranks are positions in the
communicator; the file for rank r is ``<prefix>.<r>.et`` (§1.4, custom collectives).
"""

from __future__ import annotations

from collections.abc import Callable

from simcore.errors import InputError
from simcore.traces.chakra.build import EtTraceBuilder
from simcore.traces.chakra.export import write_traces as write_collective  # <prefix>.<rank>.et
from simcore.traces.chakra.schema import NodeType
from simcore.traces.chakra.trace import EtTrace

__all__ = ["ALGORITHMS", "RankGraph", "build_collective", "write_collective"]


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


def _ring(n: int, size: int, reduce_micros: int, phases: str, step_micros: int = 0) -> list[RankGraph]:
    out = []
    for r in range(n):
        g = RankGraph(r, reduce_micros, step_micros)
        right, left = (r + 1) % n, (r - 1) % n
        last, last_recv, tag = g.start(), -1, 0
        if "rs" in phases:
            for _ in range(n - 1):
                g.send(right, size // n, tag, [last])
                last_recv = g.recv(left, size // n, tag, [last_recv])
                last = g.settle(last_recv, size // n, True)
                tag += 1
        if "ag" in phases:
            msg = size if phases == "ag" else size // n
            for _ in range(n - 1):
                g.send(right, msg, tag, [last])
                last_recv = g.recv(left, msg, tag, [last_recv])
                last = g.settle(last_recv, msg, False)
                tag += 1
        out.append(g)
    return out


def _direct(n: int, size: int, reduce_micros: int, phases: str, step_micros: int = 0) -> list[RankGraph]:
    out = []
    for r in range(n):
        g = RankGraph(r, reduce_micros)
        peers = [(r + k) % n for k in range(1, n)]
        reduced: list[int] = []
        if "rs" in phases:
            for p in peers:
                g.send(p, size // n, 0, [])
            for p in peers:
                reduced.append(g.reduce([g.recv(p, size // n, 0, [])], size // n))
        if "ag" in phases:
            msg = size if phases == "ag" else size // n
            for p in peers:
                g.send(p, msg, 1, reduced)
            for p in peers:
                g.recv(p, msg, 1, [])
        out.append(g)
    return out


def _halving_doubling(n: int, size: int, reduce_micros: int, phases: str, step_micros: int = 0) -> list[RankGraph]:
    steps = n.bit_length() - 1
    if n != 1 << steps:
        raise InputError("collective.num_ranks", n, "halvingDoubling needs a power of two")
    out = []
    for r in range(n):
        g = RankGraph(r, reduce_micros, step_micros)
        last, tag, msg = g.start(), 0, size
        if "rs" in phases:
            for k in range(steps):
                msg //= 2
                g.send(r ^ (1 << k), msg, tag, [last])
                last = g.settle(g.recv(r ^ (1 << k), msg, tag, [last]), msg, True)
                tag += 1
        if "ag" in phases:
            if phases == "ag":
                msg = size
            for k in reversed(range(steps)):
                g.send(r ^ (1 << k), msg, tag, [last])
                last = g.settle(g.recv(r ^ (1 << k), msg, tag, [last]), msg, False)
                msg *= 2
                tag += 1
        out.append(g)
    return out


def _tree_links(n: int, mirrored: bool) -> tuple[list[int], list[list[int]]]:
    """Parent (-1 for the root) and children of each rank in a heap-ordered binary tree."""
    order = list(range(n))[::-1] if mirrored else list(range(n))
    parent = [-1] * n
    children: list[list[int]] = [[] for _ in range(n)]
    for pos in range(1, n):
        child, par = order[pos], order[(pos - 1) // 2]
        parent[child] = par
        children[par].append(child)
    return parent, children


def _double_binary_tree(n: int, size: int, reduce_micros: int, phases: str, step_micros: int = 0) -> list[RankGraph]:
    if phases != "rs+ag":
        raise InputError("collective", phases, "doubleBinaryTree implements all-reduce only")
    graphs = [RankGraph(r, reduce_micros) for r in range(n)]
    half = size // 2
    for t, mirrored in enumerate((False, True)):
        parent, children = _tree_links(n, mirrored)
        for r, g in enumerate(graphs):
            reduced = [g.reduce([g.recv(c, half, 2 * t, [])], half) for c in children[r]]
            if parent[r] >= 0:
                g.send(parent[r], half, 2 * t, reduced)
                got = [g.recv(parent[r], half, 2 * t + 1, [])]
            else:
                got = reduced
            for c in children[r]:
                g.send(c, half, 2 * t + 1, got)
    return graphs


_PHASES = {"all_reduce": "rs+ag", "reduce_scatter": "rs", "all_gather": "ag"}
ALGORITHMS: dict[str, Callable[[int, int, int, str, int], list[RankGraph]]] = {
    "ring": _ring,
    "direct": _direct,
    "halvingDoubling": _halving_doubling,
    "doubleBinaryTree": _double_binary_tree,
}


def build_collective(
    algorithm: str, collective: str, num_ranks: int, size_bytes: int, reduce_micros: int = 0,
    step_micros: int = 0,
) -> list[EtTrace]:
    """Per-rank ET graphs of ``algorithm`` for ``collective`` over ``num_ranks`` ranks.

    Args:
        algorithm: a key of :data:`ALGORITHMS` (ASTRA-sim config strings).
        collective: ``all_reduce``, ``reduce_scatter`` or ``all_gather``.
        num_ranks: n >= 2.
        size_bytes: D, the collective's size as ASTRA-sim's ``comm_size`` (all-gather: per rank).
        reduce_micros: duration of each reduction COMP node.
        step_micros: a per-step system-layer delay (ASTRA-sim's endpoint delay: once before
            the first step and after every receive), added as COMP nodes; ring and
            halvingDoubling only (0 = none).

    Raises:
        InputError: unknown algorithm/collective, n < 2, or D not divisible as needed.
    """
    if algorithm not in ALGORITHMS:
        raise InputError("collective.algorithm", algorithm, f"must be one of {sorted(ALGORITHMS)}")
    if collective not in _PHASES:
        raise InputError("collective.type", collective, f"must be one of {sorted(_PHASES)}")
    if num_ranks < 2:
        raise InputError("collective.num_ranks", num_ranks, "needs at least 2 ranks")
    divisor = 2 if algorithm == "doubleBinaryTree" else num_ranks
    if size_bytes <= 0 or (collective != "all_gather" and size_bytes % divisor):
        raise InputError("collective.size_bytes", size_bytes, f"must be a positive multiple of {divisor}")
    if step_micros and algorithm not in ("ring", "halvingDoubling"):
        raise InputError("collective.step_micros", step_micros, "only ring and halvingDoubling have steps")
    graphs = ALGORITHMS[algorithm](num_ranks, size_bytes, reduce_micros, _PHASES[collective], step_micros)
    return [g.builder.build(path=f"rank {g.rank}") for g in graphs]
