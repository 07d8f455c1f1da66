"""A sweep that starts its own local Ray stops it while its final step runs (search/sweep/driver.py)."""

from __future__ import annotations

import json
import shutil
import tempfile
import threading

import polars as pl
import pytest

from search.sweep.driver import run_sweep

pytestmark = [pytest.mark.ray, pytest.mark.mlflow]


def test_a_sweep_that_starts_ray_stops_it_and_still_finishes_everything(plan_for, tmp_path):
    import ray

    if ray.is_initialized():  # a Ray left by an earlier module of this process
        ray.shutdown()
    ray_tmp = tempfile.mkdtemp(prefix="rs_", dir="/tmp")  # short socket paths, created 0700
    try:
        plan = plan_for("parallel.tp=1,2", "system.scaleout.bandwidth_GBps=25,50,100",
                        "sweep.name=own", f"sweep.output_dir={tmp_path / 'out'}",
                        f"tracking.uri=sqlite:///{tmp_path / 'mlflow.db'}", "ray.num_workers=2",
                        f"ray.temp_dir={ray_tmp}", "sweep.progress=false")
        outcome = run_sweep(plan, plan.base_cfg)
        assert not ray.is_initialized()  # the sweep started it, so the sweep stopped it
    finally:
        if ray.is_initialized():
            ray.shutdown()
        shutil.rmtree(ray_tmp, ignore_errors=True)
    assert outcome.computed == 6 and outcome.tracking_ok, outcome.tracking_error
    out = tmp_path / "out"
    assert pl.read_parquet(out / "results.parquet")["point_id"].to_list() == list(range(6))
    assert "finding: best plan" in (out / "summary.txt").read_text()
    assert json.loads((out / "sweep.json").read_text())["tracking_synced"] is True
    assert outcome.finish_s > 0 and outcome.startup_s + outcome.eval_s + outcome.finish_s <= \
        outcome.wall_s
    assert not [t.name for t in threading.enumerate() if t.name.startswith("simsweep-")]
