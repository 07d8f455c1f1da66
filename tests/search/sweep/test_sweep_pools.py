"""A sweep over how many nodes of each device to buy (HAP's V100 : P100 mix).

``system.pools.<i>.count`` is a sweep axis; ``num_gpus`` follows the pool counts
(``${pool_gpus:...}`` in the preset), every point records ``pool<i>_accelerator`` /
``pool<i>_count``, and the capital cost is summed over the pools (each accelerator at its
preset's price: V100 8,000 USD, P100 5,000 USD, conf/system/accelerator/).
"""

from __future__ import annotations

import polars as pl
import pytest
from mlflow import MlflowClient

from search.sweep.driver import run_sweep

MIX = ("system=mixed_v100_p100", "system.pools.0.count=16,32", "system.pools.1.count=16,32",
       "workload=gpt_tiny", "parallel.global_batch=192", "parallel.micro_batch=1", "parallel.precision=fp16")
POOL_COLUMNS = ["pool0_accelerator", "pool0_count", "pool1_accelerator", "pool1_count"]


def test_pool_counts_are_structural_axes_with_num_gpus_following(plan_for):
    plan = plan_for(*MIX, "tracking.enabled=false")
    assert plan.num_points == 4 and plan.hardware == {}
    assert [c.system.num_gpus for c in plan.combos] == [32, 48, 48, 64]
    assert plan.param_keys == ["system.pools.0.count", "system.pools.1.count", *POOL_COLUMNS]
    cols = plan.param_columns
    assert cols["pool0_count"].tolist() == [16, 16, 32, 32]
    assert cols["pool1_count"].tolist() == [16, 32, 16, 32]
    assert set(cols["pool0_accelerator"].tolist()) == {"v100_32g"}
    assert set(cols["pool1_accelerator"].tolist()) == {"p100_16g"}


def test_one_pool_cluster_adds_no_pool_columns(plan_for):
    plan = plan_for("parallel.tp=1,2", "tracking.enabled=false")
    assert plan.derived == {} and plan.param_keys == ["parallel.tp"]


def test_a_pool_count_that_breaks_whole_nodes_is_refused_before_any_work(plan_for):
    from simcore.errors import InputError

    with pytest.raises(InputError, match=r"num_gpus=28: must be a multiple of gpus_per_node=8"):
        plan_for("system=mixed_v100_p100", "system.pools.1.count=12,16", "tracking.enabled=false")


@pytest.mark.ray
@pytest.mark.mlflow
def test_mix_sweep_lands_pools_in_parquet_and_mlflow(ray_local, plan_for, tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    plan = plan_for(*MIX, "sweep.name=mix", f"sweep.output_dir={tmp_path / 'out'}",
                    f"tracking.uri={uri}")
    outcome = run_sweep(plan, plan.base_cfg)
    assert outcome.computed == 4 and outcome.tracking_ok, outcome.tracking_error
    table = pl.read_parquet(tmp_path / "out" / "results.parquet").sort("point_id")
    assert set(POOL_COLUMNS) <= set(table.columns)
    assert table["pool0_count"].to_list() == [16, 16, 32, 32]
    assert table["pool1_count"].to_list() == [16, 32, 16, 32]
    assert table["pool1_accelerator"].to_list() == ["p100_16g"] * 4
    assert table["feasible"].all(), table["reason"].to_list()
    capex = table["capex_usd"].to_list()
    # summed over pools: the cost of 16 more GPUs is the same whatever the other pool holds,
    # and 16 V100 cost 16 x (8,000 - 5,000) USD more than 16 P100 (same node, power, network)
    assert capex[2] - capex[0] == pytest.approx(capex[3] - capex[1])
    assert capex[1] - capex[0] == pytest.approx(capex[3] - capex[2])
    assert (capex[2] - capex[0]) - (capex[1] - capex[0]) == pytest.approx(16 * 3000.0)
    power = table["power_kw"].to_list()
    assert power[1] - power[0] == pytest.approx(power[2] - power[0])  # both TDP 300 W
    assert power[3] > power[1] > power[0]

    client = MlflowClient(uri)
    exp = client.get_experiment_by_name("sweep-mix")
    runs = client.search_runs([exp.experiment_id], max_results=100)
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == outcome.parent_run_id]
    assert len(children) == 4
    row = table.filter(pl.col("pool0_count") == 32, pl.col("pool1_count") == 16).row(0, named=True)
    run = next(r for r in children if r.data.tags["simsweep.point_hash"] == row["point_hash"])
    assert run.data.params["pool0_count"] == "32" and run.data.params["pool1_count"] == "16"
    assert run.data.params["pool0_accelerator"] == "v100_32g"
    assert run.data.params["pool1_accelerator"] == "p100_16g"
    assert run.data.params["system.pools.0.count"] == "32"
    assert "pool0_count" not in run.data.metrics
    assert run.data.metrics["iteration_time_s"] == row["iteration_time_s"]
    assert run.data.metrics["capex_usd"] == row["capex_usd"]


SHARES = ("system=mixed_v100_p100", "workload=gpt_tiny", "parallel.global_batch=192",
          "parallel.micro_batch=1", "parallel.precision=fp16", "parallel.work_shares.1=1.0,0.55")


def test_work_split_and_per_pool_shares_are_sweep_axes(plan_for):
    """``parallel.work_split`` is an axis without ``+``; ``parallel.work_shares.<i>`` composes
    one share list with the split explicit, and every point equals its plan simulated alone."""
    from dataclasses import replace

    from simcore.api import simulate_batch

    plan = plan_for(*SHARES[:-1], "parallel.work_split=even,balanced", "tracking.enabled=false")
    assert [c.parallel.work_split for c in plan.combos] == ["even", "balanced"]
    plan = plan_for(*SHARES, "tracking.enabled=false")
    assert plan.param_keys[0] == "parallel.work_shares.1"
    assert plan.param_columns["parallel.work_shares.1"].tolist() == [1.0, 0.55]
    assert [(c.parallel.work_split, c.parallel.work_shares) for c in plan.combos] == [
        ("explicit", (1.0, 1.0)), ("explicit", (1.0, 0.55))]
    even = replace(plan.combos[0].parallel, work_split="even", work_shares=None)
    t = [simulate_batch(c.model, c.parallel, [c.system]).iteration_time_s[0] for c in plan.combos]
    assert t[0] == simulate_batch(plan.combos[0].model, even, [plan.combos[0].system]
                                  ).iteration_time_s[0]
    assert t[1] < t[0]  # less work on the slower P100s
    with pytest.raises(Exception, match="work_shares"):
        plan_for(*SHARES, "parallel.work_split=even,explicit", "tracking.enabled=false")


@pytest.mark.ray
@pytest.mark.mlflow
def test_share_sweep_lands_shares_in_parquet_and_mlflow(ray_local, plan_for, tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    plan = plan_for(*SHARES, "sweep.name=shares", f"sweep.output_dir={tmp_path / 'out'}",
                    f"tracking.uri={uri}")
    outcome = run_sweep(plan, plan.base_cfg)
    assert outcome.computed == 2 and outcome.tracking_ok, outcome.tracking_error
    table = pl.read_parquet(tmp_path / "out" / "results.parquet").sort("point_id")
    assert table["parallel.work_shares.1"].to_list() == [1.0, 0.55]
    t = table["iteration_time_s"].to_list()
    assert t[1] < t[0]
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name("sweep-shares")
    runs = client.search_runs([exp.experiment_id], max_results=10)
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == outcome.parent_run_id]
    assert sorted(r.data.params["parallel.work_shares.1"] for r in children) == ["0.55", "1.0"]
