"""Drivers sharing one study draw different points; a lone driver stays reproducible.

Each driver seeds its sampler from ``search.seed`` and the number of the first trial it creates
(:func:`search.study.storage.driver_seed`). Two real driver processes open one empty shared
study (``journal_shared``: Optuna's locked journal file), wait for each other, then search it;
before, both seeded their samplers with ``search.seed`` alone and drew the same start-up points.
Real Optuna, the real simulator (gpt_tiny), evaluation in the driver.
"""

from __future__ import annotations

import multiprocessing
import queue
from pathlib import Path
from typing import Any

import optuna
import pytest
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

from search.study.driver import prepare_search, run_search
from search.study.storage import make_storage

optuna.logging.set_verbosity(optuna.logging.WARNING)
CONF = Path(__file__).resolve().parents[3] / "conf"
SPACE = {"system.scaleout.bandwidth_GBps": "interval(10,400)",
         "system.scaleup.bandwidth_GBps": "interval(100,900)"}


def _cfg(out: Path, sampler: str, n_trials: int) -> DictConfig:
    overrides = ["workload=gpt_tiny", "system.num_gpus=8", "parallel.global_batch=16",
                 f"search.output_dir={out}", "search.study_name=s", "search.storage=journal_shared",
                 f"search.sampler={sampler}", "search.seed=7", f"search.n_trials={n_trials}",
                 "search.batch_size=4", "search.n_startup_trials=40", "search.log_plots=false"]
    with initialize_config_dir(config_dir=str(CONF), version_base=None):
        return compose("config", overrides=overrides)


def _drive(out: str, sampler: str, n_trials: int, joined: Any, asked: Any) -> None:
    """One driver: join the shared study, wait until every driver has joined, search."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    setup = prepare_search(_cfg(Path(out), sampler, n_trials), extra_space=SPACE)
    joined.wait(timeout=120)
    asked.put(run_search(setup).stats.n_evaluated)


def _trials(out: Path) -> list[optuna.trial.FrozenTrial]:
    storage = make_storage("journal_shared", out / "s", "s")
    return optuna.load_study(study_name="s", storage=storage).trials


def _points(out: Path) -> list[tuple[Any, ...]]:
    return [tuple(sorted(t.params.items())) for t in _trials(out)]


def _next_count(asked: Any, drivers: list[Any], timeout_s: float = 300.0) -> int:
    """The next driver's trial count; fails at once, naming the exit codes, when a driver
    died without reporting one (rather than waiting out the timeout)."""
    waited = 0.0
    while waited < timeout_s:
        try:
            return int(asked.get(timeout=1.0))
        except queue.Empty:
            waited += 1.0
        dead = [d.exitcode for d in drivers if d.exitcode not in (None, 0)]
        if dead and asked.empty():
            pytest.fail(f"a driver died (exit codes {[d.exitcode for d in drivers]})")
    pytest.fail(f"no driver reported within {timeout_s:.0f} s")


@pytest.mark.parametrize("sampler", ["random", "tpe"])
def test_two_drivers_joining_an_empty_shared_study_draw_different_points(
        tmp_path: Path, sampler: str) -> None:
    """Two continuous dimensions, every trial a random start-up draw: drivers with the same
    seed stream repeat each other's points exactly, drivers with distinct seeds never do.
    Before the fix the second driver's trials repeated the first's."""
    spawn = multiprocessing.get_context("spawn")
    joined, asked = spawn.Barrier(2), spawn.Queue()
    drivers = [spawn.Process(target=_drive, args=(str(tmp_path), sampler, 16, joined, asked))
               for _ in range(2)]
    for driver in drivers:
        driver.start()
    try:
        counts = [_next_count(asked, drivers) for _ in drivers]
    finally:
        for driver in drivers:
            driver.join(timeout=60)
            if driver.is_alive():
                driver.kill()
    assert [d.exitcode for d in drivers] == [0, 0]
    assert min(counts) > 0, counts  # both drivers sampled: the study was shared
    trials = _trials(tmp_path)
    assert [t.number for t in trials] == list(range(len(trials)))
    assert all(t.state == optuna.trial.TrialState.COMPLETE for t in trials)
    assert len(trials) == sum(counts) and 16 <= len(trials) <= 16 + 4  # overshoot <= 1 batch
    points = _points(tmp_path)
    assert len(set(points)) == len(points), points  # no driver repeats the other's draws


def test_a_lone_driver_on_a_shared_study_reproduces_its_points(tmp_path: Path) -> None:
    runs = []
    for folder in ("a", "b"):
        run_search(prepare_search(_cfg(tmp_path / folder, "tpe", 8), extra_space=SPACE))
        runs.append(_points(tmp_path / folder))
    assert len(runs[0]) == 8 and runs[0] == runs[1]
