"""What a sweep shows in MLflow: children named by axis values with a small fixed set of metrics,
parent summaries under ``sweep.``, a description, previewable tables and offline plots, an
experiment that MLflow 3's UI opens on its runs table, and no empty ``Default`` experiment."""

from __future__ import annotations

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
