"""Search objectives and constraints from simulated metrics plus the cost and power model.

Metrics of a design point (stable names, as logged to MLflow):

* ``iteration_time_s``, ``mfu``, ``peak_memory_gib``, ... from :class:`simcore.engine.result.
  BatchResult`;
* ``samples_per_s`` and ``tokens_per_s``: the workload family's samples and tokens per iteration
  (:func:`search.run.metrics.per_iteration`: sequences x length for the transformer, target
  tokens for GNMT; images and click records count as tokens too) / iteration_time_s;
  ``time_to_train_days`` = ``search.train_samples`` / samples_per_s / 86,400 when set (a
  number of images or records, e.g. 90 ImageNet epochs), else ``search.train_tokens`` /
  tokens_per_s / 86,400;
* ``capex_usd``, ``power_kw`` (facility, with PUE), ``usd_per_hour``, ``cost_usd_per_iter``,
  ``energy_kwh_per_iter``, ``cost_usd_to_train`` from :func:`simcore.cost.cluster_cost`
  (:func:`search.run.metrics.cluster_money`);
* ``memory_headroom_gib`` = HBM capacity - peak memory per GPU.

Any of them is an objective, with the direction in :data:`OBJECTIVES`. Constraints (Optuna's
convention, <= 0 is satisfied): ``[peak_memory_gib - hbm_capacity_gib, other]`` where ``other``
is 1 for a point infeasible for a reason other than memory (indivisible shapes, a derived dp that
is not whole). An infeasible point's objective values are its simulated metrics when finite
(they teach constraint-aware samplers) and a finite penalty otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from search.run.metrics import cluster_money
from search.study.ask_tell import TrialOutcome
from simcore.cost import ClusterCostSpec
from simcore.errors import InputError
from simcore.specs.system import SystemSpec

__all__ = [
    "OBJECTIVES",
    "PENALTY",
    "Objective",
    "design_metrics",
    "infeasible_outcome",
    "outcome_of",
    "resolve_objectives",
]

#: objective name -> direction
OBJECTIVES: dict[str, str] = {
    "iteration_time_s": "minimize",
    "tokens_per_s": "maximize",
    "samples_per_s": "maximize",
    "time_to_train_days": "minimize",
    "mfu": "maximize",
    "cost_usd_per_iter": "minimize",
    "cost_usd_to_train": "minimize",
    "capex_usd": "minimize",
    "usd_per_hour": "minimize",
    "power_kw": "minimize",
    "energy_kwh_per_iter": "minimize",
    "memory_headroom_gib": "maximize",
    "peak_memory_gib": "minimize",
}
PENALTY = 1e12
_SECONDS_PER_DAY = 86400.0


@dataclass(frozen=True)
class Objective:
    """One objective of the study."""

    name: str
    direction: str

    @property
    def penalty(self) -> float:
        """The value told for a point that produced no finite metric."""
        return PENALTY if self.direction == "minimize" else -PENALTY


def resolve_objectives(names: Sequence[str]) -> list[Objective]:
    """``search.objectives`` -> objectives; unknown or repeated names are input errors."""
    if isinstance(names, str):
        names = [names]
    if not names:
        raise InputError("search.objectives", list(names), "needs at least one objective")
    if len(set(names)) != len(names):
        raise InputError("search.objectives", list(names), "objectives must be distinct")
    for name in names:
        if name not in OBJECTIVES:
            raise InputError("search.objectives", name, f"must be one of {', '.join(OBJECTIVES)}")
    return [Objective(n, OBJECTIVES[n]) for n in names]


def design_metrics(
    rows: Sequence[Mapping[str, Any]],
    systems: Sequence[SystemSpec],
    tokens_per_iter: Sequence[float],
    cost: ClusterCostSpec,
    train_tokens: float,
    samples_per_iter: Sequence[float] | None = None,
    train_samples: float | None = None,
) -> list[dict[str, Any]]:
    """Add throughput, cost, power and memory head-room to simulated rows (vectorized).

    ``samples_per_iter`` defaults to ``tokens_per_iter``; with ``train_samples`` the time to
    train counts samples instead of tokens."""
    time_s = np.array([float(r["iteration_time_s"]) for r in rows])
    peak_gib = np.array([float(r["peak_memory_gib"]) for r in rows])
    capacity_gib = np.array([s.accelerator.hbm_capacity_gib for s in systems])
    money = cluster_money(systems, cost)  # accelerators summed over each cluster's device pools
    with np.errstate(divide="ignore", invalid="ignore"):
        tokens_per_s = np.asarray(tokens_per_iter, dtype=np.float64) / time_s
        samples_per_s = np.asarray(tokens_per_iter if samples_per_iter is None
                                   else samples_per_iter, dtype=np.float64) / time_s
        train_s = (train_tokens / tokens_per_s if train_samples is None
                   else train_samples / samples_per_s)
    per_iter = money.cost_usd_per_iter(time_s)
    columns = {
        "tokens_per_s": tokens_per_s,
        "samples_per_s": samples_per_s,
        "time_to_train_days": train_s / _SECONDS_PER_DAY,
        "capex_usd": money.capex_usd,
        "power_kw": money.facility_power_w / 1000.0,
        "usd_per_hour": money.usd_per_hour,
        "cost_usd_per_iter": per_iter,
        "energy_kwh_per_iter": money.energy_kwh_per_iter(time_s),
        "cost_usd_to_train": money.usd_per_hour * train_s / 3600.0,
        "memory_headroom_gib": capacity_gib - peak_gib,
        "hbm_capacity_gib": capacity_gib,
    }
    for tag, key in (("80", "interval80_log_halfwidth"), ("95", "interval95_log_halfwidth")):
        # prediction interval (simcore/fidelity/intervals.py); NaN when not calibrated
        q = np.array([getattr(s.calibration, key) for s in systems], dtype=np.float64)
        known = q > 0.0
        columns[f"iter_time_lo{tag}_s"] = np.where(known, time_s * np.exp(-q), np.nan)
        columns[f"iter_time_hi{tag}_s"] = np.where(known, time_s * np.exp(q), np.nan)
    out = []
    for j, row in enumerate(rows):
        merged = dict(row)
        merged.update({k: float(v[j]) for k, v in columns.items()})
        out.append(merged)
    return out


def outcome_of(
    metrics: Mapping[str, Any], objectives: Sequence[Objective], *, penalize_infeasible: bool = False
) -> TrialOutcome:
    """Objective values and constraints of one simulated design point.

    ``penalize_infeasible`` replaces an infeasible point's values by the penalty: for samplers
    that ignore constraints (CMA-ES, random, QMC, grid), so they never prefer such a point.
    """
    feasible = bool(metrics.get("feasible", True))
    over_gib = _finite(metrics.get("peak_memory_gib")) - _finite(metrics.get("hbm_capacity_gib"))
    if feasible:
        constraints = [min(over_gib, 0.0) if math.isfinite(over_gib) else 0.0, 0.0]
    elif math.isfinite(over_gib) and over_gib > 0:
        constraints = [over_gib, 0.0]
    else:
        constraints = [0.0, 1.0]
    values = []
    for objective in objectives:
        value = _finite(metrics.get(objective.name))
        usable = math.isfinite(value) and (feasible or not penalize_infeasible)
        values.append(value if usable else objective.penalty)
    return TrialOutcome(values, constraints, dict(metrics), feasible, str(metrics.get("reason", "")))


def infeasible_outcome(reason: str, objectives: Sequence[Objective]) -> TrialOutcome:
    """A point that could not be built or simulated: penalty values, constraint violated."""
    metrics: dict[str, Any] = {"feasible": False, "reason": reason}
    return TrialOutcome([o.penalty for o in objectives], [0.0, 1.0], metrics, False, reason)


def _finite(value: Any) -> float:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return math.nan
    return out if math.isfinite(out) else math.nan
