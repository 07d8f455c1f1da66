"""Config-group dimensions of a search (``system=choice(a,b)``): which preset, searched by Optuna,
each trial predicted as the preset composed on its own would be."""

from __future__ import annotations

from pathlib import Path

import optuna
import polars as pl
import pytest

from search.commands.optimize import main, split_search_overrides
from search.config.build import build_specs
from search.config.compose import compose_session
from search.study.driver import prepare_search, run_search
from search.study.groups import GroupComposer
from simcore.api import simulate_batch
from simcore.errors import InputError

optuna.logging.set_verbosity(optuna.logging.WARNING)
CONF = Path(__file__).resolve().parents[3] / "conf"
SYSTEMS = ("dgx_a100_80g", "dgx_h100_80g")


def _setup(tmp_path: Path, space: dict[str, str], *extra: str):  # type: ignore[no-untyped-def]
    compose, options = compose_session(CONF)
    plain = ("workload=gpt_tiny", "system.num_gpus=16", "parallel.global_batch=32",
             f"search.output_dir={tmp_path}", "search.sampler=grid", "search.n_trials=8",
             "search.batch_size=8", "search.log_plots=false", *extra)
    cfg = compose(list(plain))
    return prepare_search(cfg, None, space, {}, GroupComposer(compose, options, plain)), compose


def test_a_system_dimension_predicts_each_trial_as_its_preset_alone(tmp_path: Path) -> None:
    space = {"system": f"choice({','.join(SYSTEMS)})", "parallel.tp": "choice(1,2,4)"}
    setup, compose = _setup(tmp_path, space)
    assert setup.study_name.startswith("gpt_tiny-dgx_a100_80g+dgx_h100_80g-16gpu")
    out = run_search(setup)
    table = pl.read_parquet(out.table_path)
    assert sorted(set(table["system"])) == list(SYSTEMS) and table.height == 6
    assert table["feasible"].all()
    times: dict[tuple[str, int], float] = {}
    for trial in setup.study.trials:
        system, tp = trial.params["system"], trial.params["parallel.tp"]
        # the same point composed on its own, as `simsweep simulate` composes it
        model, parallel, spec = build_specs(compose(
            ["workload=gpt_tiny", f"system={system}", "system.num_gpus=16",
             "parallel.global_batch=32", f"parallel.tp={tp}"]))
        alone = simulate_batch(model, parallel.resolve(spec.num_gpus), [spec])
        assert trial.values[0] == pytest.approx(float(alone.iteration_time_s[0]), rel=1e-12)
        times[system, tp] = trial.values[0]
    for tp in (1, 2, 4):  # gpt_tiny's 4 heads; H100's 3x peak and faster NVLink beat A100 at every tp
        assert times["dgx_h100_80g", tp] < times["dgx_a100_80g", tp]


def test_only_group_dimensions_still_search_the_parallelization(tmp_path: Path) -> None:
    setup, _ = _setup(tmp_path, {"system": f"choice({','.join(SYSTEMS)})"})
    assert "system" in setup.space.distributions
    assert {"parallel.tp", "parallel.pp"} <= set(setup.space.distributions)


@pytest.mark.parametrize(("space", "extra", "key", "words"), [
    ({"system": "choice(dgx_h100_80g,dgx_h900)"}, (), "search.space.system",
     ("dgx_h900", "must be one of", "dgx_b200")),
    ({"system": "interval(1,2)"}, (), "search.space.system", ("choice",)),
    ({"sytem": "choice(dgx_h100_80g,dgx_b200)"}, (), "search.space.sytem",
     ("no config group",)),
    ({"system": "choice(dgx_h100_80g,dgx_b200)"}, ("system=dgx_a100_80g",), "system",
     ("searched", "command line")),
])
def test_bad_group_dimensions_are_refused_before_any_trial(
        tmp_path: Path, space: dict[str, str], extra: tuple[str, ...], key: str,
        words: tuple[str, ...]) -> None:
    with pytest.raises(InputError) as err:
        _setup(tmp_path, space, *extra)
    assert err.value.key == key
    assert all(w in str(err.value) for w in words), str(err.value)
    assert not list(tmp_path.iterdir())  # no study opened


def test_a_group_dimension_needs_a_composer(tmp_path: Path) -> None:
    compose, _ = compose_session(CONF)
    cfg = compose(["workload=gpt_tiny", f"search.output_dir={tmp_path}"])
    with pytest.raises(InputError, match="config-group dimension"):
        prepare_search(cfg, None, {"system": "choice(dgx_h100_80g,dgx_b200)"}, {})


def test_the_command_reads_a_group_sweep_as_a_dimension(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    plain, space, _ = split_search_overrides(
        ["system=choice(dgx_a100_80g,dgx_h100_80g)", "system.num_gpus=16", "workload=gpt_tiny"])
    assert space == {"system": "choice(dgx_a100_80g,dgx_h100_80g)"}
    assert plain == ["system.num_gpus=16", "workload=gpt_tiny"]
    code = main(["workload=gpt_tiny", "system=choice(dgx_a100_80g,dgx_h100_80g)",
                 "system.num_gpus=16", "parallel.global_batch=32", "parallel.tp=choice(1,2)",
                 "search.sampler=grid", "search.n_trials=4", "search.in_process=true",
                 "search.log_plots=false", f"search.output_dir={tmp_path / 'out'}",
                 f"tracking.uri=sqlite:///{tmp_path / 'mlflow.db'}"])
    assert code == 0
    printed = capsys.readouterr().out
    assert "2 dimension(s) (system, parallel.tp)" in printed
    table = pl.read_parquet(next((tmp_path / "out").rglob("results.parquet")))
    assert sorted(set(table["system"])) == ["dgx_a100_80g", "dgx_h100_80g"]
    assert table["feasible"].all() and table.height == 4
