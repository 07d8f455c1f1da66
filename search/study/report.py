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

import os
import threading
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
    """Write the results table as parquet (atomically: a temporary name of this process and
    thread, then rename: drivers that share a study share its folder, and each rewrites the
    table of the whole study when it stops)."""
    frame = trials_frame(study, objectives)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.stem}.{os.getpid()}.{threading.get_ident()}.tmp")
    frame.write_parquet(tmp)
    tmp.replace(path)
    return frame


def _feasible_copy(study: optuna.Study) -> optuna.Study:
    copy = optuna.create_study(directions=study.directions)
    copy.add_trials(feasible_trials(study))
    return copy


def _plot_makers(study: optuna.Study, objectives: Sequence[Objective],
                 lib: Any) -> dict[str, Callable[[], Any]]:
    first = objectives[0].name
    plots: dict[str, Callable[[], Any]] = {
        "optimization_history": lambda: lib.plot_optimization_history(
            study, target=lambda t: t.values[0], target_name=first),
        "param_importances": lambda: lib.plot_param_importances(
            study, target=lambda t: t.values[0], target_name=first),
        "slice": lambda: lib.plot_slice(study, target=lambda t: t.values[0], target_name=first),
    }
    if len(objectives) > 1:
        names = [o.name for o in objectives]
        plots["pareto_front"] = lambda: lib.plot_pareto_front(study, target_names=names)
    return plots


def _draw(make: Callable[[], Any]) -> Any:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # matplotlib backend: ExperimentalWarning
            return make()
    except (ValueError, RuntimeError):  # e.g. importances need 2+ distinct values
        return None


def write_plots(study: optuna.Study, objectives: Sequence[Objective], out_dir: Path) -> list[Path]:
    """Optuna's plots of the feasible trials; returns the paths written.

    ``optuna.html``: every plot in one interactive page with plotly inline once (offline);
    ``<plot>.png``: the same plots drawn by Optuna's matplotlib backend, small and static.
    """
    import optuna.visualization as vis
    import optuna.visualization.matplotlib as vis_mpl

    from search.tracking.figures import new_axes, save_png, write_html_page

    feasible = _feasible_copy(study)
    if len(feasible.trials) < 2:
        return []
    out_dir.mkdir(parents=True, exist_ok=True)
    figures = []
    for name, make in _plot_makers(feasible, objectives, vis).items():
        figure = _draw(make)
        if figure is not None:
            figures.append((name.replace("_", " "), figure))
    if not figures:
        return []
    written = [write_html_page(figures, out_dir / "optuna.html", "Optuna plots (feasible trials)")]
    new_axes()  # selects the Agg backend before Optuna's matplotlib plots
    import matplotlib.pyplot as plt

    plt.close("all")
    for name, make in _plot_makers(feasible, objectives, vis_mpl).items():
        drawn = _draw(make)
        if drawn is None:
            continue
        first = drawn.flat[0] if hasattr(drawn, "flat") else drawn
        written.append(save_png(first.get_figure(), out_dir / f"{name}.png"))
    plt.close("all")
    return written
