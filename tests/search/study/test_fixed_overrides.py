"""A plain command-line value for a key the space searches fixes it, as a sweep fixes a key
given on the command line: the dimension leaves the space and the header says so. Before,
``simsweep search search=bandwidth_cost_70b system.scaleout.bandwidth_GBps=50`` still searched
the key (the value was silently ignored)."""

from __future__ import annotations

from pathlib import Path

import optuna
import polars as pl
import pytest

from search.cli import main

optuna.logging.set_verbosity(optuna.logging.WARNING)


def _run(tmp_path: Path, *args: str) -> list[str]:
    return ["search", f"search.output_dir={tmp_path}", "search.n_trials=4",
            "search.batch_size=4", "search.log_plots=false", "search.in_process=true",
            "tracking.enabled=false", *args]


def test_a_fixed_key_of_a_preset_space_is_not_searched(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    code = main(_run(tmp_path, "search=bandwidth_cost_70b", "system.scaleout.bandwidth_GBps=50"))
    out = capsys.readouterr().out
    assert code == 0, out
    header = out.splitlines()[:2]
    assert "1 dimension(s) (system.scaleup.bandwidth_GBps)" in header[0], header
    assert "fixed on the command line, not searched: system.scaleout.bandwidth_GBps=50" \
        in header[1], header
    table = pl.read_parquet(tmp_path / "bandwidth_cost_70b_4096_h100" / "results.parquet")
    assert "system.scaleout.bandwidth_GBps" not in table.columns
    assert table["system.scaleup.bandwidth_GBps"].n_unique() == 4


def test_a_fixed_key_of_the_default_space_is_not_searched(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    code = main(_run(tmp_path, "workload=gpt_tiny", "system.num_gpus=8",
                     "parallel.global_batch=16", "search.study_name=d", "parallel.tp=2",
                     "parallel.recompute=full"))
    out = capsys.readouterr().out
    assert code == 0, out
    assert "not searched: parallel.tp=2, parallel.recompute=full" in out
    study = optuna.load_study(study_name="d", storage=optuna.storages.JournalStorage(
        optuna.storages.journal.JournalFileBackend(str(tmp_path / "d" / "d.journal"))))
    assert all(not {"parallel.tp", "parallel.recompute"} & set(t.params) for t in study.trials)
    assert "parallel.pp" in study.trials[0].params  # the rest is still searched
    table = pl.read_parquet(tmp_path / "d" / "results.parquet")
    assert table.filter(pl.col("feasible")).height >= 1


@pytest.mark.parametrize(("args", "match"), [
    (("search.space.parallel.tp=choice(1,2)", "parallel.tp=2"),
     "parallel.tp='choice(1,2)': is in search.space and set to one value on the command "
     "line: keep one"),
    (("search=bandwidth_cost_70b", "system.scaleout.bandwidth_GBps=50",
      "system.scaleup.bandwidth_GBps=400"), "nothing left to search"),
])
def test_a_contradictory_fix_is_refused(tmp_path: Path, capsys, args: tuple[str, ...],  # type: ignore[no-untyped-def]
                                        match: str) -> None:
    base = ("workload=gpt_tiny", "system.num_gpus=8", "parallel.global_batch=16")
    code = main(_run(tmp_path, *(args if args[0].startswith("search=") else (*base, *args))))
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and match in err, err
    assert not list(tmp_path.iterdir())
