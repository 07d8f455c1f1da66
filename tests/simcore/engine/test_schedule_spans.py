"""Batch tiles scheduled several at once (a span) against each tile scheduled alone.

``evaluate_times`` cuts a batch into column tiles; tiles on the distinct segment rows share one
level loop per span (``_evaluate_span``) while their BLAS products and breakdowns stay per
tile. The reference is every tile alone (``_SPAN_MAX_BYTES = 0``: the per-tile path), on
ZeRO-2 and ZeRO-3 plans with pipeline parallelism and several micro-batches, whose thousands
of levels the spans are for. Results must be bit-identical.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from simcore.api import compiled_workload
from simcore.engine import evaluate
from simcore.engine.evaluate import StageBreakdown, evaluate_times, template_durations
from simcore.engine.schedule import _segmented_cumsum, _segmented_cumsum_into
from simcore.hardware.batch import SystemBatch
from simcore.specs.parallel import ParallelSpec
from simcore.specs.system import SystemSpec
from tests.simcore.engine._graphs import MODEL

PLANS = [ParallelSpec(tp=2, pp=2, global_batch=32, zero_stage=3),
         ParallelSpec(tp=2, pp=4, global_batch=64, zero_stage=2, recompute="selective"),
         ParallelSpec(tp=2, pp=2, vp=2, global_batch=32, zero_stage=3, dp_overlap=False),
         ParallelSpec(tp=1, pp=4, global_batch=32, zero_stage=2, sequence_parallel=False)]


def _batch(n: int) -> list[SystemSpec]:
    """``n`` hardware points: scale-out bandwidth, peak FLOP/s and HBM bandwidth varied, so
    compute and communication take turns on the critical path."""
    base = SystemSpec(num_gpus=32)
    return [replace(base, scaleout=replace(base.scaleout, bandwidth_GBps=2.0 + 3.0 * (i % 23)),
                    accelerator=replace(base.accelerator,
                                        peak_tflops_bf16=100.0 + 37.0 * (i % 11),
                                        hbm_bandwidth_GBps=1200.0 + 90.0 * (i % 7)))
            for i in range(n)]


def _equal(got: StageBreakdown, want: StageBreakdown) -> None:
    for name in ("iteration_time_s", "compute_s", "bubble_s"):
        np.testing.assert_array_equal(getattr(got, name), getattr(want, name))
    assert list(got.exposed_by_kind) == list(want.exposed_by_kind)
    for k, v in want.exposed_by_kind.items():
        np.testing.assert_array_equal(got.exposed_by_kind[k], v)


@pytest.mark.parametrize("plan", PLANS, ids=["zero3-pp2", "zero2-pp4", "zero3-vp2-no-overlap",
                                             "zero2-tp1"])
def test_spans_of_tiles_give_the_numbers_of_tiles_alone(plan: ParallelSpec,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Tiles of 35 points (the last of 30, under the distinct-rows threshold: alone), the
    others in one span; then each tile alone."""
    systems = _batch(205)
    cw = compiled_workload(MODEL, plan, systems[0])
    tdur = template_durations(cw, SystemBatch.from_specs(systems), "bf16")
    slow = np.linspace(0.0, 0.3, len(systems))
    monkeypatch.setattr(evaluate, "_TILE_BYTES", 1)
    monkeypatch.setattr(evaluate, "_TILE_MIN_POINTS", 40)
    spans = evaluate._spans(cw, len(systems), evaluate._tile_points(cw, len(systems)))
    assert [len(s) for s in spans] == [5, 1]
    together = evaluate_times(cw, tdur, slow)
    monkeypatch.setattr(evaluate, "_SPAN_MAX_BYTES", 0)
    assert all(len(s) == 1 for s in evaluate._spans(cw, len(systems), 35))
    alone = evaluate_times(cw, tdur, slow)
    _equal(together, alone)
    assert together.bubble_s.max() > 0 and together.exposed_by_kind["dp"].max() > 0


