"""The study's results table written by several drivers at once (search/study/report.py).

Drivers that share a study share its output folder, and each rewrites the whole study's table
when it stops; with one temporary name for all, one driver's rename took the file another was
about to rename (FileNotFoundError at the end of a finished search)."""

from __future__ import annotations

import threading
from pathlib import Path

import optuna
import polars as pl

from search.study.objectives import Objective
from search.study.report import write_table


def test_concurrent_writers_of_one_table_all_finish_and_leave_it_whole(tmp_path: Path) -> None:
    study = optuna.create_study()
    for x in range(40):
        study.enqueue_trial({"x": x})
        study.optimize(lambda t: float(t.suggest_int("x", 0, 100)) ** 2, n_trials=1)
    path = tmp_path / "results.parquet"
    errors: list[BaseException] = []
    start = threading.Barrier(4)

    def writer() -> None:
        start.wait()
        try:
            for _ in range(60):
                write_table(study, [Objective("iteration_time_s", "minimize")], path)
        except BaseException as err:  # noqa: BLE001 - collected for the assertion
            errors.append(err)

    threads = [threading.Thread(target=writer) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    table = pl.read_parquet(path)
    assert table.height == 40 and sorted(table["x"].to_list()) == list(range(40))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.parquet"]
