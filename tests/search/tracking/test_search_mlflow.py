"""``simsweep search`` end to end with a real MLflow SQLite store (and Ray) in tmp_path."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import mlflow
import optuna
import pytest
from mlflow import MlflowClient

from search.cli import main

optuna.logging.set_verbosity(optuna.logging.WARNING)


def _run(tmp_path: Path, *extra: str) -> int:
    return main(["search", "workload=gpt_tiny", "system.num_gpus=16", "parallel.global_batch=32",
                 f"search.output_dir={tmp_path / 'out'}", "search.study_name=m",
                 "search.batch_size=6", "search.n_startup_trials=4",
                 f"tracking.uri=sqlite:///{tmp_path / 'mlflow.db'}", "parallel.tp=choice(1,2,4)",
                 "parallel.recompute=choice(none,full)",
                 "system.scaleout.bandwidth_GBps=tag(log, interval(5,200))", *extra])


def _children(client: MlflowClient, parent: mlflow.entities.Run) -> list[mlflow.entities.Run]:
    return client.search_runs([parent.info.experiment_id],
                              filter_string=f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'",
                              max_results=1000)


def _parent(client: MlflowClient) -> mlflow.entities.Run:
    exp = client.get_experiment_by_name("search-m")
    assert exp is not None
    runs = client.search_runs([exp.experiment_id], filter_string="tags.`simsweep.study` = 'm'")
    assert len(runs) == 1
    return runs[0]


@pytest.mark.mlflow
def test_parent_children_plots_and_best(tmp_path: Path) -> None:
    assert _run(tmp_path, "search.n_trials=12", "search.in_process=true",
                "search.objectives=[iteration_time_s,capex_usd]") == 0
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    parent = _parent(client)
    children = _children(client, parent)
    assert sorted(r.data.tags["simsweep.point_hash"] for r in children) == sorted(
        f"trial-{n}" for n in range(12))
    for run in children:
        assert {"parallel.tp", "parallel.recompute", "system.scaleout.bandwidth_GBps"} <= set(
            run.data.params)
        assert run.data.tags["simsweep.feasible"] in ("True", "False")
        if run.data.tags["simsweep.feasible"] == "True":
            assert run.data.metrics["iteration_time_s"] > 0 and run.data.metrics["capex_usd"] > 0
    artifacts = {a.path for a in client.list_artifacts(parent.info.run_id)}
    plots = {a.path for a in client.list_artifacts(parent.info.run_id, "plots")}
    assert "results.parquet" in artifacts
    assert {"plots/optuna.html", "plots/pareto_front.png", "plots/optimization_history.png"} <= plots
    assert {"best_trials.json", "results.json"} <= artifacts
    for run in children:  # named by the trial's values; a small fixed set of metrics
        n = run.data.tags["simsweep.point_hash"].split("-")[1]
        assert run.info.run_name.startswith(f"#{n} ") and "tp=" in run.info.run_name
        assert set(run.data.metrics) <= {"iteration_time_s", "capex_usd", "mfu", "feasible",
                                         "peak_memory_gib", "exposed_comm_s", "bubble_s",
                                         "samples_per_s", "tokens_per_s", "cost_usd_per_iter"}
    note = parent.data.tags["mlflow.note.content"]
    assert "Pareto front" in note and "iteration_time_s" in note
    assert not any(k.startswith(("objective.", "best")) for k in parent.data.metrics)
    best = [r for r in children if r.data.tags.get("simsweep.best") == "true"]
    assert best and all(r.data.tags["simsweep.feasible"] == "True" for r in best)
    final = client.get_run(parent.info.run_id).data.metrics
    assert final["study.n_trials"] == 12 and final["study.n_best"] == len(best)


@pytest.mark.mlflow
@pytest.mark.ray
@pytest.mark.slow
def test_ray_pool_and_resume_log_each_trial_once(tmp_path: Path) -> None:
    import ray

    ray_dir = f"/tmp/rs_optuna_{os.getpid()}"  # short: Ray's socket paths stay under 107 bytes
    try:
        assert _run(tmp_path, "search.n_trials=8", "ray.num_workers=2",
                    f"ray.temp_dir={ray_dir}") == 0
    finally:
        ray.shutdown()
        shutil.rmtree(ray_dir, ignore_errors=True)
    assert _run(tmp_path, "search.n_trials=14", "search.resume=true", "search.in_process=true") == 0
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    hashes = [r.data.tags["simsweep.point_hash"] for r in _children(client, _parent(client))]
    assert sorted(hashes) == sorted(f"trial-{n}" for n in range(14))
