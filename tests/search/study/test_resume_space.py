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
from simcore.errors import InputError

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


def _stored(tmp_path: Path) -> None:
    run_search(prepare_search(_cfg(tmp_path, "search.n_trials=4"), extra_space=SPACE,
                              extra_derived={"parallel.dp": "system.num_gpus / parallel.tp"}))


@pytest.mark.parametrize(("space", "derived", "match"), [
    ({**SPACE, "system.scaleout.bandwidth_GBps": "choice(25,50)"}, None,  # another kind
     r"search\.space\.system\.scaleout\.bandwidth_GBps=.*the stored study has Float"),
    ({**SPACE, "system.scaleup.bandwidth_GBps": "interval(100,1800)"}, None,  # other bounds
     r"search\.space\.system\.scaleup\.bandwidth_GBps=.*the stored study has Float"),
    ({**SPACE, "parallel.tp": "choice(1,2)"}, None,  # a new dimension
     r"search\.space\.parallel\.tp=.*not in the space of the stored study"),
    ({"system.scaleout.bandwidth_GBps": "interval(10,400)"}, None,  # a dimension dropped
     r"search\.space\.system\.scaleup\.bandwidth_GBps=None: in the space of the stored study"),
    (SPACE, {"parallel.dp": "system.num_gpus / (2 * parallel.tp)"},
     r"search\.derived\.parallel\.dp=.*the stored study has system\.num_gpus / parallel\.tp"),
])
def test_a_resume_with_another_space_is_refused(tmp_path: Path, space: dict[str, str],
                                                derived: dict[str, str] | None,
                                                match: str) -> None:
    """A changed kind crashed mid-study (Optuna: 'Cannot set different distribution kind');
    a new dimension was accepted and missing from the stored trials."""
    _stored(tmp_path)
    cfg = _cfg(tmp_path, "search.n_trials=8", "search.resume=true")
    with pytest.raises(InputError, match=match):
        prepare_search(cfg, extra_space=space,
                       extra_derived=derived or {"parallel.dp": "system.num_gpus / parallel.tp"})
    setup = prepare_search(cfg, extra_space=SPACE,  # the same space resumes
                           extra_derived={"parallel.dp": "system.num_gpus / parallel.tp"})
    assert len(setup.study.trials) == 4  # nothing ran on the refused resume
    assert run_search(setup).stats.n_evaluated == 4


def test_a_resume_with_other_objectives_names_them(tmp_path: Path) -> None:
    """Same direction (minimize), other objective: was accepted; the message named
    directions when they differed."""
    _stored(tmp_path)
    for objectives in ("[capex_usd]", "[tokens_per_s]"):
        with pytest.raises(InputError, match=r"search\.objectives=\[.*\]: the stored study "
                                             r"optimizes \['iteration_time_s'\]"):
            prepare_search(_cfg(tmp_path, "search.resume=true", "search.n_trials=8",
                                f"search.objectives={objectives}"), extra_space=SPACE,
                           extra_derived={"parallel.dp": "system.num_gpus / parallel.tp"})


def test_the_command_refuses_a_changed_space_in_one_line(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    from search.cli import main

    args = ["search", "workload=gpt_tiny", "system.num_gpus=8", "parallel.global_batch=16",
            f"search.output_dir={tmp_path}", "search.study_name=c", "search.n_trials=2",
            "search.batch_size=2", "search.log_plots=false", "search.in_process=true",
            "tracking.enabled=false", "system.scaleout.bandwidth_GBps=interval(10,400)"]
    assert main(args) == 0
    capsys.readouterr()
    code = main([*args[:-1], "search.resume=true", "search.n_trials=4",
                 "system.scaleout.bandwidth_GBps=choice(25,50)"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert "search.space.system.scaleout.bandwidth_GBps" in err and "stored study" in err