def test_a_narrow_tile_is_a_span_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tiles narrower than the distinct-rows threshold keep their own path; wider ones
    around them are grouped."""
    systems = _batch(100)
    cw = compiled_workload(MODEL, PLANS[0], systems[0])
    monkeypatch.setattr(evaluate, "_DISTINCT_MIN_B", 40)
    assert evaluate._spans(cw, 100, 45) == [[(0, 45), (45, 90)], [(90, 100)]]
    tdur = template_durations(cw, SystemBatch.from_specs(systems), "bf16")
    monkeypatch.setattr(evaluate, "_TILE_BYTES", 1)
    monkeypatch.setattr(evaluate, "_TILE_MIN_POINTS", 45)
    together = evaluate_times(cw, tdur, None)
    monkeypatch.setattr(evaluate, "_SPAN_MAX_BYTES", 0)
    _equal(together, evaluate_times(cw, tdur, None))


@pytest.mark.parametrize("sizes", [[3, 2, 4], [0, 2, 3], [1], [2, 0, 5, 1]],
                         ids=["three", "empty-first", "one", "empty-inside"])
def test_segmented_cumsum_into_equals_the_segmented_cumsum(sizes: list[int]) -> None:
    """The in-place running sums per group: the same floats as ``_segmented_cumsum``, into
    a column slice of a wider buffer."""
    rng = np.random.default_rng(len(sizes))
    ptr = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    values = rng.exponential(1e-3, (int(ptr[-1]), 7)) * rng.uniform(0.5, 3.0, 7)
    buffer = np.full((values.shape[0], 12), np.nan)
    _segmented_cumsum_into(values, ptr, buffer[:, 3:10])
    np.testing.assert_array_equal(buffer[:, 3:10], _segmented_cumsum(values, ptr))
    assert np.isnan(buffer[:, :3]).all() and np.isnan(buffer[:, 10:]).all()


def test_kept_workspaces_stay_within_one_budget_for_the_whole_process(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The schedule workspaces every segment table keeps between batches count against one
    process-wide budget, least recently used dropped first (a worker caches up to 32 compiled
    structures; a span's workspace of a large graph is ~200 MiB); a dropped workspace is
    rebuilt on demand and gives the same numbers."""
    from simcore.engine import schedule

    systems = _batch(64)
    tables = [compiled_workload(MODEL, plan, systems[0]).segment_table for plan in PLANS[:3]]
    sizes = {id(t): t.workspace(48)[0].nbytes for t in tables}
    budget = max(sizes.values()) + min(sizes.values())  # room for two, never for three
    assert budget < sum(sizes.values())
    monkeypatch.setattr(schedule, "_KEPT", type(schedule._KEPT)())
    monkeypatch.setattr(schedule, "_WORKSPACES_MAX_BYTES", budget)
    for t in tables:
        t._work.clear()

    def kept() -> list[int]:
        return [i for i, t in enumerate(tables) if t._work]

    tables[0].workspace(48)
    tables[1].workspace(48)
    tables[0].workspace(48)  # used again: now the most recent
    tables[2].workspace(48)  # over budget: the least recently used (table 1) goes
    assert kept() == [0, 2]
    assert sum(n for _, n in schedule._KEPT.values()) <= budget
    cw = compiled_workload(MODEL, PLANS[1], systems[0])
    tdur = template_durations(cw, SystemBatch.from_specs(systems), "bf16")
    before = evaluate_times(cw, tdur, None)  # table 1 rebuilds its workspace
    assert 1 in kept()
    _equal(evaluate_times(cw, tdur, None), before)


def test_a_plan_of_few_levels_keeps_its_spans_narrow(monkeypatch: pytest.MonkeyPatch) -> None:
    """Below ``_SPAN_WIDE_MIN_LEVELS`` levels a span's workspace stays under
    ``_SPAN_NARROW_BYTES`` (each new batch width is a new workspace, and a wide one costs more
    in fresh pages than such a plan saves in level calls); from it on, under
    ``_SPAN_MAX_BYTES``. The numbers are the same either way."""
    systems = _batch(205)
    cw = compiled_workload(MODEL, PLANS[0], systems[0])
    table = cw.segment_table
    rows = table.plan.num_chains + table.num_rows + table.multi_src.size
    levels = len(table.plan.steps)
    monkeypatch.setattr(evaluate, "_SPAN_NARROW_BYTES", 8 * rows * 35 * 2)  # two tiles of 35
    monkeypatch.setattr(evaluate, "_SPAN_WIDE_MIN_LEVELS", levels + 1)
    narrow = evaluate._spans(cw, 205, 35)
    assert [len(s) for s in narrow] == [2, 2, 1, 1]  # 5 wide tiles as equal as they go, then 30
    monkeypatch.setattr(evaluate, "_SPAN_WIDE_MIN_LEVELS", levels)
    assert [len(s) for s in evaluate._spans(cw, 205, 35)] == [5, 1]
    tdur = template_durations(cw, SystemBatch.from_specs(systems), "bf16")
    monkeypatch.setattr(evaluate, "_TILE_BYTES", 1)
    monkeypatch.setattr(evaluate, "_TILE_MIN_POINTS", 40)
    wide = evaluate_times(cw, tdur, None)
    monkeypatch.setattr(evaluate, "_SPAN_WIDE_MIN_LEVELS", levels + 1)
    _equal(evaluate_times(cw, tdur, None), wide)
