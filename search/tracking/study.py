"""MLflow record of a study, on the sweep's batched :class:`search.tracking.Tracker`.

Layout (DESIGN.md "MLflow layout"): one experiment per study (``search-<study name>``), one
parent run per study (found again on resume by its ``simsweep.sweep_id`` tag
``study:<name>@<output dir>``), one child run per finished trial, named ``trial-<n>`` with tag
``simsweep.point_hash = trial-<n>``, logged from the sweep's background
:class:`~search.publish.PointLogger` while the next batch runs (``tracking.async_logging``):
params are the searched keys (``parallel.tp``), metrics the objective values
and every simulated metric, tags the feasibility and its reason. A resumed study first logs the
finished trials that have no child run yet, so no trial is logged twice or lost. At the end the
parent gets the results table, Optuna's plots (HTML, under ``plots/``), summary metrics (best
values, counts, overhead) and the best trials' child runs get ``simsweep.best = true``.
Tracking failures are reported, never raised: the study storage already holds every trial.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import optuna
import polars as pl
from omegaconf import DictConfig, OmegaConf
from optuna.trial import FrozenTrial, TrialState

from search.study.ask_tell import LoopStats
from search.study.objectives import Objective
from search.tracking.client import Tracker, flatten_params
from search.tracking.errors import brief_error
from search.tracking.publish import (
    POINT_METRICS,
    VIEW_NOTE,
    PointLogger,
    run_name,
    view_metrics,
)

__all__ = ["StudyTracking", "best_frame", "describe_study"]

_POINT = "simsweep.point_hash"


def _row(trial: FrozenTrial, objectives: Sequence[Objective]) -> dict[str, Any]:
    row: dict[str, Any] = {"point_id": trial.number, "point_hash": f"trial-{trial.number}",
                           "run_name": run_name(trial.params, sorted(trial.params),
                                                prefix=f"#{trial.number} "),
                           "kind": "trial",
                           "feasible": bool(trial.user_attrs.get("feasible", False)),
                           "reason": str(trial.user_attrs.get("reason", ""))}
    if trial.datetime_start is not None and trial.datetime_complete is not None:
        # the child run spans the trial as Optuna recorded it (asked -> told, its batch)
        row["eval_start_unix_s"] = trial.datetime_start.timestamp()
        row["eval_wall_s"] = (trial.datetime_complete - trial.datetime_start).total_seconds()
    row.update(trial.params)
    for key, value in (trial.user_attrs.get("metrics") or {}).items():
        if isinstance(value, int | float) and not isinstance(value, bool):
            row[key] = value
    if row["feasible"]:  # infeasible trials carry penalty values, not measurements
        for obj, value in zip(objectives, trial.values or [], strict=False):
            row.setdefault(obj.name, value)
    row["feasible"] = float(row["feasible"])
    return row


def _markdown_table(frame: pl.DataFrame) -> str:
    cols = frame.columns
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for row in frame.iter_rows():
        lines.append("| " + " | ".join(f"{v:.4g}" if isinstance(v, float) else str(v)
                                       for v in row) + " |")
    return "\n".join(lines)


def best_frame(best: Sequence[FrozenTrial], objectives: Sequence[Objective]) -> pl.DataFrame:
    """The best trials (or the Pareto front): trial number, objective values, searched keys."""
    rows = []
    for t in best:
        row: dict[str, Any] = {"trial": t.number}
        row.update({o.name: v for o, v in zip(objectives, t.values, strict=True)})
        row.update(t.params)
        rows.append(row)
    return pl.DataFrame(rows, strict=False) if rows else pl.DataFrame()


def describe_study(name: str, objectives: Sequence[Objective], space: Sequence[str],
                   n_trials: int, best: pl.DataFrame) -> str:
    """The study parent run's description (``mlflow.note.content``, Markdown)."""
    goal = ", ".join(f"{o.direction} `{o.name}`" for o in objectives)
    kind = "Pareto front" if len(objectives) > 1 else "best trial"
    lines = [f"**Optuna study `{name}`**: {n_trials} trials; {goal}; searched "
             + ", ".join(f"`{k}`" for k in space) + ".", "",
             "Child runs: one per trial, named by its parameters; best ones tagged "
             "`simsweep.best = true`. " + VIEW_NOTE + " Artifacts: `best_trials.json`, "
             "`results.json`, `results.parquet`, `plots/`.", "", f"{kind} (feasible trials):", ""]
    lines.append(_markdown_table(best) if best.height else "(no feasible trial)")
    return "\n".join(lines)


#: config keys logged as the study parent's params (the whole config is in its output folder)
_PARENT_PARAMS = ("workload.name", "system.name", "system.num_gpus", "parallel.global_batch",
                  "fidelity", "search.sampler", "search.n_trials", "search.objectives")


def _searched(key: str, space: Sequence[str]) -> bool:
    """``key`` is a dimension or lies in a searched config group (``workload.name`` when
    ``workload`` is a dimension: the base config holds only one option's)."""
    return any(key == d or key.startswith(d.replace("/", ".") + ".") for d in space)


def _parent_params(config: dict[Any, Any], space: Sequence[str],
                   derived: Sequence[str] = ()) -> dict[str, str]:
    """A few headline settings; a searched (or derived) key is named by its dimension in
    ``search.space``, not by the base config's value."""
    flat = flatten_params({str(k): v for k, v in config.items()})
    out = {k: flat[k] for k in _PARENT_PARAMS
           if k in flat and not _searched(k, [*space, *derived])}
    out["search.space"] = ", ".join(space)[:6000]
    return out


