"""Resuming a study: fresh proposals, the same space, the same objectives.

A resumed study's sampler continues where the stored study stands (its seed is derived from
the configured seed and the trials the study holds), so the new trials do not replay the first
run's; a resume whose space or objectives differ from the stored study's is refused before any
trial, naming the key. Real Optuna journal storage and the real simulator (gpt_tiny).
"""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

from search.study.driver import prepare_search, run_search

optuna.logging.set_verbosity(optuna.logging.WARNING)
CONF = Path(__file__).resolve().parents[3] / "conf"
SPACE = {"system.scaleout.bandwidth_GBps": "interval(10,400)",
         "system.scaleup.bandwidth_GBps": "interval(100,900)"}


def _cfg(tmp_path: Path, *overrides: str) -> DictConfig:
    base = ["workload=gpt_tiny", "system.num_gpus=8", "parallel.global_batch=16",
            f"search.output_dir={tmp_path}", "search.study_name=r", "search.batch_size=4",
            "search.log_plots=false"]
    with initialize_config_dir(config_dir=str(CONF), version_base=None):
        return compose("config", overrides=[*base, *overrides])


def _params(setup: object) -> list[tuple[float, ...]]:
    study = setup.study  # type: ignore[attr-defined]
    return [tuple(sorted(t.params.items())) for t in study.trials]


@pytest.mark.parametrize("sampler", ["tpe", "random", "nsga2"])
def test_a_resumed_study_proposes_new_points(tmp_path: Path, sampler: str) -> None:
    """Two continuous dimensions, every trial drawn at random (TPE's start-up trials,
    NSGA-II's first generation): a replayed random sequence repeats the first run's trials
    exactly, fresh proposals never do. Before the fix trials 4-7 equalled trials 0-3."""
    extra = (f"search.sampler={sampler}", "search.population_size=8")
    run_search(prepare_search(_cfg(tmp_path, *extra, "search.n_trials=4"), extra_space=SPACE))
    setup = prepare_search(_cfg(tmp_path, *extra, "search.n_trials=8", "search.resume=true"),
                           extra_space=SPACE)
    run_search(setup)
    points = _params(setup)
    assert len(points) == 8
    assert len(set(points)) == 8, points  # no trial repeats another


def test_a_fresh_study_with_the_same_seed_is_reproducible(tmp_path: Path) -> None:
    runs = []
    for folder in ("a", "b"):
        setup = prepare_search(_cfg(tmp_path / folder, "search.n_trials=8", "search.seed=3"),
                               extra_space=SPACE)
        run_search(setup)
        runs.append(_params(setup))
    assert runs[0] == runs[1]
