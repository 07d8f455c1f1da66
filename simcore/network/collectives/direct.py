"""Direct: every rank exchanges with every peer at once (``direct`` / ``directN``).

ASTRA-sim's ``AllToAll.cc`` (reference/astra-sim-and-chakra.md §1.4), n ranks, full buffer D:
``window`` lanes in flight (default n-1), each message to a different peer; a reduce-scatter
sends the D/n shard of each peer to it (1 step, (n-1)/n D), an all-gather sends the rank's own
input (``comm_size``, D/n) to each peer (1 step, (n-1)/n D), an all-reduce is a reduce-scatter
round then an all-gather round (2 steps, 2(n-1)/n D), an all-to-all sends D/n to each peer
(1 step, (n-1)/n D). The ET graph posts all sends of a round at once; the all-gather round waits
for every reduction.
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

__all__ = ["Direct"]


class Direct(CollectiveAlgorithm):
    """ASTRA-sim's ``direct`` / ``oneDirect`` (``directN``: a window of N lanes)."""

    name: ClassVar[str] = "direct"
    astra_names: ClassVar[tuple[str, ...]] = ("direct", "oneDirect")
    kinds: ClassVar[tuple[str, ...]] = (AR, RS, AG, A2A)

    def _phase(self, kind: str, p: FloatArray, nbytes: FloatArray) -> tuple[FloatArray, FloatArray]:
        frac = (p - 1.0) / p
        if kind == AR:
            return np.asarray(np.where(p > 1, 2.0, 0.0)), np.asarray(2.0 * frac * nbytes)
        return np.asarray(np.where(p > 1, 1.0, 0.0)), np.asarray(frac * nbytes)

    def lanes(self, comm: str, n: int, pos: int, size: int, chunk: int = 0, window: int = 0
              ) -> list[list[Step]]:
        lanes = max(1, min(window if window > 0 else n - 1, n - 1))
        rounds = [(RS, size // n, True), (AG, size // n, False)] if comm == AR else [
            (comm, size if comm == AG else size // n, comm == RS)
        ]
        out: list[list[Step]] = [[] for _ in range(lanes)]
        for _, msg, reduce in rounds:
            for k in range(1, n):
                out[(k - 1) % lanes].append(Step(((pos + k) % n,), ((pos - k) % n,), msg, reduce))
        return out

    def _et_graph(self, comm: str, n: int, size: int, reduce_micros: int, step_micros: int
                  ) -> list[RankGraph]:
        out = []
        for r in range(n):
            g = RankGraph(r, reduce_micros)
            peers = [(r + k) % n for k in range(1, n)]
            reduced: list[int] = []
            if comm in (AR, RS):
                for p in peers:
                    g.send(p, size // n, 0, [])
                for p in peers:
                    reduced.append(g.reduce([g.recv(p, size // n, 0, [])], size // n))
            if comm in (AR, AG):
                msg = size if comm == AG else size // n
                for p in peers:
                    g.send(p, msg, 1, reduced)
                for p in peers:
                    g.recv(p, msg, 1, [])
            out.append(g)
        return out
