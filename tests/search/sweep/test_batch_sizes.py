"""Batch sizes of a sweep: fixed, or guided (``sweep.batch_size: auto``, search/sweep/driver.py)."""

from __future__ import annotations

import numpy as np
import pytest

from search.config.schema import validate_value
from search.sweep.driver import (
    AUTO_BATCH_MAX,
    AUTO_BATCH_MIN,
    batch_size_of,
    guided_batch_size,
    iter_batches,
)
from simcore.errors import InputError

#: two structure groups (tp=1, tp=2) of 16 x 16 x 21 = 5,376 points each
AXES = ("workload=gpt_tiny", "system=dgx_a100_80g", "parallel.tp=1,2",
        "system.scaleout.bandwidth_GBps=range(25,401,25)",
        "system.scaleup.bandwidth_GBps=range(150,901,50)",
        "system.accelerator.hbm_bandwidth_GBps=range(1500,3501,100)")


@pytest.mark.parametrize("workers", [1, 2, 3, 8])
def test_guided_size_is_a_share_of_what_remains_within_the_bounds(workers):
    sizes = [guided_batch_size(r, workers) for r in range(0, 200_000, 97)]
    assert min(sizes) == AUTO_BATCH_MIN and max(sizes) == AUTO_BATCH_MAX
    assert sizes == sorted(sizes)  # never larger with less left
    for remaining in (1_000, 9_999, 40_000):
        share = -(-remaining // (2 * workers))
        assert guided_batch_size(remaining, workers) == min(max(share, AUTO_BATCH_MIN), AUTO_BATCH_MAX)


def _batches(plan, done, workers):
    return list(iter_batches(plan, None, done, workers=workers))


@pytest.mark.parametrize("workers", [1, 2])
def test_guided_batches_cover_each_point_once_and_shrink_towards_the_end(plan_for, workers):
    plan = plan_for(*AXES)
    assert plan.num_points == 2 * 5376
    batches = _batches(plan, np.zeros(0, dtype=np.int64), workers)
    ids = np.concatenate([b.point_ids for b in batches])
    assert np.array_equal(np.sort(ids), np.arange(plan.num_points))
    for b in batches:  # one structure group per batch
        assert len({plan.combos[c].batch_key for c in plan.combo_of[b.point_ids]}) == 1
    sizes = [b.size for b in batches]
    assert sizes[0] == min(AUTO_BATCH_MAX, -(-plan.num_points // (2 * workers)))
    remaining = plan.num_points
    for b in batches:  # each batch is the guided share, cut short only at a group's end
        group_left = int(np.count_nonzero(plan.combo_of[b.point_ids[0]:] ==
                                          plan.combo_of[b.point_ids[0]]))
        assert b.size == min(guided_batch_size(remaining, workers), group_left)
        remaining -= b.size
    assert sizes[-1] <= AUTO_BATCH_MIN  # the sweep ends on a small batch
    assert [b.batch_id for b in batches] == list(range(len(batches)))


def test_guided_sizes_count_only_points_not_yet_done(plan_for):
    plan = plan_for(*AXES)
    done = np.arange(0, plan.num_points - 300)  # resume with 300 points left
    batches = _batches(plan, done, 2)
    assert sum(b.size for b in batches) == 300
    assert batches[0].size == 75  # ceil(300 / (2 x 2)), not a share of the whole sweep
    assert np.array_equal(np.sort(np.concatenate([b.point_ids for b in batches])),
                          np.arange(plan.num_points - 300, plan.num_points))


def test_a_fixed_size_still_cuts_every_group_into_that_many_points(plan_for):
    plan = plan_for(*AXES)
    sizes = [b.size for b in iter_batches(plan, 1000, np.zeros(0, dtype=np.int64))]
    assert sizes == [1000] * 5 + [376] + [1000] * 5 + [376]


def test_the_default_is_auto_and_a_bad_size_names_the_rule(plan_for):
    plan = plan_for("parallel.tp=1,2")
    assert plan.base_cfg.sweep.batch_size == "auto" and batch_size_of(plan.base_cfg.sweep) is None
    assert batch_size_of(plan_for("sweep.batch_size=128").base_cfg.sweep) == 128
    for bad in ("lots", 0, -4, 1.5, None, True):
        with pytest.raises(InputError) as err:
            validate_value("sweep", {"batch_size": bad})
        assert err.value.key == "sweep.batch_size" and "auto or an integer" in err.value.rule
