"""Beyond ``tracking.child_runs_max`` points a sweep logs child runs for its best
``tracking.best_child_runs`` feasible points, whatever ``sweep.top_k`` (the best points printed
in the summary) is. Real MLflow: a SQLite store in tmp_path."""

from __future__ import annotations

import polars as pl
import pytest
from mlflow import MlflowClient

from search.sweep.driver import run_sweep

pytestmark = [pytest.mark.mlflow]


def test_best_child_runs_decides_beyond_child_runs_max(plan_for, tmp_path):
    """8 points (3 of them out of memory) over ``child_runs_max`` 4: the best 5 feasible
    points get child runs, although ``sweep.top_k`` is 2."""
    db = f"sqlite:///{tmp_path / 'mlflow.db'}"
    plan = plan_for("workload=gpt_1b", "system.num_gpus=8", "parallel.global_batch=512",
                    "parallel.tp=1,2", "parallel.micro_batch=8,64", "parallel.recompute=none,full",
                    "sweep.name=bc", "sweep.in_process=true", f"tracking.uri={db}",
                    f"sweep.output_dir={tmp_path / 'sw'}", "tracking.child_runs_max=4",
                    "tracking.best_child_runs=5", "sweep.top_k=2")
    outcome = run_sweep(plan, plan.base_cfg)
    assert outcome.tracking_ok, outcome.tracking_error
    client = MlflowClient(db)
    exp = client.get_experiment_by_name("sweep-bc")
    children = client.search_runs(
        [exp.experiment_id], max_results=100,
        filter_string=f"tags.`mlflow.parentRunId` = '{outcome.parent_run_id}'")
    table = pl.read_parquet(tmp_path / "sw" / "results.parquet")
    best = table.filter(pl.col("feasible")).sort("iteration_time_s").head(5)
    assert table.height == 8 and best.height == 5
    assert sorted(r.data.tags["simsweep.point_hash"] for r in children) == sorted(
        best["point_hash"].to_list())
    assert "best 2 by iteration_time_s" in (tmp_path / "sw" / "summary.txt").read_text()
