"""The whole path of a user's PyTorch model: trace it (``simsweep trace``), sweep the traced
workload over tensor parallelism and scale-up bandwidth on a real local Ray with a real MLflow
SQLite store; every point equals a direct simulation of its freshly composed config and lands
as one child run."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from mlflow import MlflowClient

from search.cli import main as cli
from search.config.build import build_specs
from search.config.compose import compose_session
from search.sweep.driver import run_sweep
from simcore.api import simulate_batch

pytestmark = [pytest.mark.ray, pytest.mark.mlflow]

CONF = Path(__file__).resolve().parents[3] / "conf"


def test_traced_model_swept_over_hardware_into_mlflow(ray_local, plan_for, tmp_path):
    pytest.importorskip("torch")
    prefix = tmp_path / "gpt"
    assert cli(["trace", "tests.simcore.traces.pytorch.gpt:GPTLM", "--input-shape", "2x128:int64",
                "--dtype", "bfloat16", "--blocks", "blocks", "--out", str(prefix), "--kwargs",
                '{"layers": 2, "hidden": 128, "heads": 4, "vocab": 512, "tie": true}']) == 0
    base = ("workload=traced", f"workload.trace={prefix}.0.et", "system.num_gpus=8",
            "parallel.micro_batch=2", "parallel.global_batch=16")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    plan = plan_for("parallel.tp=1,2", "system.scaleup.bandwidth_GBps=100,400", *base,
                    "sweep.name=traced", f"sweep.output_dir={tmp_path / 'out'}",
                    f"tracking.uri={uri}")
    assert plan.num_points == 4
    outcome = run_sweep(plan, plan.base_cfg)
    assert outcome.computed == 4 and outcome.tracking_ok, outcome.tracking_error
    table = pl.read_parquet(tmp_path / "out" / "results.parquet")
    assert table["feasible"].all(), table["reason"].to_list()
    compose, _ = compose_session(CONF)
    for row in table.iter_rows(named=True):
        cfg = compose([*base, f"parallel.tp={row['parallel.tp']}",
                       f"system.scaleup.bandwidth_GBps={row['system.scaleup.bandwidth_GBps']}"])
        model, parallel, system = build_specs(cfg)
        direct = float(simulate_batch(model, parallel, [system]).iteration_time_s[0])
        assert row["iteration_time_s"] == pytest.approx(direct, rel=1e-12)
    tp2 = table.filter(pl.col("parallel.tp") == 2).sort("system.scaleup.bandwidth_GBps")
    assert tp2["iteration_time_s"][0] > tp2["iteration_time_s"][1]  # TP all-reduces on NVLink
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name("sweep-traced")
    runs = client.search_runs([exp.experiment_id], max_results=100)
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == outcome.parent_run_id]
    assert len(children) == 4
    by_hash = {r.data.tags["simsweep.point_hash"]: r for r in children}
    for row in table.iter_rows(named=True):
        assert by_hash[row["point_hash"]].data.metrics["iteration_time_s"] == row["iteration_time_s"]
