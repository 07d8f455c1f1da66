"""A sweep on an existing two-node Ray cluster (ray.cluster_utils.Cluster on this machine).

The driver joins with ``ray.address=<head address>``, ships simcore/ and search/ as runtime_env
py_modules, and its two actors (one CPU each, SPREAD) run batches on both nodes.
"""

from __future__ import annotations

import os
import shutil

import polars as pl
import pytest

from search.sweep.driver import run_sweep

pytestmark = [pytest.mark.slow, pytest.mark.ray]


def test_batches_run_on_both_nodes_of_a_cluster(plan_for, tmp_path, monkeypatch):
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    temp = f"/tmp/rs_c{os.getpid()}"
    os.makedirs(f"{temp}/ray", exist_ok=True)
    monkeypatch.setenv("RAY_TMPDIR", temp)  # Cluster writes its address file there, not /tmp/ray
    import ray
    from ray.cluster_utils import Cluster

    assert not ray.is_initialized()
    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "include_dashboard": False, "temp_dir": temp})
    try:
        cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        plan = plan_for("parallel.tp=1,2", "system.scaleout.bandwidth_GBps=range(25,401,25)",
                        "sweep.batch_size=4", "tracking.enabled=false",
                        f"sweep.output_dir={tmp_path}", f"ray.address={cluster.address}")
        outcome = run_sweep(plan, plan.base_cfg)
        assert not ray.is_initialized()  # the driver connected, so it also disconnected
        table = pl.read_parquet(tmp_path / "results.parquet")
        assert table.height == 32 and table["point_id"].n_unique() == 32
        assert len(outcome.batches_per_node) == 2, outcome.batches_per_node
        assert set(table["worker_node"].unique().to_list()) == set(outcome.batches_per_node)
        assert sum(outcome.batches_per_node.values()) == 8
    finally:
        cluster.shutdown()
        shutil.rmtree(temp, ignore_errors=True)
