"""Hover labels of the sweep plots: one vectorized pass gives each row's per-row formatting."""

from __future__ import annotations

import datetime

import polars as pl

from search.sweep.plots import hover_labels


def _row_label(row: dict[str, object], axes: list[str]) -> str:
    """The reference: Python's ``str`` of each value of the row, ``name=value`` joined."""
    return ", ".join(f"{a.rsplit('.', 1)[-1]}={row[a]}" for a in axes)


def test_labels_equal_the_per_row_formatting_for_mixed_types():
    frame = pl.DataFrame({
        "parallel.tp": [1, 2, None, 2, 4, 1],
        "system.scaleout.bandwidth_GBps": [0.1, -0.0, 0.0, float("nan"), 1e20, 100.0],
        "fidelity": ["fast", None, "exact", "fast", "exact", "fast"],
        "flag": [True, False, None, True, True, False],
        "sizes": pl.Series([[1], [2], [1], [3], [], [1]]),
        "day": [datetime.date(2020, 1, d) for d in range(1, 7)],
        "kind": pl.Series(["p", "q", "p", "q", "p", None], dtype=pl.Categorical),
        "ratio": pl.Series([0.0, -0.0, None, 1.5, 0.0, 2.5e-7], dtype=pl.Float32),
    })
    axes = frame.columns
    want = [_row_label(r, axes) for r in frame.iter_rows(named=True)]
    assert hover_labels(frame, axes).tolist() == want
    assert hover_labels(frame, axes[1:2]).tolist() == [_row_label(r, axes[1:2])
                                                       for r in frame.iter_rows(named=True)]


def test_labels_of_an_empty_frame():
    frame = pl.DataFrame({"parallel.tp": pl.Series([], dtype=pl.Int64)})
    assert hover_labels(frame, ["parallel.tp"]).tolist() == []
