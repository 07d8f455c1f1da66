"""The collective-algorithm seam: one object per algorithm, three views of the same message pattern.

A :class:`CollectiveAlgorithm` describes how ``n`` ranks on one logical ring (positions
``0..n-1``) run a collective, and gives:

- ``phase(kind, members, nbytes)``: the vectorized closed form of one phase over ``members``
  ranks and a full buffer of ``nbytes`` = D (all-gather: the gathered output) as
  ``(steps, wire bytes)`` of the busiest rank; the calibrated fidelity costs it as
  ``steps * step latency + wire / bandwidth`` (:mod:`simcore.network.collectives.calibrated_algorithms`);
- ``lanes(comm, n, pos, size, chunk, window)``: the per-rank step program the ASTRA-sim emulator
  runs for one chunk (:mod:`simcore.emulator.system`); ``size`` is ASTRA-sim's ``comm_size``
  (all-gather: the per-rank input, D / n; reference/astra-sim-and-chakra.md §1.4);
- ``steps(comm, n, pos, size)``: the messages of one rank for the whole collective (the lanes
  of one chunk, in lane order; an algorithm that splits its data over mirrored chunks says so);
- ``et_graph(comm, n, size, ...)``: the same steps as custom-collective Chakra ET graphs, one
  per rank (:mod:`simcore.network.collectives.et_graphs`).

``supports(comm, ranks)`` returns why an algorithm cannot run a collective (or None); asking
an unsupported closed form or ET graph raises :class:`~simcore.errors.InputError` with it.
The contract suite ``tests/contracts/test_collective_algorithms.py`` checks, for every
registry entry, that the closed form's wire bytes are the steps' bytes, that they grow with
the size, and that the ET graph holds exactly the steps' messages.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import numpy as np
from numpy.typing import NDArray

from simcore.errors import InputError

if TYPE_CHECKING:
    from simcore.network.collectives._et import RankGraph

__all__ = ["A2A", "AG", "AR", "BROADCAST", "ET_KINDS", "KINDS", "REDUCE", "RS", "CollectiveAlgorithm",
           "FloatArray", "Step", "comm_size"]

FloatArray = NDArray[np.float64]
AR, AG, RS, A2A = "all_reduce", "all_gather", "reduce_scatter", "all_to_all"
BROADCAST, REDUCE = "broadcast", "reduce"
KINDS = (AR, RS, AG, A2A, BROADCAST, REDUCE)
ET_KINDS = (AR, RS, AG)  # the collectives written as custom-collective ET graphs


@dataclass(frozen=True)
class Step:
    """Send ``nbytes`` to each position in ``send_to``, receive as much from each in ``recv_from``."""

    send_to: tuple[int, ...]
    recv_from: tuple[int, ...]
    nbytes: int
    reduce: bool


def comm_size(kind: str, n: int, full_bytes: int) -> int:
    """ASTRA-sim's ``comm_size`` of a collective whose full buffer is ``full_bytes`` (§1.4).

    All-gather's ``comm_size`` is the per-rank input (D / n); every other kind's is D.
    """
    return full_bytes // n if kind == AG else full_bytes


class CollectiveAlgorithm(ABC):
    """One collective algorithm: closed form, emulator lanes and Chakra ET graph.

    Class attributes:
        name: the registry key (the ``conf/collective`` name).
        aliases: other ``conf/collective`` names of it.
        astra_names: ASTRA-sim ``*-implementation`` strings that select it (``one*``: one
            dimension over all NPUs; reference §1.4); empty if ASTRA-sim has no such algorithm.
        kinds: the collectives it implements.
        closed_form_min_ranks: from this many ranks the closed-form wire bytes equal the busiest
            rank's step bytes; below it they are an upper bound.
        et_step_delays: its ET graph can carry a per-step delay (``step_micros``).
    """

    name: ClassVar[str]
    aliases: ClassVar[tuple[str, ...]] = ()
    astra_names: ClassVar[tuple[str, ...]] = ()
    kinds: ClassVar[tuple[str, ...]]
    closed_form_min_ranks: ClassVar[int] = 2
    et_step_delays: ClassVar[bool] = False

    # ------------------------------------------------------------------ capabilities
    def supports(self, comm: str, ranks: int | None = None) -> str | None:
        """Why this algorithm cannot run ``comm`` over ``ranks`` ranks, or None if it can."""
        if comm not in self.kinds:
            return f"{self.name} implements {', '.join(self.kinds)} only"
        return None

    def et_supports(self, comm: str) -> str | None:
        """Why no ET graph of ``comm`` is written, or None."""
        if comm not in ET_KINDS:
            return f"custom-collective ET graphs are written for {', '.join(ET_KINDS)} only"
        return self.supports(comm)

    def et_divisor(self, n: int) -> int:
        """The ET graph's ``comm_size`` must be a multiple of this (except all-gather's)."""
        return n

    # ------------------------------------------------------------------ closed form
    def phase(self, kind: str, members: object, nbytes: object) -> tuple[FloatArray, FloatArray]:
        """(steps, wire bytes of the busiest rank) of one phase, broadcasting arrays.

        Args:
            kind: a collective of :data:`KINDS`.
            members: ranks in the phase, p (scalar or array; p <= 1 is a phase of nobody).
            nbytes: the phase's full buffer D, bytes.

        Raises:
            InputError: the algorithm does not implement ``kind``.
        """
        reason = self.supports(kind)
        if reason is not None:
            raise InputError(f"collective.{kind}", self.name, reason)
        p = np.maximum(np.asarray(members, dtype=np.float64), 1.0)
        return self._phase(kind, p, np.asarray(nbytes, dtype=np.float64))

    @abstractmethod
    def _phase(self, kind: str, p: FloatArray, nbytes: FloatArray) -> tuple[FloatArray, FloatArray]:
        """The closed form of a supported ``kind`` (``p >= 1``)."""

    # ------------------------------------------------------------------ step programs
    @abstractmethod
    def lanes(self, comm: str, n: int, pos: int, size: int, chunk: int = 0, window: int = 0
              ) -> list[list[Step]]:
        """Lanes of steps of one phase for the rank at ``pos`` (``size``: ASTRA-sim's comm_size).

        Args:
            comm: the collective of the phase.
            n: ranks on the phase's logical ring.
            pos: this rank's position on it.
            size: the phase's ``comm_size`` in bytes.
            chunk: the chunk's index in its collective (algorithms that alternate per chunk).
            window: lanes in flight (``directN``; 0 = the algorithm's default).
        """

    def steps(self, comm: str, n: int, pos: int, size: int) -> list[Step]:
        """The messages of rank ``pos`` for a whole collective of ``comm_size`` = ``size``."""
        return [step for lane in self.lanes(comm, n, pos, size) for step in lane]

    def final_size(self, comm: str, size: int, n: int) -> int:
        """Bytes a phase hands to the next phase (``final_data_size`` of the algorithm)."""
        if comm == AG:
            return size * n
        if comm == RS:
            return size // n
        return size

    # ------------------------------------------------------------------ Chakra
    def et_graph(self, comm: str, n: int, size: int, reduce_micros: int = 0, step_micros: int = 0
                 ) -> list[RankGraph]:
        """Per-rank custom-collective graphs of ``comm`` (``size``: ASTRA-sim's comm_size).

        Raises:
            InputError: no ET graph of ``comm`` (:meth:`et_supports`).
        """
        reason = self.et_supports(comm)
        if reason is not None:
            raise InputError("collective", comm, reason)
        return self._et_graph(comm, n, size, reduce_micros, step_micros)

    def _et_graph(self, comm: str, n: int, size: int, reduce_micros: int, step_micros: int
                  ) -> list[RankGraph]:
        raise InputError("collective.algorithm", self.name, "writes no ET graph")
