"""The saved runs-table view of a sweep or a study lists its feasible points only: an
out-of-memory point still logs ``iteration_time_s`` (often the smallest: no recompute, a large
micro-batch) and would top the objective order. Real MLflow (a SQLite store in tmp_path): the
view state's filter, run through MLflow's own search API as the UI sends it, returns exactly
the feasible child runs, best first; the infeasible ones stay one filter away."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from mlflow import MlflowClient

from search.cli import main as simsweep
from search.sweep.driver import run_sweep
from search.tracking.client import FEASIBLE_CLAUSE, view_filter

pytestmark = [pytest.mark.mlflow]

#: GPT-3 XL on 8 A100s: micro-batch 64 without recompute runs out of memory and is the fastest
#: point of the grid (a measured, not a physical, iteration time)
AXES = ("workload=gpt_1b", "system.num_gpus=8", "parallel.global_batch=512",
        "parallel.tp=1,2", "parallel.micro_batch=8,64", "parallel.recompute=none,full")


def _sweep(plan_for: Any, tmp_path: Path, *extra: str,
           axes: tuple[str, ...] = AXES) -> tuple[MlflowClient, Any, pl.DataFrame]:
    db = f"sqlite:///{tmp_path / 'mlflow.db'}"
    plan = plan_for(*axes, "sweep.name=fv", "sweep.in_process=true", f"tracking.uri={db}",
                    f"sweep.output_dir={tmp_path / 'sw'}", *extra)
    outcome = run_sweep(plan, plan.base_cfg)
    assert outcome.tracking_ok, outcome.tracking_error
    client = MlflowClient(db)
    exp = client.get_experiment_by_name("sweep-fv")
    return client, exp, pl.read_parquet(tmp_path / "sw" / "results.parquet")


def _children(client: MlflowClient, exp: Any, parent_id: str, filter_string: str | None = None,
              order_by: list[str] | None = None) -> list[Any]:
    return client.search_runs(
        [exp.experiment_id], max_results=1000, order_by=order_by,
        filter_string=filter_string or f"tags.`mlflow.parentRunId` = '{parent_id}'")


def _view_runs(client: MlflowClient, exp: Any, parent_id: str) -> list[Any]:
    """The runs the UI lists for the saved view: its filter and order, through MLflow's API."""
    view = json.loads(exp.tags[f"mlflow.sharedViewState.{parent_id}"])
    order = f"{view['orderByKey']} {'ASC' if view['orderByAsc'] else 'DESC'}"
    return _children(client, exp, parent_id, view["searchFilter"], [order])


def test_sweep_view_lists_the_feasible_points_best_first(plan_for, tmp_path):
    client, exp, table = _sweep(plan_for, tmp_path)
    fastest = table.sort("iteration_time_s").row(0, named=True)
    assert not fastest["feasible"]  # the premise: an infeasible point has the lowest time
    parent_id = exp.tags["simsweep.view"]
    view = json.loads(exp.tags[f"mlflow.sharedViewState.{parent_id}"])
    assert view["searchFilter"] == view_filter(parent_id) == (
        f"tags.`mlflow.parentRunId` = '{parent_id}' and metrics.`feasible` = 1")
    assert view["orderByKey"] == "metrics.`iteration_time_s`" and view["orderByAsc"] is True
    children = _children(client, exp, parent_id)
    assert len(children) == table.height == 8
    shown = _view_runs(client, exp, parent_id)
    feasible = table.filter(pl.col("feasible")).sort("iteration_time_s")
    assert 0 < feasible.height < table.height
    assert [r.data.tags["simsweep.point_hash"] for r in shown] == feasible["point_hash"].to_list()
    assert all(r.data.metrics["feasible"] == 1 for r in shown)
    # the infeasible points stay reachable: `= 0` in the search box lists exactly them
    hidden = _children(client, exp, parent_id,
                       view["searchFilter"].replace(FEASIBLE_CLAUSE, "metrics.`feasible` = 0"))
    assert sorted(r.data.tags["simsweep.point_hash"] for r in hidden) == sorted(
        table.filter(~pl.col("feasible"))["point_hash"].to_list())
    assert all(r.data.tags["simsweep.reason"].startswith("out of memory") for r in hidden)
    note = client.get_run(parent_id).data.tags["mlflow.note.content"]
    assert FEASIBLE_CLAUSE in note and "metrics.`feasible` = 0" in note


def test_sweep_with_no_feasible_point_shows_every_point(plan_for, tmp_path):
    client, exp, table = _sweep(plan_for, tmp_path, axes=(
        *AXES[:4], "parallel.micro_batch=64", "parallel.recompute=none"))
    assert table.height == 2 and not table["feasible"].any()
    parent_id = exp.tags["simsweep.view"]
    view = json.loads(exp.tags[f"mlflow.sharedViewState.{parent_id}"])
    assert view["searchFilter"] == f"tags.`mlflow.parentRunId` = '{parent_id}'"
    assert len(_view_runs(client, exp, parent_id)) == 2


def test_study_view_lists_the_feasible_trials(tmp_path):
    db = f"sqlite:///{tmp_path / 'mlflow.db'}"
    assert simsweep(["search", "workload=gpt_1b", "system.num_gpus=8",
                     "parallel.global_batch=512", f"search.output_dir={tmp_path / 'st'}",
                     "search.study_name=fv", "search.n_trials=8", "search.batch_size=8",
                     "search.in_process=true", "search.sampler=grid", f"tracking.uri={db}",
                     "parallel.tp=choice(1,2)", "parallel.micro_batch=choice(8,64)",
                     "parallel.recompute=choice(none,full)"]) == 0
    client = MlflowClient(db)
    exp = client.get_experiment_by_name("search-fv")
    parent_id = exp.tags["simsweep.view"]
    children = _children(client, exp, parent_id)
    assert len(children) == 8
    feasible = {r.data.tags["simsweep.point_hash"] for r in children
                if r.data.tags["simsweep.feasible"] == "True"}
    assert 0 < len(feasible) < 8
    fastest = min(children, key=lambda r: r.data.metrics.get("iteration_time_s", float("inf")))
    assert fastest.data.tags["simsweep.feasible"] == "False"  # the premise, as in the sweep
    shown = _view_runs(client, exp, parent_id)
    assert {r.data.tags["simsweep.point_hash"] for r in shown} == feasible
    times = [r.data.metrics["iteration_time_s"] for r in shown]
    assert times == sorted(times)
    note = client.get_run(parent_id).data.tags["mlflow.note.content"]
    assert FEASIBLE_CLAUSE in note
