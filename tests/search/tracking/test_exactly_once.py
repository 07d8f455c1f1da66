"""Exactly-once child runs in MLflow across a kill (real SQLite store, no mocks).

A driver killed while logging can leave a child run in three states: created but empty (killed
between ``create_run`` and ``log_batch``), complete but RUNNING (killed before
``set_terminated``), or, with an older logger, tagged with its point before its data landed.
Resume and ``simsweep sync`` go through :meth:`Tracker.child_hashes` then
:meth:`Tracker.log_children`; afterwards every point is exactly one FINISHED run with all metrics.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from mlflow.entities import Metric, RunTag

from search.tracking.client import Tracker

pytestmark = [pytest.mark.mlflow]

METRICS = ["iteration_time_s", "mfu"]


def _rows(n: int) -> list[dict[str, object]]:
    return [{"point_id": i, "point_hash": f"h{i}", "feasible": True, "reason": "",
             "tp": i % 2, "iteration_time_s": 1.0 + i, "mfu": 0.1 * i} for i in range(n)]


def _state(tracker: Tracker, parent: str) -> dict[str, list[tuple[str, dict[str, float]]]]:
    runs = tracker.client.search_runs([tracker.experiment_id],
                                      filter_string=f"tags.`mlflow.parentRunId` = '{parent}'")
    out: dict[str, list[tuple[str, dict[str, float]]]] = {}
    for r in runs:
        out.setdefault(r.data.tags.get("simsweep.point_hash", ""), []).append((r.info.status, r.data.metrics))
    return out


def test_cut_off_runs_are_repaired_and_missing_points_logged_once(tmp_path: Path) -> None:
    tracker = Tracker(f"sqlite:///{tmp_path / 'mlflow.db'}", "exactly-once")
    parent = tracker.find_or_create_parent("sweep-1", "parent", {}, {})
    rows = _rows(6)
    tracker.log_children(parent, rows[:2], ["tp"], METRICS)  # h0, h1: complete and FINISHED
    c = tracker.client
    # h2: killed between create_run and log_batch (no data, no point tag)
    c.create_run(tracker.experiment_id, tags={"mlflow.parentRunId": parent, "simsweep.kind": "point"})
    # h3: data and tag landed, killed before set_terminated
    r3 = c.create_run(tracker.experiment_id, tags={"mlflow.parentRunId": parent, "simsweep.kind": "point"})
    c.log_batch(r3.info.run_id, metrics=[Metric("iteration_time_s", 4.0, 0, 0), Metric("mfu", 0.3, 0, 0)],
                tags=[RunTag("simsweep.point_hash", "h3")])
    # h0 again: a second complete run of a point already logged (two loggers raced)
    r0 = c.create_run(tracker.experiment_id, tags={"mlflow.parentRunId": parent})
    c.log_batch(r0.info.run_id, tags=[RunTag("simsweep.point_hash", "h0")])

    known = tracker.child_hashes(parent)  # what resume / sync do first
    assert known == {"h0", "h1", "h3"}
    missing = [r for r in rows if r["point_hash"] not in known]
    assert tracker.log_children(parent, missing, ["tp"], METRICS) == 3

    state = _state(tracker, parent)
    assert sorted(state) == [f"h{i}" for i in range(6)]  # no untagged leftover
    for point, runs in state.items():
        assert len(runs) == 1, (point, runs)
        status, metrics = runs[0]
        assert status == "FINISHED" and set(METRICS) <= set(metrics), (point, runs)
    assert tracker.child_hashes(parent) == {f"h{i}" for i in range(6)}  # idempotent


def test_point_tag_lands_with_the_data_not_before(tmp_path: Path) -> None:
    """The completion tag is absent from the created run and present with the metrics."""
    tracker = Tracker(f"sqlite:///{tmp_path / 'mlflow.db'}", "order")
    parent = tracker.find_or_create_parent("sweep-2", "parent", {}, {})
    created: list[dict[str, str]] = []
    client = tracker.client
    real_create = client.create_run

    def spy(*args: object, **kwargs: object) -> object:
        created.append(dict(kwargs.get("tags") or {}))  # type: ignore[call-overload]
        return real_create(*args, **kwargs)

    client.create_run = spy
    tracker.log_children(parent, _rows(1), ["tp"], METRICS)
    assert created and "simsweep.point_hash" not in created[0]
    (status, metrics), = _state(tracker, parent)["h0"]
    assert status == "FINISHED" and metrics == {"iteration_time_s": 1.0, "mfu": 0.0}
