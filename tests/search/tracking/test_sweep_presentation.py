"""What a sweep shows in MLflow: children named by axis values with a small fixed set of metrics,
parent summaries under ``sweep.``, a description, previewable tables and offline plots, an
experiment that MLflow 3's UI opens on its runs table, and no empty ``Default`` experiment."""

from __future__ import annotations

import json

import polars as pl
import pytest
from mlflow import MlflowClient

from search.sweep.driver import run_sweep

pytestmark = [pytest.mark.slow, pytest.mark.ray, pytest.mark.mlflow]


def test_sweep_reads_well_in_mlflow(ray_local, plan_for, tmp_path):
    db = f"sqlite:///{tmp_path / 'mlflow.db'}"
    plan = plan_for("parallel.tp=1,2", "system.scaleout.bandwidth_GBps=50,400", "sweep.name=look",
                    f"sweep.output_dir={tmp_path / 'sw'}", f"tracking.uri={db}")
    outcome = run_sweep(plan, plan.base_cfg)
    assert outcome.tracking_ok, outcome.tracking_error
    client = MlflowClient(db)
    assert client.get_experiment("0").lifecycle_stage == "deleted"
    exp = client.get_experiment_by_name("sweep-look")
    assert exp.tags["mlflow.experimentKind"] == "custom_model_development"
    runs = client.search_runs([exp.experiment_id], max_results=100)
    parent = next(r for r in runs if r.data.tags.get("simsweep.kind") == "sweep")
    children = [r for r in runs if r.data.tags.get("simsweep.kind") == "point"]
    names = sorted(r.info.run_name for r in children)
    assert names == sorted(f"tp={tp} bandwidth_GBps={bw}" for tp in (1, 2) for bw in (50, 400))
    for run in children:
        assert set(run.data.params) == {"parallel.tp", "system.scaleout.bandwidth_GBps"}
        assert set(run.data.metrics) <= {"iteration_time_s", "mfu", "peak_memory_gib", "feasible",
                                         "exposed_comm_s", "bubble_s", "samples_per_s",
                                         "tokens_per_s", "cost_usd_per_iter", "capex_usd"}
        assert "iteration_time_s" in run.data.metrics or run.data.metrics["feasible"] == 0
    assert all(k.startswith("sweep.") for k in parent.data.metrics)
    assert parent.data.metrics["sweep.num_points"] == 4
    assert len(parent.data.params) < 15
    note = parent.data.tags["mlflow.note.content"]
    assert "Sweep `look`" in note and "best" in note
    files = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert {"results.parquet", "results.csv", "results.json", "summary.txt"} <= files
    plots = {a.path: a.file_size for a in client.list_artifacts(parent.info.run_id, "plots")}
    assert {"plots/sweep.html", "plots/objective_vs_axes.png", "plots/pareto_time_cost.png"} <= set(
        plots)
    assert plots["plots/sweep.html"] < 6_000_000  # one plotly bundle for the whole page
    page = (tmp_path / "sw" / "plots" / "sweep.html").read_text()
    assert page.count("plotly.js v") == 1 and '<script src="http' not in page  # offline
    # the saved runs-table view the printed link opens: this sweep's feasible children, sorted by the
    # objective, with the axes and a few metrics as columns
    view = json.loads(exp.tags[f"mlflow.sharedViewState.{parent.info.run_id}"])
    assert exp.tags["simsweep.view"] == parent.info.run_id
    assert view["searchFilter"] == (f"tags.`mlflow.parentRunId` = '{parent.info.run_id}' "
                                    "and metrics.`feasible` = 1")  # its feasible children
    assert view["orderByKey"] == "metrics.`iteration_time_s`" and view["orderByAsc"] is True
    assert view["selectedColumns"][:2] == ["params.`parallel.tp`",
                                           "params.`system.scaleout.bandwidth_GBps`"]
    assert "metrics.`iteration_time_s`" in view["selectedColumns"]
    # each child spans its share of its batch's evaluation time (not 0 ms)
    table = pl.read_parquet(tmp_path / "sw" / "results.parquet")
    by_hash = {r.data.tags["simsweep.point_hash"]: r for r in children}
    for row in table.iter_rows(named=True):
        run = by_hash[row["point_hash"]]
        assert run.info.start_time == round(row["eval_start_unix_s"] * 1000)
        assert run.info.end_time == round((row["eval_start_unix_s"] + row["eval_wall_s"]) * 1000)
    for _, batch in table.group_by("batch_id"):
        starts = batch["eval_start_unix_s"].sort().to_list()
        walls = batch["eval_wall_s"].to_list()
        assert len(set(walls)) == 1 and walls[0] > 0  # 1/B of the batch's time each
        # unix seconds near 1.8e9 carry ~2.4e-7 s of float64 resolution: compare to 1 us
        assert all(b - a == pytest.approx(walls[0], abs=1e-6)
                   for a, b in zip(starts, starts[1:], strict=False))
    spans = [r.info.end_time - r.info.start_time for r in children]
    assert sum(spans) > 0 and min(r.info.start_time for r in children) > 0
