"""Calibrated cost models of communication: NCCL-aware collectives and overlap slowdown.

Parameters are hardware-level and fitted once (``scripts/fit_calibration.py``); see
:mod:`simcore.calibrated.collectives` and :mod:`simcore.calibrated.overlap`.
"""

from __future__ import annotations

from simcore.calibrated.collectives import (
    bus_bandwidth_Bps,
    collective_time_s,
    p2p_time_s,
    traffic_factor,
)
from simcore.calibrated.overlap import overlap_slowdown

__all__ = [
    "bus_bandwidth_Bps",
    "collective_time_s",
    "overlap_slowdown",
    "p2p_time_s",
    "traffic_factor",
]
