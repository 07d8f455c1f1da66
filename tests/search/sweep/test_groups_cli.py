"""The collective and memory groups reach the simulation: simulate CLI and a sweep over them."""

from __future__ import annotations

import json

import numpy as np
import pytest

from search.cli import main
from search.run.batch import evaluate_batch, materialize_systems
from search.sweep.driver import iter_batches


def _simulate(capsys: pytest.CaptureFixture[str], *overrides: str) -> dict[str, object]:
    assert main(["simulate", "system.num_gpus=16", "parallel.global_batch=32", *overrides, "--json"]) == 0
    out: dict[str, object] = json.loads(capsys.readouterr().out)
    return out


def test_simulate_collective_in_network_memory_pool(capsys: pytest.CaptureFixture[str]) -> None:
    base = _simulate(capsys)
    both = _simulate(capsys, "collective=in_network", "memory=pool")
    net = _simulate(capsys, "collective=in_network")
    assert both["feasible"] is True
    assert float(net["exposed_comm_dp_s"]) < float(base["exposed_comm_dp_s"])  # type: ignore[arg-type]
    assert float(both["peak_memory_gib"]) < float(base["peak_memory_gib"])  # type: ignore[arg-type]
    assert float(both["iteration_time_s"]) > float(net["iteration_time_s"])  # type: ignore[arg-type]


def test_bad_group_value_is_one_line_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "collective.all_reduce=[rign]"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "collective.all_reduce" in err


def test_sweep_over_collective_and_memory_groups(plan_for) -> None:  # type: ignore[no-untyped-def]
    plan = plan_for("system.num_gpus=16", "parallel.global_batch=32", "collective=default,ring,in_network",
                    "memory=default,per_node,pool")
    assert plan.num_points == 9
    rows: dict[tuple[str, str], dict[str, float]] = {}
    for batch in iter_batches(plan, 16, np.zeros(0, dtype=np.int64)):
        systems, _ = materialize_systems(batch)
        cols = evaluate_batch(batch)
        for j, s in enumerate(systems):
            assert s is not None
            rows[(s.collective.name, s.memory.name)] = {k: float(cols[k][j]) for k in (
                "iteration_time_s", "peak_memory_gib", "exposed_comm_dp_s")}
    assert len(rows) == 9
    assert rows[("in_network", "default")]["exposed_comm_dp_s"] < \
        rows[("default", "default")]["exposed_comm_dp_s"]
    for coll in ("default", "ring", "in_network"):
        local, node, pool = (rows[(coll, m)] for m in ("default", "per_node", "pool"))
        assert pool["peak_memory_gib"] == node["peak_memory_gib"] < local["peak_memory_gib"]
        # 16 GPUs share the 512 GB/s pool, 8 share each 128 GB/s node channel
        extra_pool = pool["iteration_time_s"] - local["iteration_time_s"]
        extra_node = node["iteration_time_s"] - local["iteration_time_s"]
        assert extra_node / extra_pool == pytest.approx((8 / 128) / (16 / 512), rel=1e-6)


def test_system_memory_axis_is_vectorized_and_equals_a_full_composition(plan_for) -> None:  # type: ignore[no-untyped-def]
    from search.config.build import build_specs
    from search.config.compose import compose_session
    from search.sweep.plan import format_value
    from tests.search.conftest import CONF

    plan = plan_for("memory=pool", "system.memory.bandwidth_GBps=128,512")
    assert plan.hardware == {"system.memory.bandwidth_GBps": "memory.bandwidth_GBps"}
    compose = compose_session(CONF)[0]
    for batch in iter_batches(plan, 16, np.zeros(0, dtype=np.int64)):
        systems, _ = materialize_systems(batch)
        for pid, system in zip(batch.point_ids.tolist(), systems, strict=True):
            value = format_value(plan.columns["system.memory.bandwidth_GBps"][pid])
            full = build_specs(compose(["memory=pool", f"+system.memory.bandwidth_GBps={value}"]))
            assert system == full[2] and system.memory.kind == "pool"
