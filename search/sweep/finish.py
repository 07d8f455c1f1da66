"""Start and finish of a sweep's bookkeeping: tracking session, table, summary, MLflow record.

Model (DESIGN.md "Reliability": an unreachable MLflow server never loses results): tracking
starts only when the store answers; any tracking failure is recorded in the folder's
``sweep.json`` (``tracking_synced: false``) and reported, never raised, so the results on disk
always complete. :func:`publish_folder` replays the final step from disk for ``simsweep sync``.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
import yaml
from omegaconf import DictConfig, OmegaConf

from search.run.tables import ResultsStore, format_summary, summarize
from search.sweep.output import SweepOutcome, read_manifest, write_manifest
from search.tracking.client import Tracker, flatten_params
from search.tracking.publish import PointLogger, publish_sweep
from simcore.errors import InputError

__all__ = ["LiveTracking", "finish_sweep", "publish_folder", "start_tracking"]


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


def _experiment(tracking: Any, name: str) -> str:
    return str(tracking.get("experiment") or f"sweep-{name}")


def _parent(tracker: Tracker, manifest: dict[str, Any], out: Path, config: dict[str, Any]) -> str:
    return tracker.find_or_create_parent(
        manifest["sweep_id"], run_name=f"sweep-{manifest['name']}-{out.name}",
        params=flatten_params(config), tags={"simsweep.output_dir": str(out),
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
                                 background=bool(tc.async_logging))
        outcome.parent_run_id = parent
        return LiveTracking(tracker, parent, logger)
    except Exception as err:  # noqa: BLE001 - tracking must not stop the sweep
        outcome.tracking_ok, outcome.tracking_error = False, f"{type(err).__name__}: {err}"
        write_manifest(out, manifest)
        return None


def _artifacts(out: Path, frame: pl.DataFrame, axes: list[str], objective: str,
               plots: bool) -> list[tuple[Path, str | None]]:
    from search.sweep.plots import write_plots

    items: list[tuple[Path, str | None]] = [(out / "results.parquet", None),
                                            (out / "config.yaml", None),
                                            (out / "summary.txt", None)]
    if plots:
        items += [(p, "plots") for p in write_plots(frame, axes, objective, out / "plots")]
    return items


def finish_sweep(cfg: DictConfig, out: Path, manifest: dict[str, Any], store: ResultsStore,
                 track: LiveTracking | None, outcome: SweepOutcome) -> None:
    """Consolidate and summarize the table; publish it to the parent run when tracking is up."""

    frame = store.consolidate(out / "results.parquet")
    axes = list(manifest["axes"])
    summary = summarize(frame, manifest["objective"], manifest["direction"], manifest["top_k"])
    metrics: list[str] = [m for m in ("iteration_time_s", "mfu", "peak_memory_gib", "exposed_comm_s",
                           "bubble_s", "cost_usd_per_iter") if m in frame.columns]
    outcome.summary_text = format_summary(summary, axes, metrics)
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
            outcome.tracking_ok, outcome.tracking_error = False, f"{type(err).__name__}: {err}"
            outcome.log_s = track.tracker.log_s
            return
        known = track.logger.skip
    try:
        publish_sweep(track.tracker, track.parent_id, frame, summary, axes,
                      int(cfg.tracking.child_runs_max), int(cfg.tracking.best_child_runs),
                      _artifacts(out, frame, axes, manifest["objective"], bool(cfg.tracking.plots)),
                      known)
        manifest["tracking_synced"] = True
        write_manifest(out, manifest)
    except Exception as err:  # noqa: BLE001 - results are on disk; `simsweep sync` retries
        outcome.tracking_ok, outcome.tracking_error = False, f"{type(err).__name__}: {err}"
    outcome.log_s = track.tracker.log_s


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
    (out / "summary.txt").write_text(format_summary(summary, axes, []) + "\n")
    tracker = Tracker(uri or manifest.get("tracking_uri") or tc.get("uri"),
                      _experiment(tc, manifest["name"]), float(tc.get("request_timeout_s", 10)))
    down = "is unreachable; the results stay on disk: run `simsweep sync` again once it is up"
    if not tracker.reachable():
        raise InputError("tracking.uri", tracker.uri, down)
    try:
        parent = _parent(tracker, manifest, out, config)
        counts = publish_sweep(tracker, parent, frame, summary, axes, int(tc["child_runs_max"]),
                               int(tc["best_child_runs"]),
                               _artifacts(out, frame, axes, manifest["objective"], bool(tc["plots"])))
    except Exception as err:  # the store failed mid-way: sync is idempotent, a rerun completes it
        raise InputError("tracking.uri", tracker.uri,
                         f"failed while logging ({type(err).__name__}); {down}") from err
    manifest.update(parent_run_id=parent, tracking_synced=True, tracking_uri=tracker.uri)
    write_manifest(out, manifest)
    return {**counts, "points": frame.height}
