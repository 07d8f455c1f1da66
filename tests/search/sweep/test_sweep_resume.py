"""A driver killed mid-sweep (SIGKILL) resumes with sweep.resume=true: no duplicate, no recompute.

The sweep runs as a real ``simsweep sweep`` subprocess (own local Ray, real MLflow SQLite store)
and is killed, with its whole process group, once a few result parts are on disk. Resuming in
the same output folder must compute exactly the points missing from disk and leave one parent
run and exactly one child run per point in MLflow.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest
from mlflow import MlflowClient

from search.run.tables import ResultsStore
from search.sweep.driver import run_sweep
from tests.search.mlflow_server import logged_children

ROOT = Path(__file__).resolve().parents[3]
AXES = ("parallel.tp=1,2", "system.scaleout.bandwidth_GBps=range(25,401,25)",
        "system.scaleup.bandwidth_GBps=150,300,450,900")
N = 128
pytestmark = [pytest.mark.slow, pytest.mark.ray, pytest.mark.mlflow]


def _children(uri: str, name: str) -> tuple[int, list[str]]:
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name(f"sweep-{name}")
    runs = client.search_runs([exp.experiment_id], max_results=5000)
    parents = [r for r in runs if r.data.tags.get("simsweep.kind") == "sweep"]
    # a child run is complete once it carries its point hash (written with its data); one cut
    # off by the kill before that has none, and resume / sync repair it
    return len(parents), [r.data.tags["simsweep.point_hash"] for r in runs
                          if r.data.tags.get("simsweep.kind") == "point"
                          and "simsweep.point_hash" in r.data.tags]


def test_killed_driver_resumes_without_duplicates_or_recomputation(ray_local, plan_for, tmp_path,
                                                                   request):
    out, uri = tmp_path / "out", f"sqlite:///{tmp_path / 'mlflow.db'}"
    ray_dir = f"/tmp/rs_{os.getpid()}_k"  # short: Ray's socket paths stay under 107 bytes
    request.addfinalizer(lambda: shutil.rmtree(ray_dir, ignore_errors=True))
    args = [*AXES, "sweep.name=resume", "sweep.batch_size=4", "sweep.flush_interval_s=0",
            f"sweep.output_dir={out}", f"tracking.uri={uri}", "sweep.progress=false",
            "tracking.async_logging=false",  # MLflow keeps pace with the table: a kill lands mid-way
            f"ray.temp_dir={ray_dir}"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAY_USAGE_STATS_ENABLED": "0"}
    # the store's tables exist before the sweep starts, so its MLflow session is open before the
    # first batch (a new store takes seconds, and batches do not wait for it: the whole sweep
    # could be on disk before the first child run, and the kill would land after the work)
    MlflowClient(uri).search_experiments()
    proc = subprocess.Popen([sys.executable, "-m", "search.cli", "sweep", *args], cwd=tmp_path,
                            env=env, start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    deadline = time.monotonic() + 240
    try:
        while len(list((out / "results").glob("part-*.parquet"))) < 3 or logged_children(tmp_path / 'mlflow.db') < 4:
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:] if proc.stderr else ""
            assert time.monotonic() < deadline, "sweep never wrote results"
            time.sleep(0.2)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the driver and the Ray processes it started
        proc.wait()
    logged_before = _children(uri, "resume")[1]
    assert logged_before  # some child runs exist: the resumed sweep must not duplicate them
    on_disk = ResultsStore(out).done_ids()
    assert 0 < on_disk.size < N and len(set(on_disk.tolist())) == on_disk.size

    plan = plan_for(*AXES, "sweep.name=resume", f"sweep.output_dir={out}", "sweep.resume=true",
                    f"tracking.uri={uri}")
    outcome = run_sweep(plan, plan.base_cfg)
    assert outcome.skipped == on_disk.size
    assert outcome.computed == N - on_disk.size  # nothing on disk was recomputed
    table = pl.read_parquet(out / "results.parquet")
    assert table["point_id"].to_list() == list(range(N))
    parents, hashes = _children(uri, "resume")
    assert parents == 1
    assert len(hashes) == N and set(hashes) == set(table["point_hash"].to_list())
    # exactly once: every child FINISHED, with its data (a run cut off by the kill was repaired)
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name("sweep-resume")
    children = [r for r in client.search_runs([exp.experiment_id], max_results=5000)
                if r.data.tags.get("simsweep.kind") == "point"]
    assert all(r.info.status == "FINISHED" for r in children)
    feasible = set(table.filter(pl.col("feasible"))["point_hash"].to_list())
    assert all("iteration_time_s" in r.data.metrics for r in children
               if r.data.tags["simsweep.point_hash"] in feasible)
