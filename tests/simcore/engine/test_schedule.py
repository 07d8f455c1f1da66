"""In-order list scheduling: hand-derived schedules, batch == singles, bad graphs."""

from __future__ import annotations

import numpy as np
import pytest

from simcore import GraphBuilder, InputError, NodeKind, compile_plan, run_schedule


def _two_stream_graph() -> GraphBuilder:
    # compute c0 -> comm a0 ; compute c1 (same stream as c0) ; comm a1 after c1 (same comm stream)
    b = GraphBuilder()
    c0 = b.add(NodeKind.COMPUTE, resources=["gpu.compute"])
    a0 = b.add(NodeKind.COLLECTIVE, resources=["gpu.comm"], deps=[c0])
    c1 = b.add(NodeKind.COMPUTE, resources=["gpu.compute"])
    b.add(NodeKind.COLLECTIVE, resources=["gpu.comm"], deps=[c1])
    b.add(NodeKind.COMPUTE, resources=["gpu.compute"], deps=[a0])
    return b


def test_overlap_and_stream_order_match_hand_schedule() -> None:
    plan = compile_plan(_two_stream_graph().build())
    # durations: c0=2, a0=5, c1=3, a1=4, c2=1
    res = run_schedule(plan, np.array([2.0, 5.0, 3.0, 4.0, 1.0]))
    # c0 [0,2]; a0 [2,7]; c1 [2,5]; a1 waits for stream free at 7 -> [7,11]; c2 after a0 & c1 -> [7,8]
    np.testing.assert_array_equal(res.start[:, 0], [0, 2, 2, 7, 7])
    np.testing.assert_array_equal(res.finish[:, 0], [2, 7, 5, 11, 8])
    assert res.makespan[0] == 11


def test_rendezvous_node_waits_for_every_member_stream() -> None:
    b = GraphBuilder()
    x = b.add(NodeKind.COMPUTE, resources=["r0.compute"])
    y = b.add(NodeKind.COMPUTE, resources=["r1.compute"])
    b.add(NodeKind.COLLECTIVE, resources=["r0.comm", "r1.comm"], deps=[x, y])
    res = run_schedule(compile_plan(b.build()), np.array([1.0, 4.0, 2.0]))
    assert res.start[2, 0] == 4.0 and res.finish[2, 0] == 6.0


def test_batch_equals_single_point_runs() -> None:
    rng = np.random.default_rng(7)
    b = GraphBuilder()
    ids: list[int] = []
    for i in range(300):
        deps = list(rng.choice(ids, size=min(len(ids), 2), replace=False)) if ids else []
        ids.append(b.add(NodeKind.COMPUTE, resources=[f"s{i % 5}"], deps=[int(d) for d in deps]))
    plan = compile_plan(b.build())
    dur = rng.uniform(0.1, 10.0, size=(300, 17))
    batch = run_schedule(plan, dur)
    for j in range(dur.shape[1]):
        single = run_schedule(plan, dur[:, j])
        np.testing.assert_array_equal(batch.finish[:, j], single.finish[:, 0])


def test_schedule_matches_reference_event_loop() -> None:
    rng = np.random.default_rng(3)
    b = GraphBuilder()
    n = 200
    deps_of: list[list[int]] = []
    res_of: list[int] = []
    for i in range(n):
        deps = sorted({int(d) for d in rng.integers(0, i, size=2)}) if i > 2 else []
        deps_of.append(deps)
        res_of.append(int(rng.integers(0, 4)))
        b.add(NodeKind.COMPUTE, resources=[f"s{res_of[-1]}"], deps=deps)
    dur = rng.uniform(1.0, 3.0, size=n)
    got = run_schedule(compile_plan(b.build()), dur).finish[:, 0]
    free = [0.0] * 4
    want = [0.0] * n
    for i in range(n):  # program order is a valid topological order here
        s = max([want[d] for d in deps_of[i]] + [free[res_of[i]]])
        want[i] = s + dur[i]
        free[res_of[i]] = want[i]
    np.testing.assert_allclose(got, want)


def test_missing_dependency_names_node_and_value() -> None:
    b = GraphBuilder("trace.et")
    b.add(NodeKind.COMPUTE, node_id=5, deps=[99])
    with pytest.raises(InputError, match=r"node 5 dependency=99"):
        b.build()


def test_cycle_is_reported_with_node_ids() -> None:
    b = GraphBuilder()
    b.add(NodeKind.COMPUTE, node_id=1, deps=[3])
    b.add(NodeKind.COMPUTE, node_id=2, deps=[1])
    b.add(NodeKind.COMPUTE, node_id=3, deps=[2])
    with pytest.raises(InputError, match="cycle"):
        compile_plan(b.build())


def test_stream_order_against_dependency_is_a_cycle() -> None:
    # node 0 waits for node 1, but node 0 was issued first on the same in-order stream
    b = GraphBuilder()
    b.add(NodeKind.COMPUTE, resources=["s"], node_id=0, deps=[1])
    b.add(NodeKind.COMPUTE, resources=["s"], node_id=1)
    with pytest.raises(InputError, match="cycle"):
        compile_plan(b.build())
