"""The sweep parent run's headline params name a swept key by its axis (``sweep.axes``), never
by the base config's value: with ``workload`` swept, no ``workload.name`` of one option.
Real MLflow: a SQLite store in tmp_path."""

from __future__ import annotations

import pytest
from mlflow import MlflowClient

from search.sweep.driver import run_sweep

pytestmark = [pytest.mark.mlflow]


def test_a_swept_config_group_is_not_logged_as_a_fixed_param(plan_for, tmp_path):
    db = f"sqlite:///{tmp_path / 'mlflow.db'}"
    plan = plan_for("workload=gpt_tiny,gpt_1b", "parallel.tp=1,2", "system.num_gpus=8",
                    "parallel.global_batch=16", "sweep.name=pp", "sweep.in_process=true",
                    f"tracking.uri={db}", f"sweep.output_dir={tmp_path / 'sw'}")
    outcome = run_sweep(plan, plan.base_cfg)
    assert outcome.tracking_ok, outcome.tracking_error
    params = MlflowClient(db).get_run(outcome.parent_run_id).data.params
    assert params["sweep.axes"] == "workload, parallel.tp"
    assert "workload.name" not in params and "parallel.tp" not in params
    assert params["system.num_gpus"] == "8" and params["parallel.global_batch"] == "16"
