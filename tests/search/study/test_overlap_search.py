"""The example study with TP overlap and CP searched (conf/search/gpt3_175b_1024_h100_overlap.yaml):
its blocks give every trial the iteration time of the pieces, and both new axes are searched;
the sweep and search commands' note when they would cost such plans as pieces."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import optuna
import polars as pl
import pytest
from hydra import compose, initialize_config_dir

from search.cli import main
from search.study.driver import prepare_search, run_search

optuna.logging.set_verbosity(optuna.logging.WARNING)
CONF = Path(__file__).resolve().parents[3] / "conf"


def _table(tmp_path: Path, *overrides: str) -> pl.DataFrame:
    base = ["search=gpt3_175b_1024_h100_overlap", f"search.output_dir={tmp_path}",
            "search.n_trials=16", "search.sampler=random", "search.in_process=true",
            "search.log_plots=false"]
    with initialize_config_dir(config_dir=str(CONF), version_base=None):
        cfg = compose("config", overrides=[*base, *overrides])
    setup = prepare_search(cfg)
    assert {"parallel.tp_comm_overlap", "parallel.cp"} <= set(setup.space.distributions)
    return pl.read_parquet(run_search(setup).table_path).sort("trial_number")


def test_overlap_study_trials_cost_what_their_pieces_cost(tmp_path: Path) -> None:
    blocks = _table(tmp_path / "blocks")
    pieces = _table(tmp_path / "pieces", "parallel.overlap_blocks=false",
                    "search.study_name=pieces")
    keys = ["parallel.tp", "parallel.pp", "parallel.cp", "parallel.tp_comm_overlap"]
    assert blocks.select(keys).equals(pieces.select(keys))  # the same seeded random trials
    ok = blocks["feasible"].to_numpy()
    assert np.array_equal(ok, pieces["feasible"].to_numpy()) and ok.sum() >= 4
    np.testing.assert_allclose(blocks["iteration_time_s"].to_numpy()[ok],
                               pieces["iteration_time_s"].to_numpy()[ok], rtol=1e-10)
    feasible = blocks.filter(pl.col("feasible"))
    assert feasible["parallel.tp_comm_overlap"].n_unique() == 2
    assert feasible["parallel.cp"].n_unique() == 2


@pytest.mark.parametrize("blocks", [False, True])
def test_search_command_names_overlap_blocks_when_it_searches_pieces(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], blocks: bool) -> None:
    args = ["search", "workload=gpt_tiny", "system.num_gpus=8", "parallel.global_batch=16",
            "parallel.tp=choice(1,2)", "parallel.tp_comm_overlap=choice(true,false)",
            f"parallel.overlap_blocks={str(blocks).lower()}", "search.n_trials=4",
            "search.batch_size=4", "search.in_process=true", "search.log_plots=false",
            "tracking.enabled=false", f"search.output_dir={tmp_path}"]
    assert main(args) == 0
    notes = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("note:")]
    if blocks:
        assert notes == []
    else:
        assert len(notes) == 1 and "parallel.overlap_blocks=true" in notes[0]


@pytest.mark.parametrize("blocks", [False, True])
def test_sweep_command_names_overlap_blocks_from_a_thousand_piece_points(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], blocks: bool) -> None:
    args = ["sweep", "workload=gpt_tiny", "system.num_gpus=8", "parallel.global_batch=16",
            "parallel.tp=2", "parallel.tp_comm_overlap=true",
            f"parallel.overlap_blocks={str(blocks).lower()}",
            "system.scaleout.bandwidth_GBps=range(10,330,10)",  # 32 x 32 = 1,024 points
            "system.scaleup.bandwidth_GBps=range(100,740,20)", "sweep.in_process=true",
            "sweep.progress=false", "tracking.enabled=false", f"sweep.output_dir={tmp_path}"]
    assert main(args) == 0
    notes = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("note:")]
    if blocks:
        assert notes == []
    else:
        assert notes == [notes[0]] and notes[0].startswith("note: 1024 points")
        assert "parallel.overlap_blocks=true" in notes[0]
