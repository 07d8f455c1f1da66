"""Ring: every step sends one message to the clockwise neighbour and receives one from the other.

ASTRA-sim's ``Ring`` (reference/astra-sim-and-chakra.md §1.3-§1.4), n ranks, full buffer D:
all-reduce = n-1 reducing steps then n-1 gathering steps, each a message of D/n (2(n-1) steps,
2(n-1)/n D on the wire per rank); reduce-scatter = the first half, all-gather = the second
(its ``comm_size`` is the per-rank input D/n, so its messages are D/n of the output); all-to-all
= n(n-1)/2 steps of D/n to the neighbour ((n-1)/2 D). The ET graph's next send waits for the
previous receive (and its reduction).
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from simcore.network.collectives._base import (
    A2A,
    AG,
    AR,
    RS,
    CollectiveAlgorithm,
    FloatArray,
    Step,
)
from simcore.network.collectives._et import RankGraph

__all__ = ["Ring", "ring_phase"]


def ring_phase(kind: str, p: FloatArray, nbytes: FloatArray) -> tuple[FloatArray, FloatArray]:
    """(steps, wire bytes) of a ring phase of ``kind`` over ``p`` ranks and a buffer of D bytes."""
    frac = (p - 1.0) / p
    if kind == AR:
        return np.asarray(2.0 * (p - 1.0)), np.asarray(2.0 * frac * nbytes)
    if kind == A2A:
        return np.asarray(p * (p - 1.0) / 2.0), np.asarray((p - 1.0) / 2.0 * nbytes)
    return np.asarray(p - 1.0), np.asarray(frac * nbytes)


def ring_lanes(comm: str, n: int, pos: int, size: int) -> list[list[Step]]:
    """The one lane of ring steps of rank ``pos``."""
    nxt, prv = (pos + 1) % n, (pos - 1) % n
    if comm == AR:
        msg = size // n
        return [[Step((nxt,), (prv,), msg, k < n - 1) for k in range(2 * (n - 1))]]
    if comm == AG:
        return [[Step((nxt,), (prv,), size, False) for _ in range(n - 1)]]
    if comm == RS:
        return [[Step((nxt,), (prv,), size // n, True) for _ in range(n - 1)]]
    return [[Step((nxt,), (prv,), size // n, False) for _ in range(n * (n - 1) // 2)]]


def ring_graphs(comm: str, n: int, size: int, reduce_micros: int, step_micros: int) -> list[RankGraph]:
    """Per-rank ring graphs of an all-reduce, reduce-scatter or all-gather."""
    out = []
    for r in range(n):
        g = RankGraph(r, reduce_micros, step_micros)
        right, left = (r + 1) % n, (r - 1) % n
        last, last_recv, tag = g.start(), -1, 0
        if comm in (AR, RS):
            for _ in range(n - 1):
                g.send(right, size // n, tag, [last])
                last_recv = g.recv(left, size // n, tag, [last_recv])
                last = g.settle(last_recv, size // n, True)
                tag += 1
        if comm in (AR, AG):
            msg = size if comm == AG else size // n
            for _ in range(n - 1):
                g.send(right, msg, tag, [last])
                last_recv = g.recv(left, msg, tag, [last_recv])
                last = g.settle(last_recv, msg, False)
                tag += 1
        out.append(g)
    return out


class Ring(CollectiveAlgorithm):
    """ASTRA-sim's ``ring`` / ``oneRing``."""

    name: ClassVar[str] = "ring"
    astra_names: ClassVar[tuple[str, ...]] = ("ring", "oneRing")
    kinds: ClassVar[tuple[str, ...]] = (AR, RS, AG, A2A)
    et_step_delays: ClassVar[bool] = True

    def _phase(self, kind: str, p: FloatArray, nbytes: FloatArray) -> tuple[FloatArray, FloatArray]:
        return ring_phase(kind, p, nbytes)

    def lanes(self, comm: str, n: int, pos: int, size: int, chunk: int = 0, window: int = 0
              ) -> list[list[Step]]:
        return ring_lanes(comm, n, pos, size)

    def _et_graph(self, comm: str, n: int, size: int, reduce_micros: int, step_micros: int
                  ) -> list[RankGraph]:
        return ring_graphs(comm, n, size, reduce_micros, step_micros)
