"""The seam of fidelities: how a compiled workload graph is costed.

A fidelity decides what the engine's schedule means: which graph transform the workload needs
(:meth:`Fidelity.prepare`), what every op template costs on each system of a batch
(:meth:`Fidelity.durations`, (U, B) seconds), how much compute slows down beside communication
(:meth:`Fidelity.overlap_slowdown`), and which features it models (:meth:`Fidelity.supports`).
``simcore.api`` dispatches through :data:`simcore.fidelity.REGISTRY` and knows no fidelity by name.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from simcore.engine.evaluate import CompiledWorkload
from simcore.hardware.batch import SystemBatch
from simcore.specs.parallel import ParallelSpec
from simcore.specs.system import SystemSpec
from simcore.workloads._base import Workload

__all__ = ["FEATURES", "Fidelity"]

#: features a fidelity may not model (:meth:`Fidelity.supports`)
FEATURES = ("memory_offload", "mixed_devices", "stacked_dims", "overlap_blocks")

FloatArray = NDArray[np.float64]


@runtime_checkable
class Fidelity(Protocol):
    """A cost model of a compiled graph (``calibrated``: real hardware; ``astra``: ASTRA-sim)."""

    name: str

    def prepare(self, workload: Workload) -> Workload:
        """The graph this fidelity schedules (e.g. one communication op in flight per NPU)."""
        ...

    def durations(self, cw: CompiledWorkload, sb: SystemBatch, systems: Sequence[SystemSpec],
                  parallel: ParallelSpec) -> FloatArray:
        """(U, B) seconds of every template of ``cw`` on each system."""
        ...

    def overlap_slowdown(self, sb: SystemBatch, cw: CompiledWorkload | None = None,
                         parallel: ParallelSpec | None = None, tdur: FloatArray | None = None) -> FloatArray | None:
        """(B,) fractional slowdown of compute beside communication (None: not modelled);
        ``cw`` and ``parallel`` (the graph being costed) let it depend on the kernel mix, and
        ``tdur`` (its :meth:`durations`, when already computed) saves computing them again."""
        ...

    def supports(self, feature: str) -> str | None:
        """None if ``feature`` (one of :data:`FEATURES`) is modelled, else the one-line reason."""
        ...
