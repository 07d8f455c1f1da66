"""End-to-end search on the real simulator (gpt_tiny), Optuna journal storage in tmp_path."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import optuna
import polars as pl
import pytest
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

from search.study.driver import prepare_search, run_search
from search.study.pareto import pareto_mask
from simcore.errors import InputError

optuna.logging.set_verbosity(optuna.logging.WARNING)
CONF = Path(__file__).resolve().parents[3] / "conf"


def _cfg(tmp_path: Path, *overrides: str) -> DictConfig:
    base = ["workload=gpt_tiny", "system.num_gpus=8", "parallel.global_batch=16",
            f"search.output_dir={tmp_path}", "search.n_trials=12", "search.batch_size=4",
            "search.n_startup_trials=4", "search.log_plots=false"]
    with initialize_config_dir(config_dir=str(CONF), version_base=None):
        return compose("config", overrides=[*base, *overrides])


def test_default_space_searches_parallelization(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path, "search.log_plots=true")
    setup = prepare_search(cfg)
    assert {"parallel.tp", "parallel.pp", "parallel.recompute"} <= set(setup.space.distributions)
    out = run_search(setup)
    table = pl.read_parquet(out.table_path)
    assert table.height == 12 and sorted(table["trial_number"]) == list(range(12))
    feasible = table.filter(pl.col("feasible"))
    assert feasible.height >= 1
    assert out.best[0].values[0] == pytest.approx(feasible["iteration_time_s"].min())
    assert table.filter(~pl.col("feasible"))["reason"].str.len_chars().min() > 0  # type: ignore[operator]
    names = {p.name for p in out.plots}
    assert {"optuna.html", "optimization_history.png", "slice.png"} <= names
    assert out.table_path.parent == tmp_path / setup.study_name


def test_derived_dp_and_bad_values_are_infeasible_trials(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path, "search.sampler=random", "search.n_trials=24")
    setup = prepare_search(
        cfg,
        extra_space={"system.num_gpus": "choice(6,8)", "parallel.tp": "choice(1,2,4)",
                     "parallel.recompute": "choice(none,bogus)"},
        extra_derived={"parallel.dp": "system.num_gpus / (parallel.tp * parallel.pp)"})
    out = run_search(setup)
    table = pl.read_parquet(out.table_path)
    assert table.height == 24
    reasons = table.filter(~pl.col("feasible"))["reason"].to_list()
    assert any("not integral" in r for r in reasons)  # 6 GPUs / tp 4
    assert any("recompute" in r for r in reasons)  # 'bogus' breaks a spec rule
    trials = setup.study.trials
    assert all(t.state == optuna.trial.TrialState.COMPLETE for t in trials)
    for t in trials:  # infeasible trials carry a violated constraint, feasible ones none
        assert (max(t.user_attrs["constraints"]) > 0) != t.user_attrs["feasible"]


def test_multi_objective_front_is_non_dominated(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path, "search.sampler=nsga2", "search.population_size=8",
               "search.n_trials=16", "search.objectives=[iteration_time_s,capex_usd]")
    setup = prepare_search(cfg, extra_space={
        "system.scaleout.bandwidth_GBps": "tag(log, interval(5, 200))",
        "system.num_gpus": "choice(8,16)"})
    out = run_search(setup)
    front = np.array([t.values for t in out.best])
    assert len(front) >= 1 and pareto_mask(front).all()
    feasible = np.array([t.values for t in setup.study.trials if t.user_attrs["feasible"]])
    for point in feasible:  # nothing feasible dominates a front member
        assert not np.any(np.all(point <= front, axis=1) & np.any(point < front, axis=1))


def test_resume_and_name_clash(tmp_path: Path) -> None:
    run_search(prepare_search(_cfg(tmp_path, "search.study_name=s1", "search.n_trials=5")))
    with pytest.raises(InputError, match="search.resume=true"):
        prepare_search(_cfg(tmp_path, "search.study_name=s1"))
    setup = prepare_search(_cfg(tmp_path, "search.study_name=s1", "search.resume=true",
                                "search.n_trials=9"))
    out = run_search(setup)
    assert out.stats.n_evaluated == 4
    assert sorted(pl.read_parquet(out.table_path)["trial_number"]) == list(range(9))


def test_bad_search_config_fails_before_work(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="search.objectives"):
        prepare_search(_cfg(tmp_path, "search.objectives=[speed]"))
    with pytest.raises(InputError, match="search.sampler"):
        prepare_search(_cfg(tmp_path, "search.sampler=cmaes",
                            "search.objectives=[iteration_time_s,capex_usd]"))
    with pytest.raises(InputError, match=r"search\.space\.parallel\.tp"):
        prepare_search(_cfg(tmp_path), extra_space={"parallel.tp": "interval(4,1)"})
    with pytest.raises(InputError, match=r"search\.cost\.pue"):
        prepare_search(_cfg(tmp_path, "search.cost.pue=0.5"))
    assert not any(tmp_path.iterdir())  # nothing was created: a fixed rerun starts clean


def test_a_scaleout_key_beside_scaleout_dims_is_refused_before_any_trial(tmp_path: Path) -> None:
    """With scale-out dims the scale-out fabric is their fold, which replaces any value set
    under system.scaleout: searching one would change nothing, so the study refuses it."""
    dims = ("+system.scaleout_dims=[{kind:Ring,size:2,bandwidth_GBps:100,latency_ns:500},"
            "{kind:Switch,size:4,bandwidth_GBps:50,latency_ns:1000}]")
    cfg = _cfg(tmp_path, "system.num_gpus=64", "parallel.global_batch=64", dims)
    with pytest.raises(InputError, match=r"search\.space\.system\.scaleout\.bandwidth_GBps"):
        prepare_search(cfg, extra_space={"system.scaleout.bandwidth_GBps": "interval(25,400)"})
    assert not list(tmp_path.iterdir())  # no study was opened
    setup = prepare_search(cfg, extra_space={"system.scaleout_dims.0.bandwidth_GBps":
                                             "choice(100,200)"})
    table = pl.read_parquet(run_search(setup).table_path)
    assert table["feasible"].all(), table["reason"].to_list()  # composed, then built
    assert table["system.scaleout_dims.0.bandwidth_GBps"].n_unique() == 2  # both drawn
    folds = {spec[2].scaleout.bandwidth_GBps for spec in setup.evaluator._built.values()
             if not isinstance(spec, str)}
    assert folds == {150, 250}  # each trial's dims folded: 100 + 50 and 200 + 50 GB/s


@pytest.mark.parametrize(("system", "key"), [
    ("system=mixed_h100_a100", "system.pools.7.count"),
    ("+system.scaleout_dims=[{kind:Ring,size:2,bandwidth_GBps:100,latency_ns:500},"
     "{kind:Switch,size:4,bandwidth_GBps:50,latency_ns:1000}]", "system.scaleout_dims.5.bandwidth_GBps"),
])
def test_a_list_element_the_config_lacks_is_refused_before_any_trial(tmp_path: Path, system: str,
                                                                      key: str) -> None:
    """Pool sizes and scale-out dims are applied to the config per trial: an element index
    past the config's list was an OmegaConf error raised out of the running study."""
    cfg = _cfg(tmp_path, "system.num_gpus=64", "parallel.global_batch=64", system)
    with pytest.raises(InputError, match=rf"search\.space\.{key.replace('.', '[.]')}=.*has 2 "
                                         r"element\(s\) here, so no element"):
        prepare_search(cfg, extra_space={key: "choice(8,16)"})
    assert not list(tmp_path.iterdir())  # no study was opened


