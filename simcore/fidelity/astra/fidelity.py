"""The ``astra`` fidelity: ASTRA-sim's analytical backend on the system ``simsweep chakra export`` writes.

The graph transform (one communication op in flight per NPU, ASTRA-sim's issue order) and the
template costs are in :mod:`.costs`; the system is :mod:`.export_system`. Compute is replayed from
the calibrated kernel models rounded to the ET's 1 us; ASTRA-sim's analytical backend has no
overlap slowdown and no remote memory tier in the exported system.
"""

from __future__ import annotations

from collections.abc import Sequence

from simcore.engine.evaluate import CompiledWorkload, template_durations
from simcore.fidelity._base import FloatArray
from simcore.fidelity.astra.costs import astra_template_durations, astra_workload
from simcore.hardware.batch import SystemBatch
from simcore.specs.parallel import ParallelSpec
from simcore.specs.system import SystemSpec
from simcore.workloads._base import Workload

__all__ = ["AstraFidelity"]

_NO_OFFLOAD = ("memory offload is not modelled with fidelity=astra (ASTRA-sim's exported system has "
               "no remote memory tier); use fidelity=calibrated")


class AstraFidelity:
    """ASTRA-sim's analytical costs and issue rules, without writing ET files."""

    name = "astra"

    def prepare(self, workload: Workload) -> Workload:
        """One in-order communication stream per stage, in ASTRA-sim's issue order."""
        return astra_workload(workload)

    def durations(self, cw: CompiledWorkload, sb: SystemBatch, systems: Sequence[SystemSpec],
                  parallel: ParallelSpec) -> FloatArray:
        """(U, B) template seconds under ASTRA-sim's analytical model."""
        calibrated = template_durations(cw, sb, parallel.precision)
        return astra_template_durations(cw.workload, parallel, systems, calibrated)

    def overlap_slowdown(self, sb: SystemBatch, cw: CompiledWorkload | None = None,
                         parallel: ParallelSpec | None = None, tdur: FloatArray | None = None) -> None:
        """Not modelled by ASTRA-sim's analytical backend."""
        return None

    def supports(self, feature: str) -> str | None:
        """No remote memory tier; one device type (ASTRA-sim's roofline is global); two network
        dimensions."""
        if feature == "stacked_dims":
            return ("system.scaleout_dims: the astra fidelity exports two network dimensions "
                    "(scale-up, scale-out); use fidelity=calibrated for stacked inter-package "
                    "dimensions")
        if feature == "overlap_blocks":
            return ("parallel.overlap_blocks: the astra fidelity costs the exported pieces of "
                    "the TP overlap and CP rings; set it false")
        if feature == "mixed_devices":
            return ("system.pools: the astra fidelity has one device type (ASTRA-sim's roofline "
                    "is global); use fidelity=calibrated for mixed device pools")
        return _NO_OFFLOAD if feature == "memory_offload" else None
