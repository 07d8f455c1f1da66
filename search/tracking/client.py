"""MLflow tracking of sweeps: parent run, child runs per point, artifacts, all batched.

Model (DESIGN.md "MLflow layout"): one experiment per sweep name; a parent run per sweep holding
the resolved config (params and ``config.yaml``), the full results table (``results.parquet``),
plots and summary metrics; a child run per design point while the sweep has at most
``child_runs_max`` points, otherwise child runs only for the best ``best_child_runs`` points (every
point stays in the parent's table). Params are the design-point keys, metrics the engine's stable
names (``iteration_time_s``, ``mfu``, ``peak_memory_gib``, ...).

Every write is batched: a child run costs three requests (create, one ``log_batch`` with all its
params and metrics, terminate), never one request per value. Runs carry tags that make logging
idempotent and exactly-once: ``simsweep.sweep_id`` on the parent (sweep hash + output folder), and
``simsweep.point_hash`` on each child, written in the same ``log_batch`` as its data (so it marks
the run complete), so a resumed sweep or ``simsweep sync`` looks runs up, finishes or deletes runs
a kill cut off, and creates only the missing ones. The default store is SQLite under ``<repo or cwd>/.simsweep/``
with artifacts beside it; ``tracking.uri`` selects any other store or server.
"""

from __future__ import annotations

import json
import logging
import os
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

__all__ = ["FEASIBLE_CLAUSE", "VIEW_METRICS", "Tracker", "default_store", "flatten_params",
           "latest_view", "project_root", "quiet_mlflow_logs", "ui_link", "view_filter"]

_TAG_KIND = "simsweep.kind"
_TAG_SWEEP = "simsweep.sweep_id"
_TAG_POINT = "simsweep.point_hash"
_TAG_PARENT = "mlflow.parentRunId"
# MLflow 3's UI opens an experiment of this kind on its runs table (not the GenAI overview)
_TAG_EXPERIMENT_KIND = "mlflow.experimentKind"
_TAG_NOTE = "mlflow.note.content"  # the run description shown by the UI
# MLflow's UI reads the runs-table state (filter, sort, selected columns) of
# ``?viewStateShareKey=K`` from the experiment tag ``mlflow.sharedViewState.K`` (a JSON object
# with the keys of its URL search facets and of its view state)
_TAG_SHARED_VIEW = "mlflow.sharedViewState."
_TAG_LATEST_VIEW = "simsweep.view"  # the share key of the experiment's latest sweep / study
#: metrics shown as runs-table columns by a saved view (beside the objectives and the axes);
#: the others stay one click away under "Columns"
VIEW_METRICS = ("iteration_time_s", "mfu", "cost_usd_per_iter", "peak_memory_gib", "feasible")
#: the clause of a saved view's filter that keeps the feasible points (:func:`view_filter`)
FEASIBLE_CLAUSE = "metrics.`feasible` = 1"
_MAX_PARAMS = 100  # MLflow log_batch limit per request
_MAX_METRICS = 1000
_MAX_TAG_VALUE = 5000  # experiment tag values: 20,000 characters in MLflow 3.17, 5,000 before


def quiet_mlflow_logs() -> None:
    """Silence MLflow's store-migration chatter (commands print their own summary)."""
    os.environ.setdefault("MLFLOW_LOGGING_LEVEL", "WARNING")
    logging.getLogger("alembic").setLevel(logging.WARNING)


def ui_link(base: str, experiment_id: str | None = None, kind: str | None = None,
            sort_metric: str | None = None, view: str | None = None) -> str:
    """The MLflow UI address of an experiment's runs table (MLflow 3 opens unknown experiments
    on the GenAI overview; ``workflowType=machine_learning`` selects runs). ``view`` opens the
    saved view :meth:`Tracker.save_view` wrote (child runs flat, sorted, metric and axis
    columns shown); without it ``kind`` (``point`` / ``trial``) lists those child runs flat and
    ``sort_metric`` sorts them ascending (MLflow then shows no metric column by default)."""
    from urllib.parse import quote

    base = base.rstrip("/")
    if experiment_id is None:
        return f"{base}/#/experiments?workflowType=machine_learning"
    query = "workflowType=machine_learning"
    if view:  # search facets in the URL would make the UI ignore the saved view
        return f"{base}/#/experiments/{experiment_id}/runs?{query}&viewStateShareKey={view}"
    if kind:
        query += "&searchFilter=" + quote(f"tags.`{_TAG_KIND}` = '{kind}'", safe="")
    if sort_metric:
        query += "&orderByKey=" + quote(f"metrics.`{sort_metric}`", safe="") + "&orderByAsc=true"
    return f"{base}/#/experiments/{experiment_id}/runs?{query}"


