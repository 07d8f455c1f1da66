"""Start and finish of a sweep's bookkeeping: tracking session, table, summary, MLflow record.

Model (DESIGN.md "Reliability": an unreachable MLflow server never loses results): tracking
starts only when the store answers; any tracking failure is recorded in the folder's
``sweep.json`` (``tracking_synced: false``) and reported, never raised, so the results on disk
always complete. :func:`publish_folder` replays the final step from disk for ``simsweep sync``.
"""

from __future__ import annotations

import sys
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
import yaml
from omegaconf import DictConfig, OmegaConf

from search.run.tables import ResultsStore, best_rows, format_summary, summarize, write_table
from search.sweep.output import SweepOutcome, read_manifest, write_manifest
from search.tracking.client import Tracker, flatten_params
from search.tracking.errors import brief_error
from search.tracking.publish import (
    PointLogger,
    describe_sweep,
    publish_sweep,
    table_artifacts,
)
from simcore.errors import InputError

__all__ = ["SUMMARY_METRICS", "LiveTracking", "finish_sweep", "publish_folder", "start_tracking",
           "summary_metric_columns"]


@dataclass
class LiveTracking:
    """The tracking side of a running sweep."""

    tracker: Tracker
    parent_id: str
    logger: PointLogger | None

    def submit(self, frame: pl.DataFrame) -> None:
        """Queue a finished batch for child runs (when every point gets one)."""
        if self.logger is not None:
            self.logger.submit(frame)


#: metrics shown beside the axes in the printed best-points table (and summary.txt)
#: the metrics of the printed best-points table (narrow enough for a terminal); child runs in
#: MLflow carry :data:`POINT_METRICS`, a superset
SUMMARY_METRICS = ("iteration_time_s", "mfu", "peak_memory_gib", "exposed_comm_s", "bubble_s",
                   "cost_usd_per_iter")


def summary_metric_columns(frame: pl.DataFrame) -> list[str]:
    """The :data:`SUMMARY_METRICS` present in ``frame`` (same list for a sweep and a sync)."""
    return [m for m in SUMMARY_METRICS if m in frame.columns]


#: an axis with more distinct values than this (a random sweep over ``interval(...)`` gives
#: every point its own) is reported by :data:`FINDING_BINS` ranges of equal point count when
#: numeric, else by its best values only
FINDING_VALUES_MAX = 16
FINDING_BINS = 8


def format_finding(frame: pl.DataFrame, axes: list[str], objective: str, direction: str) -> str:
    """The sweep's finding in words: the best plan, and for each axis what its other values
    cost (the best ``objective`` reachable with that value, relative to the best plan); an
    axis with many values (:data:`FINDING_VALUES_MAX`) by ranges of its values."""
    ok = frame.filter(pl.col("feasible")) if "feasible" in frame.columns else frame
    if ok.height == 0 or objective not in ok.columns:
        return "finding: no feasible point"
    best = best_rows(ok, objective, direction, 1).row(0, named=True)
    top = float(best[objective])
    plan = ", ".join(f"{a}={best[a]}" for a in axes)
    lines = [f"finding: best plan {plan}: {objective} = {top:.4g}"]
    pick = pl.col(objective).max() if direction == "maximize" else pl.col(objective).min()
    for axis in axes:
        per = ok.group_by(axis).agg(pick.alias("best")).sort(axis)
        if per.height < 2:
            continue
        values = per["best"].cast(pl.Float64).to_numpy()
        spread = float(values.max() - values.min())
        verdict = "does not matter here" if spread <= 1e-9 * max(abs(top), 1.0) else "matters"
        if per.height <= FINDING_VALUES_MAX:
            how, parts = "by value", [_finding_part(v, got, top, v == best[axis])
                                      for v, got in per.iter_rows()]
        elif per[axis].dtype.is_numeric():
            how, parts = _finding_ranges(ok, axis, pick, top, best[axis], per.height)
        else:
            shown = per.sort("best", descending=direction == "maximize").head(FINDING_VALUES_MAX)
            how = f"by value, the best {FINDING_VALUES_MAX} of {per.height}"
            parts = [_finding_part(v, got, top, v == best[axis]) for v, got in shown.iter_rows()]
        lines.append(f"  {axis} {verdict}; best {objective} {how}: " + "; ".join(parts))
    return "\n".join(lines)


def _finding_part(label: Any, got_raw: Any, top: float, is_best: bool) -> str:
    got = float(got_raw)
    delta = (got - top) / top * 100 if top else 0.0
    return f"{label}: {got:.4g}" + ("" if is_best else f" ({_percent(delta)})")


def _percent(delta: float) -> str:
    """A relative difference in percent: whole percents from 1% on, two significant digits
    below (a difference of 0.04% is not shown as +0%)."""
    return f"{delta:+.0f}%" if abs(delta) >= 1 else f"{delta:+.2g}%"


