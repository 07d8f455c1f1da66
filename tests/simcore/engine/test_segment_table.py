"""The segment-end table (:class:`simcore.engine.schedule.SegmentTable`) schedules exactly as
:func:`run_chains_by_level` on the full (S, B) segment durations ``table[row_of]``: the same
chain starts and chain durations bit for bit, on random graphs with multi-segment chains and
on the GPT-3-style hardware batches of ``evaluate_times`` (whose B >= 32 path uses the table)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from simcore.api import compiled_workload
from simcore.engine.evaluate import COMPUTE, compute_scale, template_durations
from simcore.engine.schedule import SegmentTable, run_chains_by_level
from simcore.hardware.batch import SystemBatch
from simcore.specs.parallel import ParallelSpec
from simcore.specs.system import SystemSpec
from tests.simcore.engine._graphs import MODEL, PLANS
from tests.simcore.engine._graphs import random_plan as _random_plan


@pytest.mark.parametrize(("seed", "n", "streams", "max_deps"),
                         [(0, 400, 6, 3), (1, 300, 40, 1), (2, 500, 12, 5), (3, 200, 3, 2)])
def test_table_matches_full_segment_durations(seed: int, n: int, streams: int,
                                              max_deps: int) -> None:
    plan = _random_plan(seed, n, streams, max_deps)
    counts = np.diff(plan.chain_seg_ptr)
    assert (counts > 1).any()  # running sums of multi-segment chains are exercised
    rng = np.random.default_rng(seed)
    r = 7
    row_of = rng.integers(0, r, size=plan.num_segments)
    table = SegmentTable.build(plan, row_of, r)
    for b in (33, 5, 33):  # the second B=33 run reuses the buffers of the first
        rows = rng.uniform(0.1, 10.0, size=(r, b))
        table.rows_buffer(b)[...] = rows
        got = table.run(b)
        want = run_chains_by_level(plan, rows[row_of])
        chains = np.arange(plan.num_chains)
        np.testing.assert_array_equal(got.start_rows(chains), want.start_rows(chains))
        np.testing.assert_array_equal(got.dur_rows(chains), want.dur_rows(chains))
        np.testing.assert_array_equal(got.makespan(plan), want.makespan(plan))


@pytest.mark.parametrize("plan", PLANS, ids=[f"p{i}" for i in range(len(PLANS))])
def test_table_on_hardware_batches_matches_full_segment_durations(plan: ParallelSpec) -> None:
    """Real workloads (pipelined, interleaved, ZeRO-3, context parallel) on 40 systems of
    different scale-out bandwidths, with the distinct segment rows of evaluate_times."""
    base = SystemSpec(num_gpus=32)
    systems = [replace(base, scaleout=replace(base.scaleout, bandwidth_GBps=10.0 + 7.0 * i))
               for i in range(40)]
    cw = compiled_workload(MODEL, plan, base)
    tdur = template_durations(cw, SystemBatch.from_specs(systems), "bf16")
    is_comp = cw.template_kind == COMPUTE
    _, scale = compute_scale(cw, tdur, np.linspace(0.0, 0.3, 40))
    rows, row_stage, row_of = cw.distinct_segments
    vals = (np.asarray(rows @ (tdur * is_comp[:, None])) * scale[row_stage]
            + np.asarray(rows @ (tdur * (~is_comp)[:, None])))
    cw.segment_table.rows_buffer(40)[...] = vals
    got = cw.segment_table.run(40)
    want = run_chains_by_level(cw.plan, vals[row_of])
    chains = np.arange(cw.plan.num_chains)
    np.testing.assert_array_equal(got.start_rows(chains), want.start_rows(chains))
    np.testing.assert_array_equal(got.dur_rows(chains), want.dur_rows(chains))
    np.testing.assert_array_equal(got.makespan(cw.plan), want.makespan(cw.plan))