def view_filter(parent_id: str, feasible_only: bool = True) -> str:
    """The search filter of a saved view: the parent's child runs, with ``feasible_only`` those
    whose ``feasible`` metric is 1. In the UI's search box, ``= 0`` instead lists the infeasible
    points (their reason is the tag ``simsweep.reason``) and dropping the clause lists all."""
    text = f"tags.`{_TAG_PARENT}` = '{parent_id}'"
    return text + f" and {FEASIBLE_CLAUSE}" if feasible_only else text


def latest_view(experiment: Any) -> str | None:
    """The share key of an experiment's latest saved view (an MLflow ``Experiment``)."""
    key = experiment.tags.get(_TAG_LATEST_VIEW)
    return key if key and f"{_TAG_SHARED_VIEW}{key}" in experiment.tags else None


def project_root(start: Path | None = None) -> Path:
    """The enclosing git repository of ``start`` (default cwd), else ``start`` itself."""
    here = (start or Path.cwd()).resolve()
    for path in (here, *here.parents):
        if (path / ".git").exists():
            return path
    return here


def default_store(root: Path | None = None) -> tuple[str, str]:
    """(tracking URI, artifact root URI) of the local SQLite store under ``.simsweep/``."""
    base = project_root(root) / ".simsweep"
    base.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{base / 'mlflow.db'}", (base / "artifacts").as_uri()


def flatten_params(tree: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """Nested mapping -> {dotted.key: str(value)} (MLflow params are strings, <= 6000 chars)."""
    out: dict[str, str] = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten_params(value, name + "."))
        else:
            out[name] = str(value)[:6000]
    return out


_SQLITE_TUNED = False


def _fast_sqlite() -> None:
    """WAL journal and synchronous=NORMAL on SQLite connections: commits stop waiting for
    fsync (18 ms each on a busy disk, 5-6 commits per child run); a crash of this process
    still loses nothing committed (SQLite docs, "Write-Ahead Logging")."""
    global _SQLITE_TUNED
    if _SQLITE_TUNED:
        return
    import sqlite3

    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    def _pragmas(conn: Any, _record: Any) -> None:
        if isinstance(conn, sqlite3.Connection):
            cur = conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.close()

    event.listen(Engine, "connect", _pragmas)
    _SQLITE_TUNED = True


def _run_times_ms(row: Mapping[str, Any], now_ms: int) -> tuple[int, int]:
    """A child run's (start, end) in ms since the epoch: when its point was evaluated
    (``eval_start_unix_s`` and ``eval_wall_s``, its share of the batch's evaluation time; a
    trial's own start and end), else ``now`` for both (a table written before they existed)."""
    start, wall = row.get("eval_start_unix_s"), row.get("eval_wall_s")
    if start is None or wall is None or not (start == start and wall == wall) or wall < 0:
        return now_ms, now_ms
    return round(float(start) * 1000), round((float(start) + float(wall)) * 1000)


def _chunks(items: list[Any], size: int) -> Iterable[list[Any]]:
    for i in range(0, len(items), size):
        yield items[i:i + size]