def _finding_ranges(ok: pl.DataFrame, axis: str, pick: pl.Expr, top: float, best_value: Any,
                    distinct: int) -> tuple[str, list[str]]:
    """The best objective per range of ``axis``: :data:`FINDING_BINS` ranges holding equal
    numbers of the feasible points, in value order."""
    n = ok.height
    ranges = (ok.with_columns(((pl.col(axis).rank("ordinal") - 1) * FINDING_BINS // n)
                              .alias("_range"))
              .group_by("_range")
              .agg(pl.col(axis).min().alias("low"), pl.col(axis).max().alias("high"),
                   pick.alias("best"))
              .sort("_range"))
    parts = [_finding_part(f"{low:.4g}-{high:.4g}", got, top, low <= best_value <= high)
             for _, low, high, got in ranges.iter_rows()]
    return f"by range of values ({ranges.height} ranges of equal point count, {distinct:,} " \
           "values)", parts


def _experiment(tracking: Any, name: str) -> str:
    return str(tracking.get("experiment") or f"sweep-{name}")


#: config keys logged as the parent run's params (the whole config is its config.yaml artifact)
_PARENT_PARAMS = ("workload.name", "system.name", "system.num_gpus", "parallel.global_batch",
                  "parallel.tp", "parallel.pp", "fidelity", "sweep.mode", "sweep.objective")


def _swept(key: str, axes: list[str]) -> bool:
    """``key`` is an axis or lies in a swept config group (``workload.name`` when ``workload``
    is an axis: the fixed config holds only the first option's)."""
    return any(key == a or key.startswith(a.replace("/", ".") + ".") for a in axes)


def _parent_params(config: dict[str, Any], axes: list[str]) -> dict[str, str]:
    """A few headline settings; a swept key is named by its axis, not a value."""
    flat = flatten_params(config)
    out = {k: flat[k] for k in _PARENT_PARAMS if k in flat and not _swept(k, axes)}
    out["sweep.axes"] = ", ".join(axes)[:6000]
    return out


def _parent(tracker: Tracker, manifest: dict[str, Any], out: Path, config: dict[str, Any]) -> str:
    return tracker.find_or_create_parent(
        manifest["sweep_id"], run_name=f"sweep-{manifest['name']}-{out.name}",
        params=_parent_params(config, list(manifest["axes"])),
        tags={"simsweep.output_dir": str(out),
                                              "simsweep.sweep_hash": manifest["sweep_hash"]})


def start_tracking(cfg: DictConfig, manifest: dict[str, Any], out: Path, num_points: int,
                   axes: list[str], outcome: SweepOutcome) -> LiveTracking | None:
    """Open the parent run (found again on resume); stream child runs when under the limit."""

    tc = cfg.tracking
    if not tc.enabled:
        return None
    tracker = Tracker(tc.uri, _experiment(tc, str(cfg.sweep.name)), float(tc.request_timeout_s))
    manifest["tracking_uri"] = tracker.uri
    if not tracker.reachable():
        outcome.tracking_ok, outcome.tracking_error = False, f"{tracker.uri} is unreachable"
        write_manifest(out, manifest)
        return None
    try:
        config: dict[str, Any] = OmegaConf.to_container(cfg, resolve=True)  # type: ignore[assignment]
        parent = _parent(tracker, manifest, out, config)
        manifest["parent_run_id"] = parent
        write_manifest(out, manifest)
        logger = None
        if num_points <= int(tc.child_runs_max):
            logger = PointLogger(tracker, parent, tracker.child_hashes(parent), axes,
                                 background=bool(tc.async_logging),
                                 objectives=[str(manifest["objective"])])
        outcome.parent_run_id = parent
        outcome.experiment_id = tracker.experiment_id
        return LiveTracking(tracker, parent, logger)
    except Exception as err:  # noqa: BLE001 - tracking must not stop the sweep
        outcome.tracking_ok, outcome.tracking_error = False, brief_error(err)
        write_manifest(out, manifest)
        return None


def _artifacts(out: Path, frame: pl.DataFrame, axes: list[str], manifest: dict[str, Any],
               plots: bool, writers: ThreadPoolExecutor) -> tuple[list[tuple[Path, str | None]], int]:
    """The parent run's artifacts (written here: ``results.csv`` on ``writers`` while the plots
    are drawn) and the rows of ``results.csv``."""
    from search.sweep.plots import write_plots

    objective = str(manifest["objective"])
    items: list[tuple[Path, str | None]] = [(out / "results.parquet", None),
                                            (out / "config.yaml", None),
                                            (out / "summary.txt", None)]
    writing = writers.submit(table_artifacts, frame, out, objective, str(manifest["direction"]))
    drawn = write_plots(frame, axes, objective, out / "plots") if plots else []
    csv, csv_rows = writing.result()
    items += [(p, None) for p in csv]
    items += [(p, "plots") for p in drawn]
    return items, csv_rows


def _description(manifest: dict[str, Any], summary_text: str, csv_rows: int) -> str:
    return describe_sweep(str(manifest["name"]), list(manifest["axes"]),
                          dict(t.split("=", 1) for t in manifest.get("fixed") or [] if "=" in t),
                          summary_text,
                          int(manifest["num_points"]), csv_rows)


def finish_sweep(cfg: DictConfig, out: Path, manifest: dict[str, Any], store: ResultsStore,
                 track: LiveTracking | None, outcome: SweepOutcome) -> None:
    """Consolidate and summarize the table; publish it to the parent run when tracking is up.

    The table files are written on threads (polars writes without holding the GIL) while the
    summary and the plots are made: ~0.2 s of a ~1 s final step on the GPT-3 grid."""
    frame = store.table()
    with ThreadPoolExecutor(2, thread_name_prefix="simsweep-write") as writers:
        table = writers.submit(write_table, frame, out / "results.parquet")
        _summarize_and_publish(cfg, out, manifest, frame, track, outcome, writers, table)
        table.result()  # a failed write raises here, as it did before any summary
    if track is not None:
        outcome.log_s = track.tracker.log_s


def _summarize_and_publish(cfg: DictConfig, out: Path, manifest: dict[str, Any],
                           frame: pl.DataFrame, track: LiveTracking | None, outcome: SweepOutcome,
                           writers: ThreadPoolExecutor, table: Future[Path]) -> None:
    """:func:`finish_sweep` once the table is read (``table``: ``results.parquet`` being
    written on ``writers``; the parent run logs it only once it is whole)."""
    axes = list(manifest["axes"])
    summary = summarize(frame, manifest["objective"], manifest["direction"], manifest["top_k"])
    outcome.summary_text = format_summary(summary, axes, summary_metric_columns(frame)) + "\n" + \
        format_finding(frame, axes, manifest["objective"], manifest["direction"])
    (out / "summary.txt").write_text(outcome.summary_text + "\n")
    if track is None:
        return
    known = None
    if track.logger is not None:
        if track.logger.pending and bool(cfg.sweep.progress):
            print(f"MLflow: logging the child runs of {track.logger.pending} more batches ...",
                  file=sys.stderr, flush=True)
        track.logger.close()
        if track.logger.error is not None:
            err = track.logger.error
            outcome.tracking_ok, outcome.tracking_error = False, brief_error(err)
            return
        known = track.logger.skip
    try:
        items, csv_rows = _artifacts(out, frame, axes, manifest, bool(cfg.tracking.plots),
                                     writers)
        table.result()
        publish_sweep(track.tracker, track.parent_id, frame, summary, axes,
                      int(cfg.tracking.child_runs_max), int(cfg.tracking.best_child_runs),
                      items, known, _description(manifest, outcome.summary_text, csv_rows))
        manifest["tracking_synced"] = True
        write_manifest(out, manifest)
    except Exception as err:  # noqa: BLE001 - results are on disk; `simsweep sync` retries
        outcome.tracking_ok, outcome.tracking_error = False, brief_error(err)


def publish_folder(out: Path, uri: str | None = None) -> dict[str, int]:
    """Log a finished (or partial) sweep folder to MLflow; idempotent (``simsweep sync``)."""

    manifest = read_manifest(out)
    try:
        config = yaml.safe_load((out / "config.yaml").read_text())
    except (OSError, yaml.YAMLError) as err:
        raise InputError(str(out / "config.yaml"), "", f"unreadable ({type(err).__name__})") from None
    tc = dict(manifest["tracking"])
    store = ResultsStore(out)
    frame = store.consolidate(out / "results.parquet")
    axes = list(manifest["axes"])
    summary = summarize(frame, manifest["objective"], manifest["direction"], manifest["top_k"])
    text = format_summary(summary, axes, summary_metric_columns(frame)) + "\n" + \
        format_finding(frame, axes, manifest["objective"], manifest["direction"])
    (out / "summary.txt").write_text(text + "\n")
    tracker = Tracker(uri or manifest.get("tracking_uri") or tc.get("uri"),
                      _experiment(tc, manifest["name"]), float(tc.get("request_timeout_s", 10)))
    down = "is unreachable; the results stay on disk: run `simsweep sync` again once it is up"
    if not tracker.reachable():
        raise InputError("tracking.uri", tracker.uri, down)
    try:
        parent = _parent(tracker, manifest, out, config)
        with ThreadPoolExecutor(1, thread_name_prefix="simsweep-write") as writers:
            items, csv_rows = _artifacts(out, frame, axes, manifest, bool(tc["plots"]), writers)
        counts = publish_sweep(tracker, parent, frame, summary, axes, int(tc["child_runs_max"]),
                               int(tc["best_child_runs"]), items,
                               description=_description(manifest, text, csv_rows))
    except Exception as err:  # the store failed mid-way: sync is idempotent, a rerun completes it
        raise InputError("tracking.uri", tracker.uri,
                         f"failed while logging ({brief_error(err)}); the results stay on "
                         "disk: run `simsweep sync` again once the store works") from err
    manifest.update(parent_run_id=parent, tracking_synced=True, tracking_uri=tracker.uri)
    write_manifest(out, manifest)
    return {**counts, "points": frame.height}