def test_default_space_runs_uneven_pipelines_of_llama3_405b(tmp_path: Path) -> None:
    """126 layers divide by no power of two above 2: the default space still searches pp 4-64
    (uneven splits) and the balanced split, so the 405B model finds plans that fit 80 GB;
    with pp limited to divisors of the layers (1 or 2) no trial was feasible (invalid batch
    splits or out of memory)."""
    with initialize_config_dir(config_dir=str(CONF), version_base=None):
        cfg = compose("config", overrides=[
            "workload=llama3_405b", "system=dgx_h100_80g", "system.num_gpus=8192",
            "parallel.global_batch=2048", f"search.output_dir={tmp_path}", "search.n_trials=48",
            "search.batch_size=16", "search.sampler=random", "search.log_plots=false",
            "search.in_process=true", "tracking.enabled=false"])
    setup = prepare_search(cfg)
    pp = setup.space.distributions["parallel.pp"]
    assert {16, 64} <= set(pp.choices)  # type: ignore[attr-defined]
    assert set(setup.space.distributions["parallel.layer_split"].choices  # type: ignore[attr-defined]
               ) == {"even", "balanced"}
    table = pl.read_parquet(run_search(setup).table_path)
    fits = table.filter(pl.col("feasible"))
    assert fits.height >= 1
    assert (fits["parallel.pp"] > 2).all()  # nothing at pp 1 or 2 fits 405B in 80 GB
