"""The sweep's finding in words (search/sweep/finish.py format_finding)."""

from __future__ import annotations

import numpy as np
import polars as pl

from search.sweep.finish import FINDING_BINS, FINDING_VALUES_MAX, format_finding


def _frame(n: int = 4000) -> pl.DataFrame:
    rng = np.random.default_rng(5)
    bw = rng.uniform(25, 400, n)  # a continuous axis: every point its own value
    tp = rng.choice([1, 2, 4], n)
    time_s = 100 / bw + tp * 0.5
    return pl.DataFrame({"bw": bw, "tp": tp, "name": [f"w{i % 40}" for i in range(n)],
                         "iteration_time_s": time_s, "feasible": np.ones(n, dtype=bool)})


def test_few_values_are_listed_each_with_its_cost():
    text = format_finding(_frame(), ["tp"], "iteration_time_s", "minimize")
    line = text.splitlines()[1]
    assert line.startswith("  tp matters; best iteration_time_s by value: 1: ")
    assert "2: " in line and "4: " in line and line.count("(+") == 2  # the best value has none


def test_a_continuous_axis_is_reported_by_ranges_of_equal_point_count():
    frame = _frame()
    text = format_finding(frame, ["bw", "tp"], "iteration_time_s", "minimize")
    assert len(text) < 2000  # 4,000 distinct values: the old text listed every one
    line = next(x for x in text.splitlines() if x.startswith("  bw "))
    assert f"{FINDING_BINS} ranges of equal point count, 4,000 values" in line
    parts = line.split(": ", 1)[1].split("; ")
    assert len(parts) == FINDING_BINS
    # each range: its lowest and highest value and the best time in it, as computed directly
    order = np.argsort(frame["bw"].to_numpy(), kind="stable")
    bw, t = frame["bw"].to_numpy()[order], frame["iteration_time_s"].to_numpy()[order]
    for part, idx in zip(parts, np.array_split(np.arange(frame.height), FINDING_BINS),
                         strict=True):
        assert part.startswith(f"{bw[idx].min():.4g}-{bw[idx].max():.4g}: {t[idx].min():.4g}")
    assert parts[-1].endswith(f"{t.min():.4g}")  # the best plan's range carries no delta
    assert all("(+" in p for p in parts[:-1])


def test_many_names_show_only_the_best_ones():
    text = format_finding(_frame(), ["name"], "iteration_time_s", "minimize")
    line = text.splitlines()[1]
    assert f"by value, the best {FINDING_VALUES_MAX} of 40" in line
    assert len(line.split(": ", 1)[1].split("; ")) == FINDING_VALUES_MAX


def test_a_difference_under_one_percent_is_shown_not_rounded_to_zero():
    """A value that costs 0.04% more 'matters' (the spread is above the noise floor), so its
    cost is shown as such, never as +0%."""
    frame = pl.DataFrame({"bw": [100.0, 200.0], "iteration_time_s": [1.0004, 1.0],
                          "feasible": [True, True]})
    line = format_finding(frame, ["bw"], "iteration_time_s", "minimize").splitlines()[1]
    assert line.startswith("  bw matters;")
    assert "100.0: 1 (+0.04%)" in line and "+0%" not in line
    big = frame.with_columns(pl.Series("iteration_time_s", [1.25, 1.0]))
    assert "100.0: 1.25 (+25%)" in format_finding(big, ["bw"], "iteration_time_s", "minimize")
