"""The compiled level steps of run_chains give bit-identical results to the straightforward
level loop (gather + maximum.reduceat over ``plan.levels``), also when buffers are reused."""

from __future__ import annotations

import numpy as np

from simcore import GraphBuilder, NodeKind, compile_plan
from simcore.engine.schedule import run_chains
from tests.simcore.engine._graphs import random_plan as _random_plan
from tests.simcore.engine._graphs import reference_starts as _reference


def test_steps_match_reference_level_loop_bit_for_bit() -> None:
    rng = np.random.default_rng(11)
    kinds = set()
    for seed, (n, streams, max_deps) in enumerate([(400, 6, 3), (300, 40, 1), (500, 12, 5)]):
        plan = _random_plan(seed, n, streams, max_deps)
        kinds |= {min(st.k, 2) for st in plan.steps}
        for b in (1, 7, 64, 7):  # the second B=7 run reuses the buffers of the first
            seg = rng.uniform(0.1, 10.0, size=(plan.num_segments, b))
            got = run_chains(plan, seg)
            np.testing.assert_array_equal(got.chain_start, _reference(plan, seg))
    assert kinds >= {-1, 1, 2}  # roots, single-predecessor and multi-predecessor levels ran


def test_ragged_level_takes_reduceat_path_and_matches() -> None:
    # one chain waits for 6 others, many wait for one: padding would double the rows
    b = GraphBuilder()
    roots = [b.add(NodeKind.COMPUTE, resources=[f"r{i}"]) for i in range(12)]
    b.add(NodeKind.COMPUTE, resources=["x"], deps=roots[:6])
    for i in range(6, 12):
        b.add(NodeKind.COMPUTE, resources=[f"y{i}"], deps=[roots[i]])
    plan = compile_plan(b.build())
    assert any(st.k == 0 for st in plan.steps)
    seg = np.random.default_rng(1).uniform(1.0, 2.0, size=(plan.num_segments, 5))
    np.testing.assert_array_equal(run_chains(plan, seg).chain_start, _reference(plan, seg))


def test_segment_ends_written_in_the_workspace_give_the_same_starts() -> None:
    """Segment durations written into ``segment_buffer`` (no copy) schedule exactly as a
    separate array does, also on the next run reusing the buffer."""
    from simcore.engine.schedule import run_chains_by_level, segment_buffer

    rng = np.random.default_rng(5)
    plan = _random_plan(3, 400, 6, 3)
    assert np.diff(plan.chain_seg_ptr).max() > 1  # some chains accumulate several segments
    for _ in range(2):
        seg = rng.uniform(0.1, 10.0, size=(plan.num_segments, 9))
        ref = _reference(plan, seg)
        buf = segment_buffer(plan, 9)
        buf[...] = seg
        got = run_chains_by_level(plan, buf, overwrite=True)
        assert np.shares_memory(got.seg_end, buf)
        np.testing.assert_array_equal(got.start_by_level.take(plan.level_pos, axis=0), ref)
        other = run_chains_by_level(plan, seg.copy())
        np.testing.assert_array_equal(other.start_by_level.take(plan.level_pos, axis=0), ref)
