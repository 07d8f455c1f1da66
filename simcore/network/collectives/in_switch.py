"""In-switch reduction: each rank sends its buffer to the switch once and receives the result.

ASTRA-sim 2.0's in-network collectives / SHARP (reference/methods-hap-ace-echo.md §4): an
all-reduce on a Switch dimension with ``in_network`` puts ~D on the wire per rank instead of
2(p-1)/p D, in 2 steps (up to the switch, down from it). Its steps use position ``n`` (one past
the ranks) for the switch. Neither ASTRA-sim's native algorithms nor a Chakra ET graph (ranks
only) can express a reducing switch, so it has no ``astra_names`` and writes no ET graph; the
calibrated fidelity applies it on Switch dimensions when ``collective.in_network`` is set.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from simcore.network.collectives._base import AR, CollectiveAlgorithm, FloatArray, Step

__all__ = ["InSwitch"]


class InSwitch(CollectiveAlgorithm):
    """All-reduce reduced inside the switch of one dimension."""

    name: ClassVar[str] = "inSwitch"
    kinds: ClassVar[tuple[str, ...]] = (AR,)

    def et_supports(self, comm: str) -> str | None:
        return "a Chakra ET graph has ranks only: in-switch reduction happens in the network"

    def _phase(self, kind: str, p: FloatArray, nbytes: FloatArray) -> tuple[FloatArray, FloatArray]:
        return np.asarray(np.where(p > 1, 2.0, 0.0)), np.asarray(np.where(p > 1, nbytes, 0.0))

    def lanes(self, comm: str, n: int, pos: int, size: int, chunk: int = 0, window: int = 0
              ) -> list[list[Step]]:
        switch = n
        return [[Step((switch,), (), size, False), Step((), (switch,), size, False)]]
