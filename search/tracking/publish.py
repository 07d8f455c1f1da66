"""Publishing sweep results to MLflow: streamed child runs and the final parent-run record.

Model (DESIGN.md "MLflow layout" and "Reliability"): results reach disk first; MLflow is a
view of them. :class:`PointLogger` streams child runs from a background thread while the sweep
runs (so logging overlaps evaluation), skipping point hashes MLflow already has; if the store
fails it stops and the sweep goes on. :func:`publish_sweep` is the idempotent final step shared by
``simsweep sweep`` and ``simsweep sync``: it finds or creates the parent run, creates every child
run still missing (all points up to ``child_runs_max``, else the best ``best_child_runs``), and
logs the results table, config, plots and summary metrics on the parent.
"""

from __future__ import annotations

import queue
import re
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from search.run.tables import ID_COLUMNS, TAIL_COLUMNS, Summary, best_rows
from search.tracking.client import FEASIBLE_CLAUSE, VIEW_METRICS, Tracker

__all__ = ["POINT_METRICS", "VIEW_NOTE", "PointLogger", "best_child_rows", "describe_sweep",
           "metric_columns", "point_metric_columns", "publish_sweep", "run_name", "short_names",
           "summary_metrics", "table_artifacts", "view_metrics"]

#: the metrics every child run carries (with the objective and ``feasible``): a small stable set,
#: the same for every workload family (samples/s where tokens/s does not apply), so the MLflow
#: runs table shows readable default columns; every column stays in the results table
POINT_METRICS = ("iteration_time_s", "mfu", "peak_memory_gib", "exposed_comm_s", "bubble_s",
                 "samples_per_s", "tokens_per_s", "cost_usd_per_iter", "capex_usd")
#: how the saved runs-table view's filter (:func:`~search.tracking.client.view_filter`) is
#: changed to reach the infeasible points, for the parent run's description
VIEW_NOTE = (f"The saved runs-table view lists the feasible ones (filter `` {FEASIBLE_CLAUSE} ``; "
             "all when none is feasible); `` metrics.`feasible` = 0 `` in its search box lists "
             "the infeasible ones (the reason: tag `simsweep.reason`), no clause every one.")
#: rows of the results table logged as an MLflow table (previewed in the UI)
TABLE_ROWS_MAX = 5000
#: the largest artifact MLflow 3's UI previews ("Maximum file size for preview: 50MiB")
UI_PREVIEW_MAX_B = 50 * 2**20


def metric_columns(frame: pl.DataFrame, axes: list[str]) -> list[str]:
    """Numeric result columns (the metrics) of a results table."""
    skip = {*ID_COLUMNS, *TAIL_COLUMNS, *axes}
    return [c for c, t in frame.schema.items() if c not in skip and t.is_numeric()]


def point_metric_columns(frame: pl.DataFrame, objectives: list[str]) -> list[str]:
    """Child-run metrics: the objectives, :data:`POINT_METRICS`, ``feasible`` (1/0)."""
    wanted = dict.fromkeys([*objectives, *POINT_METRICS, "feasible"])
    return [c for c in wanted if c in frame.columns]


def view_metrics(metrics: list[str], objectives: list[str]) -> list[str]:
    """The child metrics a saved runs-table view shows: the objectives and
    :data:`~search.tracking.client.VIEW_METRICS`, those the children carry."""
    return [m for m in dict.fromkeys([*objectives, *VIEW_METRICS]) if m in metrics]


def short_names(axes: list[str]) -> dict[str, str]:
    """Each axis's shortest dotted suffix that no other axis ends with: ``bandwidth_GBps`` alone,
    but ``scaleout.bandwidth_GBps`` and ``scaleup.bandwidth_GBps`` when both are swept."""
    parts = {a: a.split(".") for a in axes}
    names = {}
    for axis, mine in parts.items():
        for k in range(1, len(mine) + 1):
            tail = mine[-k:]
            if all(other[-k:] != tail for a, other in parts.items() if a != axis):
                break
        names[axis] = ".".join(tail)
    return names


def _value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def run_name(row: Mapping[str, Any], axes: list[str], prefix: str = "",
             names: Mapping[str, str] | None = None) -> str:
    """A child run's name from its axis values, e.g. ``tp=2 scaleout.bandwidth_GBps=100``
    (``names``: :func:`short_names` of ``axes``, when the caller names many rows)."""
    names = short_names(axes) if names is None else names
    text = " ".join(f"{names[a]}={_value(row.get(a))}" for a in axes)
    return (prefix + text)[:250] or prefix.strip() or f"point-{row.get('point_id')}"


