"""A search space is checked against the config before the study exists: unknown keys, values
of the wrong type, interval bounds a system field refuses and derived expressions reading
unknown or non-numeric keys are refused naming the key, and nothing is created (no journal, no
folder), so the corrected rerun starts clean instead of finding a half-made study."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

from search.study.driver import prepare_search, run_search
from simcore.errors import InputError

CONF = Path(__file__).resolve().parents[3] / "conf"
DP = {"parallel.dp": "system.num_gpus / (parallel.tp * parallel.pp)"}


def _cfg(tmp_path: Path, *overrides: str) -> DictConfig:
    base = ["workload=gpt_tiny", "system.num_gpus=8", "parallel.global_batch=16",
            f"search.output_dir={tmp_path}", "search.study_name=c", "search.n_trials=4",
            "search.batch_size=4", "search.log_plots=false"]
    with initialize_config_dir(config_dir=str(CONF), version_base=None):
        return compose("config", overrides=[*base, *overrides])


@pytest.mark.parametrize(("space", "derived", "match"), [
    ({"parallel.tpp": "choice(1,2)"}, {}, r"search\.space\.parallel\.tpp=1: unknown key"),
    ({"parallel.tp": "choice(2,abc)"}, {}, r"search\.space\.parallel\.tp='abc'"),
    ({"workload.nosuch": "interval(1,2)"}, {}, r"search\.space\.workload\.nosuch=.*unknown key"),
    ({"system.scaleout.bandwidth_GBps": "interval(-5,100)"}, {},
     r"search\.space\.system\.scaleout\.bandwidth_GBps=.*bound -5"),
    ({"parallel.tp": "choice(1,2)"}, {"parallel.nosuch": "1"},
     r"search\.derived\.parallel\.nosuch=1: unknown key"),
    ({"parallel.tp": "choice(1,2)"}, {"parallel.dp": "system.num_gpu / (parallel.tp * parallel.pp)"},
     r"search\.derived\.parallel\.dp=.*reads system\.num_gpu: not a config key"),
    ({"parallel.sequence_parallel": "choice(true,false)"},
     {"parallel.dp": "system.num_gpus / parallel.sequence_parallel"},
     r"search\.derived\.parallel\.dp=.*reads parallel\.sequence_parallel, whose value True"),
    ({"parallel.tp": "choice(1,2)"}, {"parallel.dp": "abs(parallel.tp)"},
     r"search\.derived\.parallel\.dp=.*only numbers, keys"),
    ({"parallel.tp": "choice(1,2,4)"}, {"parallel.dp": "system.num_gpus / (parallel.tp - parallel.tp)"},
     r"search\.derived\.parallel\.dp='8 / 0': division by zero, at the first and at the last"),
])
def test_a_bad_space_is_refused_before_the_study_exists(tmp_path: Path, space: dict[str, str],
                                                        derived: dict[str, str],
                                                        match: str) -> None:
    with pytest.raises(InputError, match=match):
        prepare_search(_cfg(tmp_path), extra_space=space, extra_derived=derived)
    assert not list(tmp_path.iterdir())  # no study, no folder: the fixed rerun starts clean


def test_a_good_space_with_derived_values_still_runs(tmp_path: Path) -> None:
    setup = prepare_search(_cfg(tmp_path), extra_space={
        "parallel.tp": "choice(1,2)", "parallel.pp": "choice(1,2)",
        "system.scaleout.bandwidth_GBps": "interval(10,400)", "parallel.micro_batch": "range(1,3)"},
        extra_derived={**DP, "parallel.global_batch": "parallel.dp * parallel.micro_batch * 8"})
    assert run_search(setup).stats.n_evaluated == 4


def test_the_command_refuses_an_unknown_dimension_in_one_line(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    from search.cli import main

    code = main(["search", "workload=gpt_tiny", "system.num_gpus=8", "parallel.global_batch=16",
                 f"search.output_dir={tmp_path}", "search.n_trials=2", "search.in_process=true",
                 "tracking.enabled=false", "parallel.tpp=choice(1,2)"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert "search.space.parallel.tpp" in err and "unknown key" in err
    assert not list(tmp_path.iterdir())


def test_a_derived_value_failing_for_every_sample_stops_the_search_naming_it(
        tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    """A derived value beyond the expression limits for every tp but 1 (the check before the
    study evaluates tp 1, and passes): each trial fails to build and is told FAIL; once every
    one of the first 8 trials has failed so, the search stops in one line naming the key, the
    value, the rule and the sampled value, leaves nothing RUNNING and ends the MLflow parent
    run FAILED. Before, the first failing trial stopped the search, naming neither the sampled
    value nor that every trial failed."""
    import optuna
    from mlflow import MlflowClient

    from search.cli import main
    from search.study.storage import make_storage
    from tests.cli_output import one_line_error

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    args = ["search", "workload=gpt_tiny", "system.num_gpus=8", "parallel.global_batch=16",
            f"search.output_dir={tmp_path}", "search.study_name=f", "search.n_trials=8",
            "search.batch_size=4", "search.sampler=random", "search.log_plots=false",
            "search.in_process=true", f"tracking.uri={uri}", "parallel.tp=int(interval(1,1000))",
            "search.derived.parallel.dp=system.num_gpus * 10 ** (400 * (parallel.tp - 1))"]
    rc = main(args)
    err = capsys.readouterr().err
    error = [line for line in err.splitlines() if line.startswith("simsweep search: error")]
    assert len(error) == 1, err
    one_line_error(rc, error[0], "search.derived.parallel.dp=", "(limit expr_",
                   "at parallel.tp=", "every one of the 8 trials this search asked failed")
    study = optuna.load_study(study_name="f", storage=make_storage("journal", tmp_path / "f", "f"))
    assert len(study.trials) == 8
    assert {t.state for t in study.trials} == {optuna.trial.TrialState.FAIL}
    assert all("search.derived.parallel.dp=" in t.user_attrs["reason"] for t in study.trials)
    client = MlflowClient(uri)
    runs = client.search_runs([client.get_experiment_by_name("search-f").experiment_id])
    assert [r.info.status for r in runs] == ["FAILED"]
