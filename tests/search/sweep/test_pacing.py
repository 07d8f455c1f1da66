"""Batch sizes paced by measured seconds per point (search/sweep/pacing.py) and the pool drawing
batches only when an actor has a free slot (search/run/workers.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from search.sweep.driver import AUTO_BATCH_MAX, AUTO_BATCH_MIN, guided_batch_size, iter_batches
from search.sweep.pacing import GroupPace

#: two structure groups (tp=1, tp=2) of 16 x 16 x 21 = 5,376 points each
AXES = ("workload=gpt_tiny", "system=dgx_a100_80g", "parallel.tp=1,2",
        "system.scaleout.bandwidth_GBps=range(25,401,25)",
        "system.scaleup.bandwidth_GBps=range(150,901,50)",
        "system.accelerator.hbm_bandwidth_GBps=range(1500,3501,100)")


def _pace(workers: int, remaining: dict[str, int]) -> GroupPace:
    pace = GroupPace(workers, AUTO_BATCH_MIN, AUTO_BATCH_MAX)
    pace.start(remaining)
    return pace


@pytest.mark.parametrize("workers", [1, 2, 8])
def test_one_measured_group_gets_the_point_counted_guided_sizes(workers: int) -> None:
    pace = _pace(workers, {"g": 112_896})
    assert pace.take("g", 0) == AUTO_BATCH_MIN  # a probe: the cost is not known yet
    pace.observe(0, AUTO_BATCH_MIN, AUTO_BATCH_MIN * 3e-5)
    left, batch = 112_896 - AUTO_BATCH_MIN, 1
    while left:
        size = pace.take("g", batch)
        assert size == min(guided_batch_size(left, workers), left)
        left -= size
        batch += 1


def test_a_costly_group_gets_batches_of_its_share_of_the_seconds() -> None:
    """24 ms a point (TP overlap) against 30 us: the costly group's batch holds 1/(2 x 2) of
    the seconds left, the cheap one's is as large as allowed."""
    pace = _pace(2, {"overlap": 400, "plain": 400})
    for batch, group in enumerate(("overlap", "plain")):
        assert pace.take(group, batch) == AUTO_BATCH_MIN
    pace.observe(0, AUTO_BATCH_MIN, AUTO_BATCH_MIN * 0.024)
    pace.observe(1, AUTO_BATCH_MIN, AUTO_BATCH_MIN * 3e-5)
    seconds = 336 * 0.024 + 336 * 3e-5
    assert pace.take("overlap", 2) == math.ceil(seconds / 4 / 0.024 - 1e-9) == 85
    assert pace.take("plain", 3) == 336  # the whole group: its share would be far more


def test_an_unmeasured_group_is_probed_and_counts_at_the_mean_rate() -> None:
    pace = _pace(1, {"a": 5_000, "b": 2_000})
    assert pace.take("a", 0) == AUTO_BATCH_MIN
    pace.observe(0, AUTO_BATCH_MIN, AUTO_BATCH_MIN * 1e-3)
    assert pace.take("b", 1) == AUTO_BATCH_MIN  # b: not measured, a probe
    # a's share counts b's 1,936 points at a's rate (the mean of the measured): not 4,936 / 2
    assert pace.take("a", 2) == (4_936 + 1_936) // 2 == 3_436


def test_the_lowest_seconds_per_point_seen_is_kept() -> None:
    """A group's first batch on an actor also builds its structure: its rate is not kept
    once a faster batch is seen; bad observations are ignored."""
    pace = _pace(1, {"g": 1_000})
    for batch in range(4):
        pace.take("g", batch)
    pace.observe(0, 64, 64 * 0.5)  # with the cold build
    pace.observe(1, 64, 64 * 0.1)
    pace.observe(2, 64, 64 * 0.3)
    pace.observe(3, 0, 1.0)  # no points
    pace.observe(99, 64, 0.0)  # a batch it never handed out
    assert pace.rate("g") == pytest.approx(0.1)
    pace.take("g", 4)
    pace.observe(4, 64, float("nan"))
    assert pace.rate("g") == pytest.approx(0.1)