def _rows(frame: pl.DataFrame, skip: set[str], axes: list[str] | None = None) -> list[dict[str, Any]]:
    if skip:
        frame = frame.filter(~pl.col("point_hash").is_in(list(skip)))
    rows = frame.to_dicts()
    if axes is not None:
        names = short_names(axes)
        for row in rows:
            row.setdefault("run_name", run_name(row, axes, names=names))
            if "feasible" in row:
                row["feasible"] = bool(row["feasible"])
    return rows


class PointLogger:
    """Creates one child run per result row (see module docstring).

    With ``background`` (``tracking.async_logging``) a thread logs while batches keep
    running; without it :meth:`submit` logs before returning, so MLflow never lags the table.
    """

    def __init__(self, tracker: Tracker, parent_id: str, skip: set[str], axes: list[str],
                 background: bool = True, objectives: list[str] | None = None) -> None:
        self.tracker = tracker
        self.parent_id = parent_id
        self.skip = set(skip)
        self.axes = axes
        self.objectives = list(objectives or [])
        self.logged = 0
        self.error: BaseException | None = None
        self._queue: queue.Queue[pl.DataFrame | None] = queue.Queue()
        self._thread: threading.Thread | None = None
        if background:
            self._thread = threading.Thread(target=self._run, name="simsweep-mlflow", daemon=True)
            self._thread.start()

    def submit(self, frame: pl.DataFrame) -> None:
        """Log (or queue for logging) a batch's rows."""
        if self._thread is None:
            self._log(frame)
        else:
            self._queue.put(frame)

    def _log(self, frame: pl.DataFrame) -> None:
        if self.error is not None:
            return
        try:
            rows = _rows(frame, self.skip, self.axes)
            self.logged += self.tracker.log_children(
                self.parent_id, rows, self.axes, point_metric_columns(frame, self.objectives))
            self.skip.update(r["point_hash"] for r in rows)
        except Exception as err:  # noqa: BLE001 - store down: results stay on disk
            self.error = err

    def _run(self) -> None:
        while (frame := self._queue.get()) is not None:
            self._log(frame)

    @property
    def pending(self) -> int:
        """Batches queued and not yet logged."""
        return self._queue.qsize()

    def close(self) -> None:
        """Wait for queued rows to be logged."""
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join()


def _metric_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_\-. /]", "_", text)[:250]


def summary_metrics(summary: Summary, prefix: str = "sweep.") -> dict[str, float]:
    """Parent-run summary metrics, all under ``prefix`` so they never share a column with the
    child runs' per-point metrics: counts, infeasible by reason, the best point's objective and
    :data:`POINT_METRICS`."""
    out: dict[str, float] = {
        f"{prefix}num_points": summary.num_points,
        f"{prefix}num_feasible": summary.num_feasible,
        f"{prefix}num_infeasible": summary.num_points - summary.num_feasible,
    }
    for reason, count in summary.infeasible_by_reason.items():
        out[_metric_name(f"{prefix}infeasible.{reason}")] = count
    if summary.best.height:
        for col in dict.fromkeys([summary.objective, *POINT_METRICS]):
            if col in summary.best.columns and summary.best[col][0] is not None:
                out[_metric_name(f"{prefix}best.{col}")] = float(summary.best[col][0])
    return out


def describe_sweep(name: str, axes: list[str], fixed: Mapping[str, Any], summary_text: str,
                   num_points: int, csv_rows: int | None = None) -> str:
    """The parent run's description (``mlflow.note.content``, Markdown); ``csv_rows``: rows of
    ``results.csv`` when it holds fewer than every point (see :func:`table_artifacts`)."""
    lines = [f"**Sweep `{name}`**: {num_points} design points, grid over "
             + ", ".join(f"`{a}`" for a in axes) + "."]
    if fixed:
        lines.append("Fixed: " + ", ".join(f"`{k}`={v}" for k, v in fixed.items()) + ".")
    lines += ["", "Child runs: one per point, named by its axis values; metrics: the objective, "
              "the headline metrics and `feasible`. " + VIEW_NOTE + " Artifacts: `results.csv` / "
              "`results.json` (preview), `results.parquet` (every column), `plots/`."]
    if csv_rows is not None and csv_rows < num_points:
        lines.append(f"`results.csv` holds the best {csv_rows:,} of the {num_points:,} points "
                     "(feasible first, by the objective): the whole table would pass the UI's "
                     "50 MiB preview limit; `results.parquet` has every point.")
    lines += ["", "```", summary_text, "```"]
    return "\n".join(lines)


