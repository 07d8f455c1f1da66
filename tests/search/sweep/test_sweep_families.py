"""A sweep whose workload axis mixes families (ResNet-50, GNMT, DLRM) on a real local Ray with a
real MLflow SQLite store: every point lands with the same metric names in parquet and MLflow,
throughput as the family defines it (GNMT: target tokens; ResNet and DLRM: tokens = samples), and
the values equal a direct simulation of each freshly composed config.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest
from mlflow import MlflowClient

from search.config.build import build_specs
from search.config.compose import compose_session
from search.sweep.driver import run_sweep
from simcore.api import simulate_batch
from simcore.workloads.rnn.family import GNMTSpec

pytestmark = [pytest.mark.ray, pytest.mark.mlflow]

CONF = Path(__file__).resolve().parents[3] / "conf"
BASE = ("system.num_gpus=8", "parallel.global_batch=256", "parallel.micro_batch=32")


def test_workload_axis_mixing_families(ray_local, plan_for, tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    plan = plan_for("workload=resnet50,gnmt,dlrm", "system.endpoint.collective_engine=endpoint,ace",
                    *BASE, "sweep.name=fam", "sweep.batch_size=4",
                    f"sweep.output_dir={tmp_path / 'out'}", f"tracking.uri={uri}")
    assert plan.num_points == 6
    outcome = run_sweep(plan, plan.base_cfg)
    assert outcome.computed == 6 and outcome.tracking_ok, outcome.tracking_error
    table = pl.read_parquet(tmp_path / "out" / "results.parquet").sort("point_id")
    assert table["feasible"].all(), table["reason"].to_list()

    compose, _ = compose_session(CONF)
    for row in table.iter_rows(named=True):
        cfg = compose([*BASE, f"workload={row['workload']}", "system.endpoint."
                            f"collective_engine={row['system.endpoint.collective_engine']}"])
        model, parallel, system = build_specs(cfg)
        direct = float(simulate_batch(model, parallel, [system]).iteration_time_s[0])
        assert row["iteration_time_s"] == pytest.approx(direct, rel=1e-12)
        assert row["samples_per_s"] == pytest.approx(256 / direct, rel=1e-12)
        tokens = 256 * model.tgt_len if isinstance(model, GNMTSpec) else 256
        assert row["tokens_per_s"] == pytest.approx(tokens / direct, rel=1e-12)
    by_family = dict(zip(table["workload"], table["tokens_per_s"] / table["samples_per_s"],
                         strict=False))
    assert by_family["resnet50"] == pytest.approx(1.0) and by_family["dlrm"] == pytest.approx(1.0)
    assert by_family["gnmt"] > 1.0
    # ACE beats the endpoint engine for every family
    ace = table.filter(pl.col("system.endpoint.collective_engine") == "ace").sort("workload")
    nvl = table.filter(pl.col("system.endpoint.collective_engine") == "endpoint").sort("workload")
    assert np.all(ace["iteration_time_s"].to_numpy() < nvl["iteration_time_s"].to_numpy())

    client = MlflowClient(uri)
    exp = client.get_experiment_by_name("sweep-fam")
    runs = client.search_runs([exp.experiment_id], max_results=100)
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == outcome.parent_run_id]
    assert len(children) == 6
    names = {frozenset(r.data.metrics) for r in children}
    assert len(names) == 1  # one set of metric names across the families
    by_hash = {r.data.tags["simsweep.point_hash"]: r for r in children}
    for row in table.iter_rows(named=True):
        metrics = by_hash[row["point_hash"]].data.metrics
        for name in ("iteration_time_s", "samples_per_s", "tokens_per_s"):
            assert metrics[name] == row[name]


def _evaluate_plan(plan) -> dict[tuple, tuple[bool, str]]:
    """Every point of ``plan`` evaluated in process (the workers' code): axes -> (feasible, reason)."""
    from search.run.batch import evaluate_batch
    from search.sweep.driver import iter_batches

    out = {}
    keys = [a.key for a in plan.axes]
    for batch in iter_batches(plan, 8, np.array([], dtype=np.int64)):
        cols = evaluate_batch(batch)
        for j, i in enumerate(batch.point_ids.tolist()):
            axes = tuple(plan.columns[k][i] for k in keys)
            out[axes] = (bool(cols["feasible"][j]), str(cols["reason"][j]))
    return out


@pytest.mark.parametrize(("axes", "bad", "needle"), [
    # an unknown layer kind: the whole combination, one line naming key, value and rule
    (("workload=resnet50", "workload.block=auto,dense"), ("dense",),
     "invalid_spec: workload.block='dense': unknown layer kind; must be one of auto, basic, "
     "bottleneck"),
    (("workload=gnmt", "workload.cell=lstm,gru"), ("gru",),
     "invalid_spec: workload.cell='gru': unknown layer kind"),
    # a batch that does not divide into dp x micro-batch
    (("workload=resnet50", "parallel.micro_batch=32,3"), (3,),
     "parallel.global_batch=256: must be divisible by dp*micro_batch=24"),
    # an embedding table larger than any device (200M x 128 x 4 B = 95.4 GiB > 80 GiB)
    (("workload=dlrm", "parallel.ep=8", "workload.num_rows=1000000,200000000"), (200000000,),
     "workload.num_rows=200000000: one table (200000000 x 128 x 4 B = 95.4 GiB) is larger than "
     "any device (80 GiB)"),
])
def test_bad_inputs_are_infeasible_points_with_the_reason(plan_for, axes, bad, needle):
    plan = plan_for(*axes, *BASE[:2])
    results = _evaluate_plan(plan)
    assert len(results) == 2
    for point, (feasible, reason) in results.items():
        if point == bad:
            assert not feasible and reason.startswith(needle) and "\n" not in reason, reason
        else:
            assert feasible and reason == "", reason
