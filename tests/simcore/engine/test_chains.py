"""Chain collapsing: interior references, batch shapes, and the size of a 1,024-GPU graph."""

from __future__ import annotations

import numpy as np

from simcore import GraphBuilder, NodeKind, compile_plan, run_schedule
from simcore.engine.schedule import run_chains


def test_interior_node_of_a_chain_releases_its_dependents_on_time() -> None:
    b = GraphBuilder()
    a = b.add(NodeKind.COMPUTE, resources=["s"])
    m = b.add(NodeKind.COMPUTE, resources=["s"], deps=[a])
    b.add(NodeKind.COMPUTE, resources=["s"], deps=[m])
    b.add(NodeKind.COLLECTIVE, resources=["t"], deps=[m])  # waits for the middle of the chain
    plan = compile_plan(b.build())
    assert plan.num_chains == 2  # a-m-c collapsed, d alone
    res = run_schedule(plan, np.array([[1.0, 2.0], [2.0, 3.0], [4.0, 1.0], [1.0, 1.0]]))
    np.testing.assert_array_equal(res.start[3], [3.0, 5.0])
    np.testing.assert_array_equal(res.finish[:, 0], [1.0, 3.0, 7.0, 4.0])


def test_chains_do_not_cross_streams() -> None:
    b = GraphBuilder()
    x = b.add(NodeKind.COMPUTE, resources=["s"])
    b.add(NodeKind.COLLECTIVE, resources=["t"], deps=[x])
    assert compile_plan(b.build()).num_chains == 2


def test_chain_level_run_matches_node_level_makespan() -> None:
    rng = np.random.default_rng(11)
    b = GraphBuilder()
    ids: list[int] = []
    for i in range(400):
        deps = [ids[-1]] if ids and rng.random() < 0.8 else []
        if ids and rng.random() < 0.2:
            deps.append(int(rng.choice(ids)))
        ids.append(b.add(NodeKind.COMPUTE, resources=[f"s{i % 3}"], deps=deps))
    plan = compile_plan(b.build())
    dur = rng.uniform(0.1, 1.0, size=(400, 5))
    nodes = run_schedule(plan, dur)
    seg = np.add.reduceat(dur[plan.order], plan.seg_ptr[:-1], axis=0)
    chains = run_chains(plan, seg)
    np.testing.assert_allclose(chains.makespan, nodes.makespan)
    assert plan.num_chains < 400