class Tracker:
    """An MLflow client bound to one tracking URI and experiment (see module docstring).

    Args:
        uri: tracking URI; None selects :func:`default_store`.
        experiment: experiment name (one per sweep name).
        request_timeout_s: HTTP timeout for a tracking server.
    """

    def __init__(self, uri: str | None, experiment: str, request_timeout_s: float = 10.0) -> None:
        os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
        os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2")
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "1")
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", str(int(request_timeout_s)))
        self.artifact_root: str | None = None
        if uri is None:
            uri, self.artifact_root = default_store()
        elif uri.startswith("sqlite:///"):  # artifacts beside the database file
            self.artifact_root = (Path(uri[len("sqlite:///"):]).parent / "artifacts").as_uri()
        self.uri = uri
        self.experiment = experiment
        self.timeout_s = request_timeout_s
        self._client: Any = None
        self._experiment_id: str | None = None
        self.log_s = 0.0  # wall time spent in MLflow calls

    def reachable(self) -> bool:
        """True when the store answers (a server's /health; a database is always local)."""
        if not self.uri.startswith(("http://", "https://")):
            return True
        try:
            with urllib.request.urlopen(self.uri.rstrip("/") + "/health",
                                        timeout=min(self.timeout_s, 3.0)) as resp:
                return bool(resp.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    @property
    def client(self) -> Any:
        """The MlflowClient (created on first use)."""
        if self._client is None:
            from mlflow import MlflowClient

            if self.uri.startswith("sqlite:"):
                _fast_sqlite()
            self._client = MlflowClient(tracking_uri=self.uri)
        return self._client

    @property
    def experiment_id(self) -> str:
        if self._experiment_id is None:
            exp = self.client.get_experiment_by_name(self.experiment)
            if exp is None:
                location = f"{self.artifact_root}/{self.experiment}" if self.artifact_root else None
                self._experiment_id = self.client.create_experiment(
                    self.experiment, artifact_location=location,
                    tags={_TAG_EXPERIMENT_KIND: "custom_model_development"})
                self._drop_empty_default()
            else:
                self._experiment_id = exp.experiment_id
        return self._experiment_id

    def _drop_empty_default(self) -> None:
        """Delete the empty ``Default`` experiment a new SQLite store creates (restorable)."""
        if not self.uri.startswith("sqlite:"):
            return
        default = self.client.get_experiment("0")
        if default is None or default.lifecycle_stage != "active":
            return
        if not self.client.search_runs(["0"], max_results=1):
            self.client.delete_experiment("0")

    def describe(self, run_id: str, markdown: str) -> None:
        """Set the run's description (Markdown, shown at the top of its page)."""
        t0 = time.perf_counter()
        self.client.set_tag(run_id, _TAG_NOTE, markdown[:5000])
        self.log_s += time.perf_counter() - t0

    def save_view(self, parent_id: str, params: list[str], metrics: list[str], sort_metric: str,
                  ascending: bool, feasible_only: bool = True) -> str:
        """Save the runs-table view of a parent's child runs as an MLflow shared view: only
        its children (flat), with ``feasible_only`` only the feasible ones (:func:`view_filter`:
        an infeasible point still carries ``iteration_time_s`` and would top the objective
        order), sorted by ``sort_metric``, with ``metrics`` and ``params`` (the axes) as
        columns; the experiment's latest view. Returns its share key (the parent id), opened
        by :func:`ui_link` ``view=``."""
        t0 = time.perf_counter()
        keep = len(params)
        while True:  # a view too long for one tag value lists fewer axis columns
            columns = ([f"params.`{p}`" for p in params[:keep]]
                       + [f"metrics.`{m}`" for m in metrics])
            state = {"searchFilter": view_filter(parent_id, feasible_only),
                     "orderByKey": f"metrics.`{sort_metric}`", "orderByAsc": ascending,
                     "selectedColumns": columns, "columnOrder": columns,
                     "runsHiddenMode": "SHOW_ALL"}
            text = json.dumps(state)
            if len(text) <= _MAX_TAG_VALUE or keep == 0:
                break
            keep -= 1
        self.client.set_experiment_tag(self.experiment_id, f"{_TAG_SHARED_VIEW}{parent_id}",
                                       text[:_MAX_TAG_VALUE])
        self.client.set_experiment_tag(self.experiment_id, _TAG_LATEST_VIEW, parent_id)
        self.log_s += time.perf_counter() - t0
        return parent_id

    def log_table(self, run_id: str, frame: Any, artifact_file: str) -> None:
        """Log a polars table as an MLflow table artifact (JSON; the UI previews it)."""
        t0 = time.perf_counter()
        self.client.log_table(run_id, frame.to_pandas(), artifact_file=artifact_file)
        self.log_s += time.perf_counter() - t0

    def find_or_create_parent(self, sweep_id: str, run_name: str, params: Mapping[str, str],
                              tags: Mapping[str, str]) -> str:
        """The parent run tagged ``sweep_id`` (created with ``params`` when absent)."""
        t0 = time.perf_counter()
        runs = self.client.search_runs(
            [self.experiment_id], filter_string=f"tags.`{_TAG_SWEEP}` = '{sweep_id}'",
            max_results=1)
        if runs:
            run_id: str = runs[0].info.run_id
        else:
            run = self.client.create_run(self.experiment_id, run_name=run_name, tags={
                **tags, _TAG_SWEEP: sweep_id, _TAG_KIND: "sweep"})
            run_id = run.info.run_id
            self._log_params(run_id, params)
        self.log_s += time.perf_counter() - t0
        return run_id

    def _log_params(self, run_id: str, params: Mapping[str, str]) -> None:
        from mlflow.entities import Param

        items = [Param(k[:250], v) for k, v in params.items()]
        for chunk in _chunks(items, _MAX_PARAMS):
            self.client.log_batch(run_id, params=chunk)

    def child_hashes(self, parent_id: str) -> set[str]:
        """point_hash tags of the parent's *complete* child runs, repairing cut-off ones.

        A child run is complete once it carries its ``simsweep.point_hash`` tag: that tag is
        written in the same ``log_batch`` as the run's params and metrics (one transaction), so
        a run that has it has all its data. A complete run still RUNNING (killed before
        ``set_terminated``) is terminated here; a run without the tag (killed between create and
        ``log_batch``) and a second complete run of the same point are deleted, so the caller
        logs each missing point once and every point ends as exactly one FINISHED run.
        """
        t0 = time.perf_counter()
        runs: list[Any] = []
        token = None
        while True:
            page = self.client.search_runs(
                [self.experiment_id], filter_string=f"tags.`{_TAG_PARENT}` = '{parent_id}'",
                max_results=1000, page_token=token)
            runs.extend(page)
            token = page.token
            if not token:
                break
        out: set[str] = set()
        for run in sorted(runs, key=lambda r: (r.info.status != "FINISHED", r.info.start_time or 0)):
            point = run.data.tags.get(_TAG_POINT, "")
            if not point or point in out:
                self.client.delete_run(run.info.run_id)
                continue
            if run.info.status != "FINISHED":
                self.client.set_terminated(run.info.run_id, status="FINISHED")
            out.add(point)
        self.log_s += time.perf_counter() - t0
        return out

    def log_children(self, parent_id: str, rows: Iterable[Mapping[str, Any]],
                     param_keys: list[str], metric_keys: list[str]) -> int:
        """One child run per row: params, metrics and the completion tag in one ``log_batch``.

        The ``simsweep.point_hash`` tag travels in that batch (not in ``create_run``), so a run
        is marked as logged only once its data landed (see :meth:`child_hashes`).
        """
        from mlflow.entities import Metric, Param, RunTag

        t0 = time.perf_counter()
        count = 0
        for row in rows:
            now = int(time.time() * 1000)
            start, end = _run_times_ms(row, now)
            run = self.client.create_run(
                self.experiment_id, start_time=start,
                run_name=str(row.get("run_name", f"point-{row['point_id']}")),
                tags={_TAG_PARENT: parent_id,
                      _TAG_KIND: str(row.get("kind", "point")),
                      "simsweep.point_id": str(row["point_id"]),
                      "simsweep.feasible": str(bool(row["feasible"])),
                      "simsweep.reason": str(row["reason"])[:5000]})
            params = [Param(k[:250], str(row[k])) for k in param_keys]
            metrics = [Metric(k, float(row[k]), now, 0) for k in metric_keys
                       if row.get(k) is not None and row[k] == row[k]]  # skip None / NaN
            self.client.log_batch(run.info.run_id, metrics=metrics, params=params,
                                  tags=[RunTag(_TAG_POINT, str(row["point_hash"]))])
            self.client.set_terminated(run.info.run_id, end_time=end)
            count += 1
        self.log_s += time.perf_counter() - t0
        return count

    def finish_parent(self, parent_id: str, metrics: Mapping[str, float],
                      artifacts: Iterable[tuple[Path, str | None]]) -> None:
        """Log summary metrics and artifact files (path, artifact sub-folder); end the run."""
        from mlflow.entities import Metric

        t0 = time.perf_counter()
        now = int(time.time() * 1000)
        items = [Metric(k, float(v), now, 0) for k, v in metrics.items() if v == v]
        for chunk in _chunks(items, _MAX_METRICS):
            self.client.log_batch(parent_id, metrics=chunk)
        for path, sub in artifacts:
            self.client.log_artifact(parent_id, str(path), artifact_path=sub)
        self.client.set_terminated(parent_id)
        self.log_s += time.perf_counter() - t0
