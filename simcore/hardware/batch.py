"""Struct-of-arrays view of B systems, the input of every vectorized cost model.

:class:`SystemBatch` holds one (B,) float64 array per numeric field of
:class:`~simcore.specs.system.SystemSpec` (nested fields flattened with ``_``), so a cost model
evaluates B design points with one numpy expression (DESIGN.md, "The vectorized engine": every
node's duration is a (B,) vector). A single system is a batch of one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from functools import partial

import numpy as np
from numpy.typing import NDArray

from simcore.errors import InputError
from simcore.specs.system import PRECISIONS, CalibrationSpec, SystemSpec

__all__ = ["SystemBatch", "as_column", "as_row"]

FloatArray = NDArray[np.float64]

_CALIBRATION_KEYS = tuple(f.name for f in fields(CalibrationSpec))


def as_column(x: object) -> FloatArray:
    """A scalar or (U,) array of per-template values as a (U, 1) float column."""
    return np.asarray(x, dtype=np.float64).reshape(-1, 1)


def as_row(x: FloatArray) -> FloatArray:
    """A (B,) batch array as a (1, B) row, to broadcast against (U, 1) columns."""
    return x[None, :]


def _peak_flops(spec: SystemSpec, precision: str) -> float:
    return float(getattr(spec.accelerator, f"peak_tflops_{precision}")) * 1e12


def _calibration(spec: SystemSpec, key: str) -> float:
    return float(getattr(spec.calibration, key))


@dataclass(frozen=True, eq=False)
class SystemBatch:
    """B systems as arrays of shape (B,).

    Attributes:
        specs: the systems, in batch order.
        num_gpus, gpus_per_node: cluster shape.
        peak_flops: precision -> (B,) dense peak FLOP/s (not TFLOP/s).
        hbm_bandwidth_Bps: (B,) peak HBM bandwidth, bytes/s.
        hbm_capacity_bytes: (B,) HBM capacity, bytes.
        scaleup_bandwidth_Bps, scaleout_bandwidth_Bps: (B,) per-GPU line rate, bytes/s.
        scaleup_latency_s, scaleout_latency_s: (B,) per-hop latency, s.
        calib: calibration key -> (B,) values (units as in :class:`CalibrationSpec`).
    """

    specs: tuple[SystemSpec, ...]
    num_gpus: FloatArray
    gpus_per_node: FloatArray
    peak_flops: dict[str, FloatArray]
    hbm_bandwidth_Bps: FloatArray
    hbm_capacity_bytes: FloatArray
    scaleup_bandwidth_Bps: FloatArray
    scaleout_bandwidth_Bps: FloatArray
    scaleup_latency_s: FloatArray
    scaleout_latency_s: FloatArray
    calib: dict[str, FloatArray]

    @classmethod
    def from_specs(cls, systems: Sequence[SystemSpec]) -> SystemBatch:
        """Stack ``systems`` (at least one) into arrays of shape (B,)."""
        if len(systems) == 0:
            raise InputError("systems", 0, "a batch needs at least one system")

        def col(get: Callable[[SystemSpec], float]) -> FloatArray:
            return np.array([float(get(s)) for s in systems], dtype=np.float64)

        return cls(
            specs=tuple(systems),
            num_gpus=col(lambda s: s.num_gpus),
            gpus_per_node=col(lambda s: s.gpus_per_node),
            peak_flops={p: col(partial(_peak_flops, precision=p)) for p in PRECISIONS},
            hbm_bandwidth_Bps=col(lambda s: s.accelerator.hbm_bandwidth_GBps * 1e9),
            hbm_capacity_bytes=col(lambda s: s.accelerator.hbm_capacity_gib * 2**30),
            scaleup_bandwidth_Bps=col(lambda s: s.scaleup.bandwidth_GBps * 1e9),
            scaleout_bandwidth_Bps=col(lambda s: s.scaleout.bandwidth_GBps * 1e9),
            scaleup_latency_s=col(lambda s: s.scaleup.latency_ns * 1e-9),
            scaleout_latency_s=col(lambda s: s.scaleout.latency_ns * 1e-9),
            calib={k: col(partial(_calibration, key=k)) for k in _CALIBRATION_KEYS},
        )

    @property
    def size(self) -> int:
        """The batch size B."""
        return int(self.num_gpus.shape[0])

    def peak(self, precision: str) -> FloatArray:
        """(B,) dense peak FLOP/s at ``precision``.

        Raises:
            InputError: unknown precision, or unsupported (peak 0) by some system of the batch.
        """
        if precision not in self.peak_flops:
            raise InputError("parallel.precision", precision,
                             f"must be one of {', '.join(PRECISIONS)}")
        peak = self.peak_flops[precision]
        if np.any(peak <= 0):
            bad = self.specs[int(np.argmax(peak <= 0))].accelerator.name
            raise InputError("parallel.precision", precision,
                             f"not supported by accelerator {bad}")
        return peak