def test_paced_batches_cover_each_point_once_one_group_per_batch(plan_for) -> None:
    """iter_batches with a pace fed between draws (as the driver feeds it): every point once,
    no batch spans two groups, each group probed first, then shares of the seconds left: the
    costly group first (the cheap one, not measured yet, counted at its rate), then the cheap
    one alone (each 5,376 points, 2 workers: a quarter of what is left)."""
    plan = plan_for(*AXES)
    pace = GroupPace(2, AUTO_BATCH_MIN, AUTO_BATCH_MAX)
    cost = {plan.combos[0].batch_key: 1e-3, plan.combos[-1].batch_key: 1e-5}
    batches = []
    for batch in iter_batches(plan, None, np.zeros(0, dtype=np.int64), workers=2, pace=pace):
        batches.append(batch)
        pace.observe(batch.batch_id, batch.size, batch.size * cost[batch.group])
    ids = np.concatenate([b.point_ids for b in batches])
    assert np.array_equal(np.sort(ids), np.arange(plan.num_points))
    by_group: dict[str, list[int]] = {}
    for b in batches:
        assert len({plan.combos[c].batch_key for c in plan.combo_of[b.point_ids]}) == 1
        by_group.setdefault(b.group, []).append(b.size)
    costly, cheap = (by_group[k] for k in cost)
    assert costly == [64, math.ceil((5_312 + 5_376) / 4), math.ceil((2_640 + 5_376) / 4), 636]
    assert cheap[:4] == [64, 5_312 // 4, 3_984 // 4, 2_988 // 4]
    assert cheap[-1] <= AUTO_BATCH_MIN


def test_the_ray_pool_draws_a_batch_only_when_an_actor_has_a_free_slot(ray_local, plan_for
                                                                        ) -> None:
    """Batches are drawn lazily, so paced sizes follow finished batches: before the first
    output is yielded, at most actors x in-flight slots batches were drawn."""
    from search.run.workers import WorkerPool

    plan = plan_for(*AXES)
    drawn = []

    def batches():
        for batch in iter_batches(plan, 512, np.zeros(0, dtype=np.int64)):
            drawn.append(batch.batch_id)
            yield batch

    pool = WorkerPool(2, inflight_per_worker=2)
    try:
        outputs = pool.imap_unordered(batches())
        first = next(outputs)
        assert len(drawn) <= 2 * 2 + 1
        rest = list(outputs)
    finally:
        pool.close()
    got = np.concatenate([o.point_ids for o in [first, *rest]])
    assert np.array_equal(np.sort(got), np.arange(plan.num_points))
    assert len(drawn) == len(rest) + 1


@pytest.mark.parametrize(("tp", "paced"), [("1,2", True), ("2", False)])
def test_a_sweep_paces_its_batches_only_across_structures(plan_for, tmp_path, tp: str,
                                                          paced: bool) -> None:
    """``run_sweep`` (in process): with two structure groups each starts on a 64-point probe;
    with one, every point costs the same and the first batch is the point-counted guided
    share (no probes)."""
    from search.sweep.driver import run_sweep

    plan = plan_for("workload=gpt_tiny", "system=dgx_a100_80g", f"parallel.tp={tp}",
                    "system.scaleout.bandwidth_GBps=range(25,401,25)",
                    "system.accelerator.hbm_bandwidth_GBps=range(1500,3501,100)",
                    "sweep.in_process=true", "tracking.enabled=false",
                    f"sweep.output_dir={tmp_path / 'out'}")
    out = run_sweep(plan, plan.base_cfg)
    assert out.computed == plan.num_points
    import polars as pl

    table = pl.read_parquet(out.output_dir / "results.parquet")
    group = pl.col("parallel.tp") if paced else pl.lit(2)  # a fixed value is not a column
    sizes = (table.group_by("batch_id").agg(pl.len().alias("n"), group.first().alias("tp"))
             .sort("batch_id"))
    firsts = sizes.group_by("tp", maintain_order=True).first()["n"].to_list()
    if paced:
        assert firsts == [AUTO_BATCH_MIN, AUTO_BATCH_MIN]
    else:
        assert firsts == [guided_batch_size(plan.num_points, 1)]


def test_the_running_sums_give_the_sizes_of_a_full_recount() -> None:
    """Sizes from the kept sums (O(1) a batch) equal those recounted over every group from
    the remaining points and rates (the formula of the module docstring), over 60 groups of
    random costs drawn and observed in a random order."""
    rng = np.random.default_rng(7)
    groups = [f"g{i}" for i in range(60)]
    left = {g: int(rng.integers(1, 5_000)) for g in groups}
    cost = {g: float(rng.choice([3e-5, 1e-3, 0.024])) for g in groups}
    pace = _pace(2, left)
    rates: dict[str, float] = {}
    pending: list[tuple[int, str, int]] = []
    batch = 0
    while any(left.values()):
        g = groups[int(rng.integers(len(groups)))]
        if left[g] == 0:
            continue
        if g in rates:
            mean = sum(rates.values()) / len(rates)
            seconds = sum(n * rates.get(h, mean) for h, n in left.items())
            want = min(AUTO_BATCH_MAX, max(AUTO_BATCH_MIN, math.ceil(seconds / 4 / rates[g])))
        else:
            want = AUTO_BATCH_MIN
        got = pace.take(g, batch)
        assert abs(got - min(want, left[g])) <= 1  # rounding at a whole point at most
        left[g] -= got
        pending.append((batch, g, got))
        batch += 1
        if pending and rng.random() < 0.5:  # a batch finishes, its cost with some noise
            done_id, h, n = pending.pop(int(rng.integers(len(pending))))
            seconds = n * cost[h] * float(rng.uniform(1.0, 1.5))
            pace.observe(done_id, n, seconds)
            rates[h] = min(rates.get(h, math.inf), seconds / n)
