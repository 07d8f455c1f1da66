"""The study parent run's headline params name a searched key by its dimension
(``search.space``), never by the base config's value: with the ``workload`` group searched, no
``workload.name`` of one option. Real MLflow: a SQLite store in tmp_path."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest
from mlflow import MlflowClient

from search.cli import main

optuna.logging.set_verbosity(optuna.logging.WARNING)
pytestmark = [pytest.mark.mlflow]


def test_a_searched_config_group_is_not_logged_as_a_fixed_param(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'mlflow.db'}"
    assert main(["search", "workload=choice(gpt_tiny,gpt_1b)", "parallel.tp=choice(1,2)",
                 "system.num_gpus=8", "parallel.global_batch=16", "search.study_name=pp",
                 "search.n_trials=4", "search.in_process=true", "ray.temp_dir=/tmp/s17/fk",
                 f"tracking.uri={db}", f"search.output_dir={tmp_path / 'out'}"]) == 0
    client = MlflowClient(db)
    exp = client.get_experiment_by_name("search-pp")
    assert exp is not None
    (parent,) = client.search_runs([exp.experiment_id], filter_string="tags.`simsweep.study` = 'pp'")
    params = parent.data.params
    assert params["search.space"] == "workload, parallel.tp"
    assert "workload.name" not in params and "parallel.tp" not in params
    assert params["system.num_gpus"] == "8" and params["parallel.global_batch"] == "16"
    assert params["search.n_trials"] == "4"
