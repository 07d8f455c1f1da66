"""The result record of a batch of design points: :class:`BatchResult`.

Every metric is a (B,) numpy array over the batch (DESIGN.md, "The vectorized engine");
infeasible points are data (``feasible`` mask plus a ``reason`` string per point, empty when
feasible), never an exception (STYLE.md, "Infeasible is data"). Metric names are the stable
names of the MLflow layout in DESIGN.md (``iteration_time_s``, ``mfu``, ...).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from simcore.ir.streams import COMM_KINDS

__all__ = ["COMM_KINDS", "METRICS", "BatchResult"]

FloatArray = NDArray[np.float64]

#: (B,) float metrics, in report order
METRICS = (
    "iteration_time_s",
    "compute_s",
    "exposed_comm_s",
    "bubble_s",
    "peak_memory_gib",
    "model_tflops_per_gpu",
    "mfu",
)


@dataclass(frozen=True, eq=False)
class BatchResult:
    """Metrics of B design points that share one graph structure.

    Attributes:
        iteration_time_s: (B,) time of one training iteration (optimizer step included).
        compute_s: (B,) busy time of the bottleneck GPU's compute stream.
        exposed_comm_s: (B,) communication time on that GPU not hidden behind its compute.
        bubble_s: (B,) the rest: that GPU idle, waiting for other pipeline stages.
        peak_memory_gib: (B,) memory per GPU (the largest pipeline stage).
        model_tflops_per_gpu: (B,) model FLOPs (no recompute) / iteration time / GPUs, TFLOP/s.
        mfu: (B,) model_tflops_per_gpu / dense peak of the precision used.
        feasible: (B,) bool; False when the point does not fit (see ``reason``).
        reason: per point, '' when feasible, else a one-line reason.
        exposed_comm_by_kind: kind (tp/dp/pp/cp/ep) -> (B,) exposed seconds; sums to
            ``exposed_comm_s``.
    """

    iteration_time_s: FloatArray
    compute_s: FloatArray
    exposed_comm_s: FloatArray
    bubble_s: FloatArray
    peak_memory_gib: FloatArray
    model_tflops_per_gpu: FloatArray
    mfu: FloatArray
    feasible: NDArray[np.bool_]
    reason: tuple[str, ...]
    exposed_comm_by_kind: dict[str, FloatArray] = field(default_factory=dict)

    @property
    def size(self) -> int:
        """The batch size B."""
        return int(self.iteration_time_s.shape[0])

    def rows(self) -> list[dict[str, float | str | bool]]:
        """One flat dict per design point: the metrics, ``exposed_comm_<kind>_s``,
        ``feasible`` and ``reason``."""
        out: list[dict[str, float | str | bool]] = []
        for j in range(self.size):
            row: dict[str, float | str | bool] = {
                name: float(getattr(self, name)[j]) for name in METRICS
            }
            for kind, values in self.exposed_comm_by_kind.items():
                row[f"exposed_comm_{kind}_s"] = float(values[j])
            row["feasible"] = bool(self.feasible[j])
            row["reason"] = self.reason[j]
            out.append(row)
        return out
