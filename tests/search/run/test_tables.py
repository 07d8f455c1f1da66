"""Results parts on disk, consolidation and the summary (search/run/tables.py)."""

from __future__ import annotations

import numpy as np
import polars as pl

from search.run.tables import ResultsStore, batch_frame, best_rows, format_summary, summarize


def _frame(ids, times, feasible, reasons):
    ids = np.asarray(ids, dtype=np.int64)
    cols = {"iteration_time_s": np.asarray(times, dtype=float),
            "feasible": np.asarray(feasible), "reason": np.asarray(reasons, dtype=object)}
    return batch_frame(ids, [f"h{i}" for i in ids], {"parallel.tp": ids % 3 + 1}, cols, 0, "n1")


def test_parts_are_atomic_and_reloaded_after_reopening(tmp_path):
    store = ResultsStore(tmp_path, flush_interval_s=3600)
    store.add(_frame([0, 1], [2.0, 1.0], [True, True], ["", ""]))
    assert store.done_ids().size == 0  # buffered, not yet on disk
    store.flush()
    store.add(_frame([2, 3], [3.0, 0.5], [True, False], ["", "oom: 90 GiB > 80 GiB"]))
    store.flush()
    assert not list((tmp_path / "results").glob("*.tmp"))
    again = ResultsStore(tmp_path)
    assert sorted(again.done_ids().tolist()) == [0, 1, 2, 3]
    again.add(_frame([4], [9.0], [True], [""]))
    again.flush()
    assert len(list((tmp_path / "results").glob("part-*.parquet"))) == 3
    table = again.consolidate(tmp_path / "results.parquet")
    assert table["point_id"].to_list() == [0, 1, 2, 3, 4]
    assert pl.read_parquet(tmp_path / "results.parquet").equals(table)
    # parts are written with lz4 while the sweep runs (cheaper for the driver), the table with
    # polars' default zstd
    import pyarrow.parquet as pq

    def codec(path):
        return pq.ParquetFile(path).metadata.row_group(0).column(0).compression

    assert {codec(p) for p in (tmp_path / "results").glob("part-*.parquet")} == {"LZ4"}
    assert codec(tmp_path / "results.parquet") == "ZSTD"


def test_summary_best_points_and_infeasible_counts_by_reason_code():
    frame = _frame([0, 1, 2, 3, 4], [2.0, 1.0, 3.0, 0.1, 0.2], [True, True, True, False, False],
                   ["", "", "", "out of memory: 90 > 80", "parallel.tp=3: must divide 16"])
    s = summarize(frame, "iteration_time_s", "minimize", top_k=2)
    assert s.num_points == 5 and s.num_feasible == 3
    assert s.infeasible_by_reason == {"out of memory": 1, "parallel.tp": 1}
    assert s.best["point_id"].to_list() == [1, 0]  # infeasible 0.1 s and 0.2 s excluded
    text = format_summary(s, ["parallel.tp"], ["iteration_time_s"])
    assert "infeasible out of memory: 1" in text and "best 2 by iteration_time_s" in text
    assert summarize(frame, "iteration_time_s", "maximize", 1).best["point_id"].to_list() == [2]


def test_best_rows_equal_the_first_rows_of_a_stable_sort_ties_and_nulls_included():
    rng = np.random.default_rng(5)
    n = 5_000
    times = rng.choice([1.0, 2.0, 2.5, 3.0, np.nan], n)  # many ties, and NaN (sorts as largest)
    frame = pl.DataFrame({"point_id": np.arange(n), "iteration_time_s": times,
                          "mfu": rng.uniform(size=n)})
    frame = frame.with_columns(  # a few nulls: polars puts them first, ascending or not
        pl.when(pl.col("point_id") % 997 == 5).then(None).otherwise(pl.col("iteration_time_s"))
        .alias("iteration_time_s"))
    for direction in ("minimize", "maximize"):
        for k in (1, 7, 300, n + 3):
            want = frame.sort("iteration_time_s", descending=direction == "maximize",
                              maintain_order=True).head(k)
            assert best_rows(frame, "iteration_time_s", direction, k).equals(want)


def test_infeasible_counts_group_many_rows_by_their_reason_code():
    n = 3_000
    reasons = np.where(np.arange(n) % 3 == 0, "out of memory: 90 > 80",
                       np.where(np.arange(n) % 3 == 1, "parallel.tp=3: must divide 16", ""))
    frame = _frame(np.arange(n), np.ones(n), reasons == "", reasons)
    s = summarize(frame, "iteration_time_s", "minimize", top_k=3)
    assert s.infeasible_by_reason == {"out of memory": 1_000, "parallel.tp": 1_000}
    assert s.best["point_id"].to_list() == [2, 5, 8]  # ties in table order


def test_the_best_points_table_prints_significant_digits():
    """A small workload's cost per iteration (a few millionths of a dollar) and sub-millisecond
    times keep their digits: fixed decimals printed them as 0.0000."""
    ids = np.arange(3, dtype=np.int64)
    cols = {"iteration_time_s": np.asarray([1.5931e-3, 5.5042e-3, 12.345678]),
            "cost_usd_per_iter": np.asarray([3.0496e-6, 1.0536e-5, 0.25]),
            "bubble_s": np.zeros(3), "feasible": np.ones(3, dtype=bool),
            "reason": np.asarray(["", "", ""], dtype=object)}
    frame = batch_frame(ids, [f"h{i}" for i in ids], {"parallel.tp": ids + 1}, cols, 0, "n1")
    text = format_summary(summarize(frame, "iteration_time_s", "minimize", 3), ["parallel.tp"],
                          ["iteration_time_s", "cost_usd_per_iter", "bubble_s"])
    for shown in ("0.0015931", "3.0496e-06", "1.0536e-05", "12.346", "0.25"):
        assert shown in text, shown
    assert "0.0000" not in text
