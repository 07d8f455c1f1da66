"""Memory layer: per-GPU footprint (Korthikanti et al. 2022) and capacity feasibility."""

from __future__ import annotations

from simcore.memory.capacity import check_memory, peak_footprint
from simcore.workloads.transformer.memory import footprint_bytes, layers_in_stage

__all__ = ["check_memory", "footprint_bytes", "layers_in_stage", "peak_footprint"]