class StudyTracking:
    """Child runs per told batch and the parent's summary (see module docstring)."""

    def __init__(self, cfg: DictConfig, study_name: str, output_dir: Path,
                 objectives: Sequence[Objective], space: Sequence[str] = (),
                 derived: Sequence[str] = ()) -> None:
        tc = cfg.tracking
        experiment = str(tc.get("experiment") or f"search-{study_name}")
        self.tracker = Tracker(tc.get("uri"), experiment, float(tc.get("request_timeout_s", 10)))
        self.objectives = list(objectives)
        self.error = ""
        self.parent_id: str | None = None
        self.logged: set[str] = set()
        self.async_logging = bool(tc.get("async_logging", True))
        self._logger: PointLogger | None = None
        try:
            if not self.tracker.reachable():
                raise ConnectionError(f"{self.tracker.uri} is unreachable")
            config = OmegaConf.to_container(cfg, resolve=True)
            assert isinstance(config, dict)
            self.parent_id = self.tracker.find_or_create_parent(
                f"study:{study_name}@{output_dir.resolve()}", run_name=study_name,
                params=_parent_params(config, list(space), list(derived)),
                tags={"simsweep.study": study_name, "simsweep.output_dir": str(output_dir)})
            self.logged = self.tracker.child_hashes(self.parent_id)
        except Exception as err:  # noqa: BLE001 - tracking must not stop the search
            self._fail(err)

    def _fail(self, err: BaseException) -> None:
        self.error = brief_error(err)
        self.parent_id = None

    @property
    def log_s(self) -> float:
        """Wall time spent in MLflow calls so far."""
        return float(self.tracker.log_s)

    def log_trials(self, trials: Sequence[FrozenTrial]) -> None:
        """One child run per finished trial not logged yet (batched by the Tracker)."""
        if self.parent_id is None:
            return
        rows = [_row(t, self.objectives) for t in trials
                if t.state == TrialState.COMPLETE and f"trial-{t.number}" not in self.logged]
        if not rows:
            return
        params = sorted({k for t in trials for k in t.params})
        wanted = [*(o.name for o in self.objectives), *POINT_METRICS, "feasible"]
        metrics = [k for k in dict.fromkeys(wanted) if any(k in r for r in rows)]
        for r in rows:
            for key in params:
                r.setdefault(key, "")
        if self.async_logging:  # the sweep's background logger: logging overlaps evaluation
            if self._logger is None:
                self._logger = PointLogger(self.tracker, self.parent_id, self.logged, params,
                                           objectives=[o.name for o in self.objectives])
            self._logger.submit(pl.DataFrame(rows, strict=False, infer_schema_length=None))
            self.logged.update(r["point_hash"] for r in rows)
            return
        try:
            self.tracker.log_children(self.parent_id, rows, params, metrics)
        except Exception as err:  # noqa: BLE001
            self._fail(err)
            return
        self.logged.update(r["point_hash"] for r in rows)

    def _tag_best(self, best: Sequence[FrozenTrial]) -> None:
        assert self.parent_id is not None
        client = self.tracker.client
        for trial in best:
            runs = client.search_runs(
                [self.tracker.experiment_id],
                filter_string=f"tags.`{_POINT}` = 'trial-{trial.number}' and "
                              f"tags.`mlflow.parentRunId` = '{self.parent_id}'", max_results=1)
            for run in runs:
                client.set_tag(run.info.run_id, "simsweep.best", "true")

    def finish(self, study: optuna.Study, objectives: Sequence[Objective],
               best: Sequence[FrozenTrial], table: Path, plots: Sequence[Path],
               stats: LoopStats) -> tuple[str | None, str]:
        """Catch up missing child runs, tag the best, log table/plots/summary; (run id, error)."""
        if self.parent_id is None:
            return None, self.error
        t0 = time.perf_counter()
        if self._logger is not None:
            self._logger.close()
            self.logged = set(self._logger.skip)
            if self._logger.error is not None:
                self._fail(self._logger.error)
                return None, self.error
            self._logger = None
        self.async_logging = False
        try:
            self.log_trials(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)))
            if self.parent_id is None:
                return None, self.error
            self._tag_best(best)
            metrics: dict[str, float] = {  # "study." keeps them apart from per-trial metrics
                "study.n_trials": float(len(study.trials)),
                "study.n_feasible": float(sum(bool(t.user_attrs.get("feasible"))
                                              for t in study.trials
                                              if t.state == TrialState.COMPLETE)),
                "study.n_best": float(len(best)),
                "study.sampler_s": stats.sampler_s, "study.evaluate_s": stats.evaluate_s,
                "study.logging_s": stats.logging_s + (time.perf_counter() - t0),
            }
            if len(objectives) == 1 and best:
                metrics[f"study.best.{objectives[0].name}"] = float(best[0].values[0])
            front = best_frame(best, objectives)
            if front.height:
                self.tracker.log_table(self.parent_id, front, "best_trials.json")
            results = pl.read_parquet(table)
            if results.height:
                self.tracker.log_table(self.parent_id, results.head(5000), "results.json")
            space = sorted({k for t in study.trials for k in t.params})
            names = [o.name for o in objectives]
            self.tracker.save_view(
                self.parent_id, space,
                view_metrics([*names, *POINT_METRICS, "feasible"], names), names[0],
                objectives[0].direction != "maximize",
                feasible_only=metrics["study.n_feasible"] > 0)
            self.tracker.describe(self.parent_id, describe_study(
                study.study_name, objectives, space, len(study.trials), front))
            artifacts: list[tuple[Path, str | None]] = [(table, None)]
            artifacts += [(p, "plots") for p in plots]
            self.tracker.finish_parent(self.parent_id, metrics, artifacts)
        except Exception as err:  # noqa: BLE001
            self._fail(err)
            return None, self.error
        return self.parent_id, ""
