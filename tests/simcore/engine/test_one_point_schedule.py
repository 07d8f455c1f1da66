"""One design point on a plan whose levels were never compiled is scheduled by a Kahn peel in
Python (``chain_starts_one``): the same starts, bit for bit, as the numpy level loop, the
levels stay uncompiled, and a cycle is still reported (on first use)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from simcore import GraphBuilder, NodeKind, compile_plan
from simcore.api import _compiled, compiled_workload
from simcore.engine.schedule import (
    NodeLevel,
    SchedulePlan,
    plan_from_chains,
    run_chains,
    run_chains_by_level,
)
from simcore.errors import InputError
from simcore.ir.runs import RunBuilder
from simcore.ir.streams import Stream
from simcore.specs.parallel import ParallelSpec
from simcore.specs.system import SystemSpec
from simcore.workloads.transformer.spec import ModelSpec
from tests.simcore.engine._graphs import random_graph as _random_graph
from tests.simcore.engine._graphs import reference_starts as _reference


@pytest.mark.parametrize(("seed", "n", "streams", "max_deps"),
                         [(0, 400, 6, 3), (1, 300, 40, 1), (2, 500, 12, 5)])
def test_one_point_equals_the_level_loop_bit_for_bit(seed: int, n: int, streams: int,
                                                     max_deps: int) -> None:
    rng = np.random.default_rng(seed + 100)
    for durations in ("uniform", "ties"):
        plan = compile_plan(_random_graph(seed, n, streams, max_deps).build())
        if durations == "uniform":
            seg = rng.uniform(0.1, 10.0, size=(plan.num_segments, 1))
        else:  # few distinct values (and zeros): many equal candidate starts
            seg = rng.integers(0, 3, size=(plan.num_segments, 1)).astype(np.float64) * 0.1
        got = run_chains(plan, seg)
        assert not plan.schedule.is_compiled  # scheduled without levels
        ref = _reference(plan, seg)  # compiles the levels
        assert plan.schedule.is_compiled
        np.testing.assert_array_equal(got.chain_start, ref)
        np.testing.assert_array_equal(run_chains(plan, seg).chain_start, ref)  # level loop


def test_nan_durations_take_the_level_loop() -> None:
    plan = compile_plan(_random_graph(3, 200, 8, 3).build())
    seg = np.random.default_rng(3).uniform(0.1, 1.0, size=(plan.num_segments, 1))
    seg[plan.num_segments // 2, 0] = np.nan
    got = run_chains(plan, seg)
    assert plan.schedule.is_compiled
    np.testing.assert_array_equal(got.chain_start, _reference(plan, seg))


def test_a_transformer_plan_schedules_one_point_as_its_levels_do() -> None:
    model = ModelSpec(name="m", num_layers=8, hidden_size=1024, num_heads=16, seq_len=1024,
                      vocab_size=32000)
    par = ParallelSpec(tp=2, pp=4, vp=2, micro_batch=1, global_batch=32, zero_stage=2)
    _compiled.cache_clear()
    cw = compiled_workload(model, par, SystemSpec(num_gpus=32))
    plan = cw.plan
    fresh = pickle.loads(pickle.dumps(plan))  # picklable, levels still uncompiled
    assert not fresh.schedule.is_compiled
    seg = np.random.default_rng(0).uniform(1e-4, 1e-2, size=(plan.num_segments, 1))
    one = run_chains_by_level(fresh, seg)
    assert not fresh.schedule.is_compiled
    plan.schedule.compiled()
    loop = run_chains_by_level(plan, seg)
    rows = np.arange(plan.num_chains)
    np.testing.assert_array_equal(one.start_rows(rows), loop.start_rows(rows))
    np.testing.assert_array_equal(one.makespan(fresh), loop.makespan(plan))


def test_a_cycle_in_a_condensed_dag_is_reported_on_first_use() -> None:
    cyc = GraphBuilder()
    cyc.add(NodeKind.COMPUTE, resources=["a"], deps=[2], node_id=1)
    cyc.add(NodeKind.COMPUTE, resources=["b"], deps=[1], node_id=2)
    graph = cyc.build()
    # chains 0 and 1, one segment each, waiting for each other
    cptr = np.array([0, 1, 2], dtype=np.int64)
    plan = plan_from_chains(cptr, np.array([1, 0], dtype=np.int64),
                            np.array([0, 1], dtype=np.int64), cptr.copy(),
                            lambda: compile_plan(graph).node_level())
    with pytest.raises(InputError, match="cycle"):
        run_chains(plan, np.ones((2, 1)))
    with pytest.raises(InputError, match="cycle"):
        run_chains(plan, np.ones((2, 3)))


def test_a_dag_shared_by_two_plans_is_scheduled_on_its_compiled_levels() -> None:
    from simcore.engine import schedule

    model = ModelSpec(name="m", num_layers=8, hidden_size=1024, num_heads=16, seq_len=1024,
                      vocab_size=32000)
    a = ParallelSpec(tp=2, pp=4, vp=2, micro_batch=1, global_batch=32, recompute="none")
    b = ParallelSpec(tp=2, pp=4, vp=2, micro_batch=1, global_batch=32, recompute="full")
    system = SystemSpec(num_gpus=32)
    schedule._LEVELS_CACHE.clear()
    _compiled.cache_clear()
    first = compiled_workload(model, a, system).plan.schedule
    assert not first.recurring
    plan_a = compiled_workload(model, a, system).plan
    run_chains(plan_a, np.ones((plan_a.num_segments, 1)))
    assert not first.is_compiled  # one plan, one point: no levels
    second = compiled_workload(model, b, system).plan
    assert second.schedule is first and first.recurring  # b shares a's DAG
    run_chains(second, np.ones((second.num_segments, 1)))
    assert first.is_compiled


def _no_node_level() -> NodeLevel:
    raise AssertionError("scheduling never builds the nodes")


def _condensed_plan(streams: int, rounds: int) -> SchedulePlan:
    """``streams`` streams, each op waiting for the previous op of the next stream: every op
    heads a chain, ``streams * rounds`` chains, ``rounds`` of them on each stream."""
    rb = RunBuilder(num_templates=1)
    res = [rb.stream(Stream.compute(s)) for s in range(streams)]
    unit = rb.unit((0,))
    for _ in range(rounds):
        for s in range(streams):
            prev = rb.last_id(res[(s + 1) % streams])
            rb.run(res[s], unit, 1, () if prev is None else (prev,), s)
    cg = rb.build()
    return plan_from_chains(cg.pred_ptr, cg.pred_seg, cg.seg_chain, cg.chain_seg_ptr,
                            _no_node_level, cg.chain_stream)


@pytest.mark.parametrize(("streams", "rounds", "peel"), [(2, 13_000, True), (60, 450, False)])
def test_one_point_of_a_large_dag_takes_the_peel_when_it_is_narrow(streams: int, rounds: int,
                                                                   peel: bool) -> None:
    """Above 25,000 chains one point still takes the peel when the busiest stream's chains
    (a lower bound on the levels) leave fewer than 40 edges per level: 2 streams ping-ponging
    (~4 edges per bound level) take it, 60 streams side by side (~120) take the levels; both
    give the level loop's starts."""
    from simcore.engine import schedule

    schedule._LEVELS_CACHE.clear()
    plan = _condensed_plan(streams, rounds)
    assert plan.num_chains > schedule._ONE_POINT_MAX_CHAINS
    assert plan.schedule.min_levels == rounds
    seg = np.random.default_rng(5).uniform(0.1, 1.0, size=(plan.num_segments, 1))
    got = run_chains(plan, seg)
    assert plan.schedule.is_compiled is not peel
    np.testing.assert_array_equal(got.chain_start, _reference(plan, seg))
