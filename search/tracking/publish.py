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

import polars as pl

from search.run.tables import ID_COLUMNS, TAIL_COLUMNS, Summary
from search.tracking.client import Tracker

__all__ = ["PointLogger", "metric_columns", "publish_sweep", "summary_metrics"]


def metric_columns(frame: pl.DataFrame, axes: list[str]) -> list[str]:
    """Numeric result columns (the metrics) of a results table."""
    skip = {*ID_COLUMNS, *TAIL_COLUMNS, *axes}
    return [c for c, t in frame.schema.items() if c not in skip and t.is_numeric()]


def _rows(frame: pl.DataFrame, skip: set[str]) -> list[dict[str, Any]]:
    if skip:
        frame = frame.filter(~pl.col("point_hash").is_in(list(skip)))
    return frame.to_dicts()


class PointLogger:
    """Creates one child run per result row (see module docstring).

    With ``background`` (``tracking.async_logging``) a thread logs while batches keep
    running; without it :meth:`submit` logs before returning, so MLflow never lags the table.
    """

    def __init__(self, tracker: Tracker, parent_id: str, skip: set[str], axes: list[str],
                 background: bool = True) -> None:
        self.tracker = tracker
        self.parent_id = parent_id
        self.skip = set(skip)
        self.axes = axes
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
            rows = _rows(frame, self.skip)
            self.logged += self.tracker.log_children(
                self.parent_id, rows, self.axes, metric_columns(frame, self.axes))
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


def summary_metrics(summary: Summary) -> dict[str, float]:
    """Parent-run summary metrics: counts, infeasible by reason, the best point's metrics."""
    out: dict[str, float] = {
        "num_points": summary.num_points,
        "num_feasible": summary.num_feasible,
        "num_infeasible": summary.num_points - summary.num_feasible,
    }
    for reason, count in summary.infeasible_by_reason.items():
        out[_metric_name(f"infeasible.{reason}")] = count
    if summary.best.height:
        for col, dtype in summary.best.schema.items():
            if dtype.is_numeric() and col not in ("point_id", "batch_id"):
                value = summary.best[col][0]
                if value is not None:
                    out[_metric_name(f"best.{col}")] = float(value)
    return out


def publish_sweep(tracker: Tracker, parent_id: str, frame: pl.DataFrame, summary: Summary,
                  axes: list[str], child_runs_max: int, best_child_runs: int,
                  artifacts: list[tuple[Path, str | None]],
                  known: set[str] | None = None) -> Mapping[str, int]:
    """Create missing child runs and log the parent's record; returns counts logged."""
    known = tracker.child_hashes(parent_id) if known is None else known
    if frame.height <= child_runs_max:
        wanted = frame
    else:
        wanted = summary.best.head(best_child_runs) if summary.best.height else frame.head(0)
    rows = _rows(wanted, known)
    children = tracker.log_children(parent_id, rows, axes, metric_columns(frame, axes))
    tracker.finish_parent(parent_id, summary_metrics(summary), artifacts)
    return {"children": children, "artifacts": len(artifacts)}
