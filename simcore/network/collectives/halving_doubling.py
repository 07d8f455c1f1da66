"""Halving-doubling: exchanges with the partner at distance 1, 2, 4, ... (n a power of two).

ASTRA-sim's ``halvingDoubling`` (reference/astra-sim-and-chakra.md §1.4), n ranks, full buffer
D: a reduce-scatter is log2 n reducing exchanges of D/2, D/4, ..., D/n with the partner
``pos XOR 2^k`` ((n-1)/n D); an all-gather is the same exchanges in reverse order with sizes
doubling from the per-rank input D/n; an all-reduce is both (2 log2 n steps, 2(n-1)/n D). It has
no all-to-all. The closed form takes ceil(log2 p) steps for any p.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from simcore.errors import InputError
from simcore.network.collectives._base import AG, AR, RS, CollectiveAlgorithm, FloatArray, Step
from simcore.network.collectives._et import RankGraph

__all__ = ["HalvingDoubling"]


class HalvingDoubling(CollectiveAlgorithm):
    """ASTRA-sim's ``halvingDoubling`` / ``oneHalvingDoubling``."""

    name: ClassVar[str] = "halvingDoubling"
    astra_names: ClassVar[tuple[str, ...]] = ("halvingDoubling", "oneHalvingDoubling")
    kinds: ClassVar[tuple[str, ...]] = (AR, RS, AG)
    et_step_delays: ClassVar[bool] = True

    def supports(self, comm: str, ranks: int | None = None) -> str | None:
        reason = super().supports(comm, ranks)
        if reason is None and ranks is not None and ranks & (ranks - 1):
            return "halvingDoubling needs a power of two number of ranks"
        return reason

    def _phase(self, kind: str, p: FloatArray, nbytes: FloatArray) -> tuple[FloatArray, FloatArray]:
        frac = (p - 1.0) / p
        log_p = np.ceil(np.log2(p))
        if kind == AR:
            return np.asarray(2.0 * log_p), np.asarray(2.0 * frac * nbytes)
        return np.asarray(log_p), np.asarray(frac * nbytes)

    def lanes(self, comm: str, n: int, pos: int, size: int, chunk: int = 0, window: int = 0
              ) -> list[list[Step]]:
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

    def _et_graph(self, comm: str, n: int, size: int, reduce_micros: int, step_micros: int
                  ) -> list[RankGraph]:
        steps = n.bit_length() - 1
        if n != 1 << steps:
            raise InputError("collective.num_ranks", n, "halvingDoubling needs a power of two")
        out = []
        for r in range(n):
            g = RankGraph(r, reduce_micros, step_micros)
            last, tag, msg = g.start(), 0, size
            if comm in (AR, RS):
                for k in range(steps):
                    msg //= 2
                    g.send(r ^ (1 << k), msg, tag, [last])
                    last = g.settle(g.recv(r ^ (1 << k), msg, tag, [last]), msg, True)
                    tag += 1
            if comm in (AR, AG):
                if comm == AG:
                    msg = size
                for k in reversed(range(steps)):
                    g.send(r ^ (1 << k), msg, tag, [last])
                    last = g.settle(g.recv(r ^ (1 << k), msg, tag, [last]), msg, False)
                    msg *= 2
                    tag += 1
            out.append(g)
        return out
