"""The ``calibrated`` fidelity: predict real hardware.

Template durations from the calibrated kernel models (GEMM, attention, memory-bound passes,
the NCCL-aware collective and point-to-point models: :func:`simcore.engine.evaluate.
template_durations`), one in-order stream per communication kind (the generated graph as is),
and compute slowed down beside communication (:mod:`simcore.fidelity.overlap`; Echo §3.4, ACE),
or, with ``system.endpoint.collective_engine`` other than ``nccl``, the endpoint contention model
(:mod:`simcore.fidelity.contention`: SMs and HBM taken by collectives, or the ACE offload engine).
Every feature is modelled, the remote memory tier included.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from simcore.engine.devices import device_template_durations
from simcore.engine.evaluate import CompiledWorkload, template_durations
from simcore.fidelity._base import FloatArray
from simcore.fidelity.contention import (
    collective_stretch,
    compute_slowdown,
    memory_bound_fraction,
    overlapped_hbm_Bps,
)
from simcore.fidelity.overlap import overlap_slowdown
from simcore.hardware.batch import SystemBatch, per_distinct
from simcore.specs.parallel import ParallelSpec
from simcore.specs.system import SystemSpec
from simcore.workloads._base import Workload

__all__ = ["CalibratedFidelity"]


class CalibratedFidelity:
    """Calibrated kernel and NCCL-aware collective models with the overlap slowdown."""

    name = "calibrated"

    def prepare(self, workload: Workload) -> Workload:
        """The generated graph, unchanged."""
        return workload

    def durations(self, cw: CompiledWorkload, sb: SystemBatch, systems: Sequence[SystemSpec],
                  parallel: ParallelSpec) -> FloatArray:
        """(U, B) calibrated template seconds; on mixed device pools each template on its
        stage's devices (:func:`simcore.engine.devices.device_template_durations`); collectives
        slowed by their endpoint (:mod:`simcore.fidelity.contention`; unchanged with the default
        ``nccl`` engine)."""
        if cw.template_stage is not None:  # each pool's endpoint slows its own collectives
            return device_template_durations(
                cw, sb, parallel,
                lambda sbp, t: collective_stretch(cw, t, sbp, _phi(cw, sbp, parallel)))
        return collective_stretch(cw, template_durations(cw, sb, parallel.precision), sb,
                                  _phi(cw, sb, parallel))

    def overlap_slowdown(self, sb: SystemBatch, cw: CompiledWorkload | None = None,
                         parallel: ParallelSpec | None = None, tdur: FloatArray | None = None) -> FloatArray:
        """(B,) compute slowdown beside a collective, minus one: the fitted one (``nccl``
        engine) or the endpoint contention model, by kernel class when the graph is given (on
        mixed pools the caller asks each pool's batch, :meth:`SystemBatch.pool`)."""
        fitted = overlap_slowdown(sb)[0] - 1.0
        nccl = per_distinct(lambda e: e.collective_engine == "nccl",
                            [s.endpoint for s in sb.specs])
        if nccl.all():
            return fitted
        if cw is None or parallel is None:
            return np.where(nccl, fitted, compute_slowdown(sb))
        phi = _phi(cw, sb, parallel)
        if tdur is None:
            tdur = self.durations(cw, sb, sb.specs, parallel)
        hbm = overlapped_hbm_Bps(cw, tdur, sb)
        return np.where(nccl, fitted, compute_slowdown(sb, phi, hbm))

    def supports(self, feature: str) -> str | None:
        """Every feature."""
        return None


def _phi(cw: CompiledWorkload, sb: SystemBatch, parallel: ParallelSpec) -> FloatArray | None:
    """Memory-bound share of compute when an endpoint engine is in use (else not needed)."""
    if per_distinct(lambda e: e.collective_engine == "nccl",
                    [s.endpoint for s in sb.specs]).all():
        return None
    return memory_bound_fraction(cw, sb, parallel.precision)
