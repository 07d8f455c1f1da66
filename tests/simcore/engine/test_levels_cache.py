"""The level-schedule cache (``compile_levels_cached``): a hit returns what ``compile_levels``
computes for those inputs, a different DAG of the same size does not hit, and a plan evaluated
with the schedule of an earlier plan (same DAG, other recompute) gives the same result as with a
cold cache."""

from __future__ import annotations

import dataclasses

import numpy as np

from simcore.api import _compiled, simulate_batch
from simcore.engine import schedule
from simcore.engine.schedule import compile_levels, compile_levels_cached
from simcore.specs.parallel import ParallelSpec
from simcore.specs.system import SystemSpec
from simcore.workloads.transformer.spec import ModelSpec

DENSE = ModelSpec(name="dense", num_layers=12, hidden_size=1024, num_heads=16, seq_len=1024,
                  vocab_size=8192)


def _same(a: tuple, b: tuple) -> None:
    levels_a, steps_a, pos_a = a
    levels_b, steps_b, pos_b = b
    np.testing.assert_array_equal(pos_a, pos_b)
    assert len(levels_a) == len(levels_b) and len(steps_a) == len(steps_b)
    for la, lb in zip(levels_a, levels_b, strict=True):
        for x, y in zip(la, lb, strict=True):
            np.testing.assert_array_equal(x, y)
    for sa, sb in zip(steps_a, steps_b, strict=True):
        for x, y in zip(sa, sb, strict=True):
            np.testing.assert_array_equal(x, y)


def test_a_hit_is_the_compiled_schedule_and_another_dag_misses() -> None:
    schedule._LEVELS_CACHE.clear()
    # chains 0, 1 roots; chain 2 waits for segments 0 and 1; chain 3 for segment 2
    cptr = np.array([0, 0, 0, 2, 3], dtype=np.int64)
    pred_seg = np.array([0, 1, 2], dtype=np.int64)
    seg_chain = np.arange(4, dtype=np.int64)
    first = compile_levels_cached(cptr, pred_seg, seg_chain, 4)
    again = compile_levels_cached(cptr.copy(), pred_seg.copy(), seg_chain.copy(), 4)
    assert first is not None and again is first  # equal inputs: the same objects
    ref = compile_levels(cptr, pred_seg, seg_chain, 4)
    assert ref is not None
    _same(first, ref)
    assert len(first[0]) == 3
    # chain 3 waits for segment 0 instead: two levels, not the cached three
    other = compile_levels_cached(cptr, np.array([0, 1, 0], dtype=np.int64), seg_chain, 4)
    assert other is not None and len(other[0]) == 2
    _same(other, compile_levels(cptr, np.array([0, 1, 0], dtype=np.int64), seg_chain, 4))


def test_a_plan_on_a_shared_schedule_evaluates_as_with_a_cold_cache() -> None:
    system = SystemSpec(num_gpus=32)
    a = ParallelSpec(tp=2, pp=4, vp=2, micro_batch=1, global_batch=32, recompute="none")
    b = dataclasses.replace(a, recompute="full", sequence_parallel=True)
    schedule._LEVELS_CACHE.clear()
    _compiled.cache_clear()
    cold = simulate_batch(DENSE, b, [system])
    schedule._LEVELS_CACHE.clear()
    _compiled.cache_clear()
    simulate_batch(DENSE, a, [system])
    assert len(schedule._LEVELS_CACHE) == 1
    warm = simulate_batch(DENSE, b, [system])
    assert len(schedule._LEVELS_CACHE) == 1  # b reused a's schedule
    assert warm.iteration_time_s[0] != simulate_batch(DENSE, a, [system]).iteration_time_s[0]
    for f in dataclasses.fields(cold):
        x, y = getattr(cold, f.name), getattr(warm, f.name)
        if isinstance(x, dict):
            assert x.keys() == y.keys()
            for k in x:
                np.testing.assert_array_equal(x[k], y[k])
        else:
            np.testing.assert_array_equal(x, y)
