"""Segment durations from distinct rows, and the makespan from the end chains, against the
straightforward computation (every segment's sparse row product, the max over every chain).

The reference is what ``_evaluate_tile`` computed before: ``seg_counts @ tdur`` for all S
segments and ``ChainTimes.makespan`` over all C chains; results must be bit-identical.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from simcore.api import compiled_workload
from simcore.engine import evaluate
from simcore.engine.evaluate import COMPUTE, compute_scale, evaluate_times, template_durations
from simcore.engine.schedule import run_chains
from simcore.hardware.batch import SystemBatch
from simcore.specs.parallel import ParallelSpec
from simcore.specs.system import SystemSpec
from tests.simcore.engine._graphs import MODEL, PLANS


@pytest.mark.parametrize("plan", PLANS, ids=[f"p{i}" for i in range(len(PLANS))])
def test_distinct_rows_and_end_chains_give_the_same_times(plan: ParallelSpec) -> None:
    systems = [SystemSpec(num_gpus=32), SystemSpec(num_gpus=32, gpus_per_node=4)]
    cw = compiled_workload(MODEL, plan, systems[0])
    sb = SystemBatch.from_specs(systems)
    tdur = template_durations(cw, sb, "bf16")
    slow = np.array([0.1, 0.25])
    is_comp = cw.template_kind == COMPUTE
    _, scale = compute_scale(cw, tdur, slow)
    # reference: every segment's row
    ref = np.asarray(cw.seg_counts @ (tdur * is_comp[:, None])) * scale[cw.seg_stage] \
        + np.asarray(cw.seg_counts @ (tdur * (~is_comp)[:, None]))
    rows, row_stage, row_of = cw.distinct_segments
    assert rows.shape[0] < cw.seg_counts.shape[0]
    got = (np.asarray(rows @ (tdur * is_comp[:, None])) * scale[row_stage]
           + np.asarray(rows @ (tdur * (~is_comp)[:, None]))).take(row_of, axis=0)
    np.testing.assert_array_equal(got, ref)
    times = run_chains(cw.plan, ref)
    assert cw.plan.end_chains.size < cw.plan.num_chains
    np.testing.assert_array_equal(cw.plan.makespan(times), times.makespan)


def test_batch_through_distinct_rows_equals_the_full_product(monkeypatch: pytest.MonkeyPatch
                                                              ) -> None:
    """B >= 32 takes the distinct-row path; forced off, the full product: the same numbers."""
    base = SystemSpec(num_gpus=32)
    systems = [replace(base, scaleout=replace(base.scaleout, bandwidth_GBps=10.0 + 7.0 * i))
               for i in range(40)]
    cw = compiled_workload(MODEL, PLANS[0], base)
    tdur = template_durations(cw, SystemBatch.from_specs(systems), "bf16")
    slow = np.linspace(0.0, 0.3, 40)
    fast = evaluate_times(cw, tdur, slow)
    monkeypatch.setattr(evaluate, "_DISTINCT_MIN_B", 10**9)
    full = evaluate_times(cw, tdur, slow)
    for name in ("iteration_time_s", "compute_s", "bubble_s"):
        np.testing.assert_array_equal(getattr(fast, name), getattr(full, name))
    for k, v in full.exposed_by_kind.items():
        np.testing.assert_array_equal(fast.exposed_by_kind[k], v)
    one = evaluate_times(cw, tdur[:, 17:18], slow[17:18])  # schedule columns are independent
    assert fast.iteration_time_s[17] == one.iteration_time_s[0]


@pytest.mark.parametrize("plan", PLANS[:3], ids=["p0", "p1", "p2"])
def test_tiles_of_any_width_give_the_same_numbers(plan: ParallelSpec,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Columns are independent: one tile of 40 points, or tiles of 16, 16 and 8, give the same
    numbers to the last bit or two (BLAS may round a narrow tail's products differently)."""
    base = SystemSpec(num_gpus=32)
    systems = [replace(base, scaleout=replace(base.scaleout, bandwidth_GBps=10.0 + 7.0 * i))
               for i in range(40)]
    cw = compiled_workload(MODEL, plan, base)
    tdur = template_durations(cw, SystemBatch.from_specs(systems), "bf16")
    slow = np.linspace(0.0, 0.3, 40)
    whole = evaluate_times(cw, tdur, slow)
    monkeypatch.setattr(evaluate, "_TILE_BYTES", 1)
    monkeypatch.setattr(evaluate, "_TILE_MIN_POINTS", 16)
    tiled = evaluate_times(cw, tdur, slow)
    for name in ("iteration_time_s", "compute_s", "bubble_s"):
        np.testing.assert_allclose(getattr(tiled, name), getattr(whole, name), rtol=5e-16,
                                   atol=1e-18)
    for k, v in whole.exposed_by_kind.items():
        np.testing.assert_allclose(tiled.exposed_by_kind[k], v, rtol=5e-16, atol=1e-18)
