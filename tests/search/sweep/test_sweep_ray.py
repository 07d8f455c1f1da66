"""End-to-end sweeps on a real local Ray (2 CPUs) with a real MLflow SQLite store.

A few hundred points must land in the parquet table and in MLflow with the same values, those
values must equal a direct single-point evaluation of a freshly composed config, and a worker
process killed mid-sweep must cost a retry, not a result.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from mlflow import MlflowClient

from search.sweep.driver import run_sweep

CONF = Path(__file__).resolve().parents[3] / "conf"
pytestmark = [pytest.mark.ray, pytest.mark.mlflow]

AXES = ("parallel.tp=1,2", "system.scaleout.bandwidth_GBps=range(25,401,25)",
        "system.scaleup.bandwidth_GBps=150,300,450,600,900,1200,1800,3600")


def test_sweep_lands_every_point_in_parquet_and_mlflow(ray_local, plan_for, tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    plan = plan_for(*AXES, "sweep.name=t256", "sweep.batch_size=32",
                    f"sweep.output_dir={tmp_path / 'out'}", f"tracking.uri={uri}")
    assert plan.num_points == 256 and set(plan.hardware) == set(AXES[i].split("=")[0] for i in (1, 2))
    outcome = run_sweep(plan, plan.base_cfg)
    table = pl.read_parquet(tmp_path / "out" / "results.parquet")
    assert outcome.computed == 256 and outcome.tracking_ok, outcome.tracking_error
    assert table["point_id"].to_list() == list(range(256))
    assert table["point_hash"].n_unique() == 256
    phases = (outcome.startup_s, outcome.eval_s, outcome.finish_s)
    assert min(phases) > 0 and sum(phases) <= outcome.wall_s, (phases, outcome.wall_s)
    assert outcome.driver_cpu_s > 0  # the driver's own CPU in the loop (the benchmark's)
    for key, col in plan.columns.items():
        assert np.array_equal(table[key].to_numpy(), col)

    client = MlflowClient(uri)
    exp = client.get_experiment_by_name("sweep-t256")
    runs = client.search_runs([exp.experiment_id], max_results=2000)
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == outcome.parent_run_id]
    assert len(runs) == 257 and len(children) == 256
    by_hash = {r.data.tags["simsweep.point_hash"]: r for r in children}
    assert set(by_hash) == set(table["point_hash"].to_list())
    for row in table.iter_rows(named=True):
        run = by_hash[row["point_hash"]]
        assert run.data.metrics["iteration_time_s"] == row["iteration_time_s"]
        assert run.data.params["parallel.tp"] == str(row["parallel.tp"])
    parent = client.get_run(outcome.parent_run_id)
    assert parent.data.metrics["sweep.num_points"] == 256
    names = {a.path for a in client.list_artifacts(outcome.parent_run_id)}
    assert {"results.parquet", "config.yaml", "plots"} <= names

    again = plan_for(*AXES, "sweep.name=t256", f"sweep.output_dir={tmp_path / 'out'}",
                     f"tracking.uri={uri}", "sweep.resume=true")
    redo = run_sweep(again, again.base_cfg)  # all on disk: no work, no new runs
    assert (redo.computed, redo.skipped, redo.parent_run_id) == (0, 256, outcome.parent_run_id)
    assert len(client.search_runs([exp.experiment_id], max_results=2000)) == 257


def test_table_values_equal_a_fresh_single_point_evaluation(ray_local, plan_for, tmp_path):
    from search.config.build import build_specs
    from search.config.compose import compose_session
    from simcore.api import simulate_batch

    plan = plan_for(*AXES, "tracking.enabled=false", f"sweep.output_dir={tmp_path}")
    outs = []
    run_sweep(plan, plan.base_cfg, on_batch=outs.append)
    # every batch reports the worker's CPU seconds (bench_sweep's per-worker CPU rate)
    assert outs and all(0.0 < o.cpu_s < 60.0 for o in outs)
    table = pl.read_parquet(tmp_path / "results.parquet")
    compose = compose_session(CONF)[0]
    for pid in (0, 77, 255):
        row = table.row(pid, named=True)
        point = [f"{k}={row[k]}" for k in plan.columns]
        model, parallel, system = build_specs(compose(point))
        single = simulate_batch(model, parallel, [system])
        assert row["iteration_time_s"] == pytest.approx(float(single.iteration_time_s[0]), rel=1e-12)
        assert row["feasible"] == bool(single.feasible[0])


def test_killed_worker_costs_a_retry_not_a_result(ray_local, plan_for, tmp_path):
    plan = plan_for(*AXES, "tracking.enabled=false", "sweep.batch_size=8",
                    f"sweep.output_dir={tmp_path}")
    killed: list[int] = []

    def kill_once(out):
        if not killed:
            killed.append(out.pid)
            os.kill(out.pid, signal.SIGKILL)

    outcome = run_sweep(plan, plan.base_cfg, on_batch=kill_once)
    table = pl.read_parquet(tmp_path / "results.parquet")
    assert killed and outcome.retries >= 1
    assert table.height == 256 and table["point_id"].n_unique() == 256
    assert outcome.computed == 256
