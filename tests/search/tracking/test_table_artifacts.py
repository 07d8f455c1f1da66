"""results.csv for the MLflow UI's preview: whole when it fits, else the best rows (search/tracking/publish.py)."""

from __future__ import annotations

import numpy as np
import polars as pl

from search.tracking.publish import (
    UI_PREVIEW_MAX_B,
    csv_rows_that_fit,
    describe_sweep,
    table_artifacts,
)


def _table(n: int, seed: int = 0) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    return pl.DataFrame({
        "point_id": np.arange(n), "point_hash": [f"{i:016x}" for i in rng.integers(0, 2**62, n)],
        "system.scaleout.bandwidth_GBps": rng.choice([25.0, 50.0, 100.0, 400.0], n),
        "iteration_time_s": rng.uniform(1.0, 9.0, n), "mfu": rng.uniform(0.1, 0.6, n),
        "feasible": rng.uniform(size=n) > 0.2})


def test_a_table_that_fits_is_written_whole_in_point_order(tmp_path):
    frame = _table(500)
    paths, rows = table_artifacts(frame, tmp_path, "iteration_time_s", "minimize")
    assert paths == [tmp_path / "results.csv"] and rows == 500
    assert pl.read_csv(paths[0]).equals(frame)
    assert paths[0].stat().st_size < UI_PREVIEW_MAX_B


def test_a_table_over_the_limit_keeps_the_best_rows_that_fit(tmp_path):
    frame = _table(20_000, seed=1)
    limit_b = 200_000  # ~2,500 rows of this table
    for direction, sign in (("minimize", 1.0), ("maximize", -1.0)):
        paths, rows = table_artifacts(frame, tmp_path, "iteration_time_s", direction, limit_b)
        written = pl.read_csv(paths[0])
        assert paths[0].stat().st_size <= limit_b and written.height == rows
        assert 1_000 < rows < frame.height
        # the expected rows, ranked here with numpy: feasible first, then by the objective
        feasible = frame["feasible"].to_numpy()
        time_s = frame["iteration_time_s"].to_numpy()
        order = np.lexsort((sign * time_s, ~feasible))[:rows]
        assert written["point_id"].to_list() == frame["point_id"].to_numpy()[order].tolist()
        assert written["feasible"].all()  # 80% of 20,000 are feasible: the best are all feasible


def test_the_row_estimate_follows_the_bytes_per_row():
    frame = _table(4_000, seed=2)
    whole_b = len(frame.write_csv().encode())
    assert csv_rows_that_fit(frame, whole_b * 2) == 4_000
    half = csv_rows_that_fit(frame, whole_b // 2)
    assert 0.45 * 4_000 < half < 0.5 * 4_000  # a 3% margin under the limit
    assert csv_rows_that_fit(frame.head(0)) == 0


def test_the_description_says_when_the_csv_holds_only_the_best_points():
    full = describe_sweep("s", ["a"], {}, "summary", 1_000, 1_000)
    cut = describe_sweep("s", ["a"], {}, "summary", 451_584, 110_000)
    assert "holds the best" not in full
    assert "`results.csv` holds the best 110,000 of the 451,584 points" in cut
    assert cut.index("holds the best") < cut.index("```")  # before the summary block


def test_the_written_file_stays_under_the_limit_when_the_estimate_falls_short(tmp_path):
    frame = _table(10_000, seed=3)
    sampled = np.unique(np.linspace(0, 9_999, 2_000).astype(np.int64))  # the rows it samples
    reason = np.full(10_000, "x" * 200)
    reason[sampled] = ""  # the sample sees short rows only: it overestimates the rows that fit
    frame = frame.with_columns(pl.Series("reason", reason))
    limit_b = 300_000
    assert csv_rows_that_fit(frame, limit_b) * 200 > limit_b  # the estimate alone would overflow
    paths, rows = table_artifacts(frame, tmp_path, "iteration_time_s", "minimize", limit_b)
    assert paths[0].stat().st_size <= limit_b and pl.read_csv(paths[0]).height == rows > 0