def csv_rows_that_fit(frame: pl.DataFrame, limit_b: int = UI_PREVIEW_MAX_B) -> int:
    """Rows of ``frame`` whose CSV should stay within ``limit_b`` bytes, from the mean CSV bytes
    per row of up to 2,000 rows spread over the table, with a 3% margin (an estimate:
    :func:`table_artifacts` checks the file it writes)."""
    if frame.height == 0:
        return 0
    picks = np.unique(np.linspace(0, frame.height - 1, min(frame.height, 2000)).astype(np.int64))
    sample = frame[picks]
    per_row_b = len(sample.write_csv().encode()) / sample.height
    return min(frame.height, int(0.97 * limit_b / per_row_b))


def table_artifacts(frame: pl.DataFrame, out: Path, objective: str, direction: str,
                    limit_b: int = UI_PREVIEW_MAX_B) -> tuple[list[Path], int]:
    """``results.csv`` for the UI's text viewer: the whole table when its CSV fits the UI's
    preview limit (``limit_b``), else the best rows that fit, feasible first and by
    ``objective`` (a larger file is neither previewed nor needed: ``results.parquet`` beside it
    has every row; the GPT-3 grid of 112,896 points writes 46 MB, 451,584 points 186 MB).
    Returns the paths and the rows written."""
    csv = out / "results.csv"
    rows = csv_rows_that_fit(frame, limit_b)
    ranked: pl.Series | None = None  # row indices, best first
    while True:
        if rows >= frame.height:
            table = frame
        else:
            if ranked is None:
                ranked = _feasible_best_first(frame, objective, direction)
            table = frame[ranked.head(rows)]
        table.write_csv(csv)
        size_b = csv.stat().st_size
        if size_b <= limit_b or rows == 0:
            return [csv], table.height
        rows = min(rows, frame.height) * limit_b * 97 // (size_b * 100)  # the estimate was short


def _feasible_best_first(frame: pl.DataFrame, objective: str, direction: str) -> pl.Series:
    """Row indices of ``frame``, feasible rows first, then by ``objective`` (nulls last, ties
    in table order); only the key columns are sorted."""
    keys = [c for c in ("feasible", objective) if c in frame.columns]
    if not keys:
        return pl.Series(np.arange(frame.height))
    return frame.select(pl.arg_sort_by(
        keys, descending=[k == "feasible" or direction == "maximize" for k in keys],
        nulls_last=True, maintain_order=True)).to_series()


def best_child_rows(frame: pl.DataFrame, summary: Summary, count: int) -> pl.DataFrame:
    """The ``count`` best feasible rows of ``frame`` by the summary's objective: the child runs
    of a sweep beyond ``child_runs_max`` points (``summary.best`` holds only ``sweep.top_k``)."""
    if summary.num_feasible == 0 or summary.objective not in frame.columns:
        return frame.head(0)
    ok = frame.filter(pl.col("feasible")) if "feasible" in frame.columns else frame
    return best_rows(ok, summary.objective, summary.direction, count)


def publish_sweep(tracker: Tracker, parent_id: str, frame: pl.DataFrame, summary: Summary,
                  axes: list[str], child_runs_max: int, best_child_runs: int,
                  artifacts: list[tuple[Path, str | None]],
                  known: set[str] | None = None, description: str = "") -> Mapping[str, int]:
    """Create missing child runs and log the parent's record; returns counts logged."""
    known = tracker.child_hashes(parent_id) if known is None else known
    if frame.height <= child_runs_max:
        wanted = frame
    else:
        wanted = best_child_rows(frame, summary, best_child_runs)
    rows = _rows(wanted, known, axes)
    metrics = point_metric_columns(frame, [summary.objective])
    children = tracker.log_children(parent_id, rows, axes, metrics)
    tracker.save_view(parent_id, axes, view_metrics(metrics, [summary.objective]),
                      summary.objective, summary.direction != "maximize",
                      feasible_only=summary.num_feasible > 0)
    table = frame if frame.height <= TABLE_ROWS_MAX else summary.best
    tracker.log_table(parent_id, table, "results.json")
    if description:
        tracker.describe(parent_id, description)
    tracker.finish_parent(parent_id, summary_metrics(summary), artifacts)
    return {"children": children, "artifacts": len(artifacts)}
