"""Native collective algorithms as per-rank step programs (reference §1.3-§1.4).

Each algorithm turns one collective phase on a logical ring of ``n`` members (this rank at
position ``pos``) with input ``D`` bytes into *lanes* of *steps*. A step posts its sends and
receives together; when all its receives have arrived the rank spends the NPU<->MA transfer
delay (``endpoint-delay``, 10 cycles on a comm-group ring) plus, on reducing steps, the
reduction cost 3 * floor(msg / local-mem-bw) (``PacketBundle::call``), then starts the next
step. A lane begins with one transfer delay (the zero-latency packet of ``Ring::insert_packet``).
This is exactly ASTRA-sim's ``Ring``: AR = 2(n-1) steps of D/n, the first n-1 reducing; RS =
n-1 reducing steps of D/n; AG = n-1 steps of D (``comm_size`` of an all-gather is the per-rank
input); A2A = n(n-1)/2 steps of D/n to the neighbour. ``direct``/``directN`` (``AllToAll.cc``)
runs ``window`` lanes, each message to a different peer, an all-reduce as a reduce-scatter round
then an all-gather round; ``halvingDoubling`` exchanges with partners at distance 1, 2, 4, ...
(halving sizes while reducing, doubling while gathering); ``doubleBinaryTree`` reduces up a
binary tree and broadcasts down it, the tree mirrored on odd chunks; like ASTRA-sim's
``DoubleBinaryTreeAllReduce`` it does so whatever phase it is asked for (its output is its input). The last three keep
ASTRA-sim's message counts and sizes; their step timing is this model's (no golden numbers).
"""

from __future__ import annotations

from dataclasses import dataclass

from simcore.errors import InputError

__all__ = ["Step", "final_size", "lanes_for"]

AR, AG, RS, A2A = "all_reduce", "all_gather", "reduce_scatter", "all_to_all"


@dataclass(frozen=True)
class Step:
    """Send ``nbytes`` to each position in ``send_to``, receive as much from each in ``recv_from``."""

    send_to: tuple[int, ...]
    recv_from: tuple[int, ...]
    nbytes: int
    reduce: bool


def final_size(comm: str, size: int, n: int, algorithm: str = "ring") -> int:
    """Bytes a phase hands to the next phase (``final_data_size`` of the algorithm)."""
    if algorithm.endswith("oubleBinaryTree"):
        return size
    if comm == AG:
        return size * n
    if comm == RS:
        return size // n
    return size


def _ring(comm: str, n: int, pos: int, size: int) -> list[list[Step]]:
    nxt, prv = (pos + 1) % n, (pos - 1) % n
    if comm == AR:
        msg = size // n
        return [[Step((nxt,), (prv,), msg, k < n - 1) for k in range(2 * (n - 1))]]
    if comm == AG:
        return [[Step((nxt,), (prv,), size, False) for _ in range(n - 1)]]
    if comm == RS:
        return [[Step((nxt,), (prv,), size // n, True) for _ in range(n - 1)]]
    return [[Step((nxt,), (prv,), size // n, False) for _ in range(n * (n - 1) // 2)]]


def _direct(comm: str, n: int, pos: int, size: int, window: int) -> list[list[Step]]:
    lanes = max(1, min(window if window > 0 else n - 1, n - 1))
    rounds = [(RS, size // n, True), (AG, size // n, False)] if comm == AR else [
        (comm, size if comm == AG else size // n, comm == RS)
    ]
    out: list[list[Step]] = [[] for _ in range(lanes)]
    for _, msg, reduce in rounds:
        for k in range(1, n):
            out[(k - 1) % lanes].append(Step(((pos + k) % n,), ((pos - k) % n,), msg, reduce))
    return out


def _halving_doubling(comm: str, n: int, pos: int, size: int) -> list[list[Step]]:
    if n & (n - 1):
        raise InputError("halvingDoubling", n, "needs a power-of-two number of NPUs in the dimension")
    distances = [1 << k for k in range(n.bit_length() - 1)]

    def partner(d: int) -> int:
        return pos + d if (pos // d) % 2 == 0 else pos - d

    steps: list[Step] = []
    if comm in (AR, RS):
        msg = size
        for d in distances:
            msg //= 2
            steps.append(Step((partner(d),), (partner(d),), msg, True))
        if comm == AR:
            for d in reversed(distances):
                steps.append(Step((partner(d),), (partner(d),), msg, False))
                msg *= 2
    elif comm == AG:
        msg = size
        for d in reversed(distances):
            steps.append(Step((partner(d),), (partner(d),), msg, False))
            msg *= 2
    else:
        raise InputError("halvingDoubling", comm, "supports all-reduce, reduce-scatter and all-gather only")
    return [steps]


def _double_binary_tree(n: int, pos: int, size: int, mirror: bool) -> list[list[Step]]:
    node = n - 1 - pos if mirror else pos

    def real(p: int) -> int:
        return n - 1 - p if mirror else p

    kids = tuple(real(c) for c in (2 * node + 1, 2 * node + 2) if c < n)
    steps: list[Step] = []
    if kids:
        steps.append(Step((), kids, size, True))
    if node > 0:
        parent = real((node - 1) // 2)
        steps.append(Step((parent,), (parent,), size, False))
    if kids:
        steps.append(Step(kids, (), size, False))
    return [steps]


def lanes_for(algorithm: str, window: int, comm: str, n: int, pos: int, size: int, chunk: int) -> list[list[Step]]:
    """Lanes of steps of one phase; positions are indices on the phase's logical ring."""
    base = algorithm[3].lower() + algorithm[4:] if algorithm.startswith("one") else algorithm
    if base == "ring":
        return _ring(comm, n, pos, size)
    if base == "direct":
        return _direct(comm, n, pos, size, window)
    if base == "halvingDoubling":
        return _halving_doubling(comm, n, pos, size)
    if base == "doubleBinaryTree":
        return _double_binary_tree(n, pos, size, chunk % 2 == 1)
    raise InputError("implementation", algorithm, "unknown native collective algorithm")
