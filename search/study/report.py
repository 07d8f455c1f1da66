"""What a finished (or resumed) study reports: results table, best trials, Optuna plots.

* The results table (one row per finished trial: ``trial_number``, the searched keys, objective
  values, every metric, ``feasible``, ``reason``) is rebuilt from the study storage, so a resumed
  search never holds a trial twice; it is written as parquet beside the storage.
* Best trials are chosen among *feasible* trials only: the minimum (or maximum) for one
  objective, the Pareto front (non-dominated set, :func:`search.pareto.pareto_mask`) for several.
* Plots are Optuna's own (optimization history, Pareto front, parameter importances, slice),
  drawn on an in-memory copy of the study that holds only feasible trials (infeasible ones carry
  penalty values that would flatten every axis), written as HTML.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import optuna
import polars as pl
from optuna.trial import FrozenTrial, TrialState

from search.study.objectives import Objective
from search.study.pareto import pareto_mask

__all__ = ["best_trials", "feasible_trials", "trials_frame", "write_plots", "write_table"]


def feasible_trials(study: optuna.Study) -> list[FrozenTrial]:
    """COMPLETE trials that satisfied every constraint."""
    return [t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
            if t.user_attrs.get("feasible", False)]


def best_trials(study: optuna.Study, objectives: Sequence[Objective]) -> list[FrozenTrial]:
    """Best feasible trial (one objective) or the feasible Pareto front (several)."""
    trials = feasible_trials(study)
    if not trials:
        return []
    signs = np.array([1.0 if o.direction == "minimize" else -1.0 for o in objectives])
    values = np.array([t.values for t in trials], dtype=np.float64) * signs
    if len(objectives) == 1:
        return [trials[int(np.argmin(values[:, 0]))]]
    mask = pareto_mask(values)
    front: dict[tuple[Any, ...], FrozenTrial] = {}
    for trial, keep in zip(trials, mask, strict=True):
        if keep:  # a point proposed twice is one member of the front (the first trial)
            front.setdefault(tuple(sorted(trial.params.items())), trial)
    return sorted(front.values(), key=lambda t: t.values[0])


def trials_frame(study: optuna.Study, objectives: Sequence[Objective]) -> pl.DataFrame:
    """One row per finished trial (see module docstring)."""
    rows = []
    for t in study.get_trials(deepcopy=False):
        if t.state not in (TrialState.COMPLETE, TrialState.FAIL):
            continue
        row: dict[str, Any] = {"trial_number": t.number, "state": t.state.name}
        row.update(t.params)
        for obj, value in zip(objectives, t.values or [None] * len(objectives), strict=True):
            row[f"objective.{obj.name}"] = value
        for key, value in (t.user_attrs.get("metrics") or {}).items():
            if key not in ("feasible", "reason"):
                row[key] = value
        row["feasible"] = bool(t.user_attrs.get("feasible", False))
        row["reason"] = str(t.user_attrs.get("reason", ""))
        rows.append(row)
    return pl.DataFrame(rows, infer_schema_length=None) if rows else pl.DataFrame()


def write_table(study: optuna.Study, objectives: Sequence[Objective], path: Path) -> pl.DataFrame:
    """Write the results table as parquet (atomically: temporary name, then rename)."""
    frame = trials_frame(study, objectives)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    frame.write_parquet(tmp)
    tmp.replace(path)
    return frame


def _feasible_copy(study: optuna.Study) -> optuna.Study:
    copy = optuna.create_study(directions=study.directions)
    copy.add_trials(feasible_trials(study))
    return copy


def write_plots(study: optuna.Study, objectives: Sequence[Objective], out_dir: Path) -> list[Path]:
    """Optuna plots of the feasible trials as HTML files; returns the paths written."""
    import optuna.visualization as vis

    feasible = _feasible_copy(study)
    if len(feasible.trials) < 2:
        return []
    first = objectives[0].name
    plots: dict[str, Callable[[], Any]] = {
        "optimization_history": lambda: vis.plot_optimization_history(
            feasible, target=lambda t: t.values[0], target_name=first),
        "param_importances": lambda: vis.plot_param_importances(
            feasible, target=lambda t: t.values[0], target_name=first),
        "slice": lambda: vis.plot_slice(feasible, target=lambda t: t.values[0],
                                        target_name=first),
    }
    if len(objectives) > 1:
        names = [o.name for o in objectives]
        plots["pareto_front"] = lambda: vis.plot_pareto_front(feasible, target_names=names)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, make in plots.items():
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                figure = make()
        except (ValueError, RuntimeError):  # e.g. importances need 2+ distinct values
            continue
        path = out_dir / f"{name}.html"
        figure.write_html(str(path), include_plotlyjs="cdn")
        written.append(path)
    return written
