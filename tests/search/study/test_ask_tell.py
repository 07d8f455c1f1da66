"""Batched ask/tell on real Optuna storages: budgets, constraints, recovery of abandoned trials."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import optuna
import pytest
from optuna.trial import TrialState

from search.study.ask_tell import TrialOutcome, run_batches, suggest
from search.study.space import parse_space
from search.study.storage import (
    flush_storage,
    make_sampler,
    make_storage,
    open_study,
    stale_trials,
)

optuna.logging.set_verbosity(optuna.logging.WARNING)

SPACE = parse_space({"x": "int_interval(0,20)", "y": "choice(1,2,3,4)", "z": "interval(0,1)"})


def evaluate(points: list[dict[str, Any]]) -> list[TrialOutcome]:
    """A real test function: (x-7)^2 + y + z, 'out of memory' when x*y > 40."""
    out = []
    for p in points:
        value = (p["x"] - 7) ** 2 + p["y"] + p["z"]
        over = p["x"] * p["y"] - 40
        feasible = over <= 0
        out.append(TrialOutcome([float(value)], [float(over), 0.0], {"value": value},
                                feasible, "" if feasible else "oom"))
    return out


def _study(tmp_path: Path, name: str = "s", resume: bool = False, sampler: str = "tpe") -> optuna.Study:
    storage = make_storage("journal", tmp_path, name)
    smp = make_sampler(sampler, seed=1, space=SPACE, multi_objective=False, n_startup_trials=5)
    return open_study(study_name=name, storage=storage, sampler=smp,
                      directions=["minimize"], resume=resume)


@pytest.mark.parametrize("sampler", ["tpe", "cmaes", "random", "qmc"])
def test_batches_fill_budget_and_store_constraints(tmp_path: Path, sampler: str) -> None:
    study = _study(tmp_path, sampler=sampler)
    seen: list[int] = []
    stats = run_batches(study, SPACE, evaluate, n_trials=23, batch_size=5,
                        on_batch=lambda trials: seen.extend(t.number for t in trials))
    trials = study.get_trials()
    assert len(trials) == 23 and all(t.state == TrialState.COMPLETE for t in trials)
    assert stats.batches == [5, 5, 5, 5, 3]
    assert sorted(seen) == list(range(23))
    for t in trials:
        assert t.user_attrs["feasible"] == (t.user_attrs["constraints"][0] <= 0)
    assert stats.sampler_s > 0 and stats.evaluate_s > 0


def test_tpe_constraints_reach_feasible_optimum(tmp_path: Path) -> None:
    study = _study(tmp_path)
    run_batches(study, SPACE, evaluate, n_trials=60, batch_size=4)
    feasible = [t for t in study.trials if t.user_attrs["feasible"]]
    best = min(t.value for t in feasible if t.value is not None)
    assert best < 2.5  # optimum 1.0 at x=7, y=1, z=0; a random point averages ~50
    assert any(not t.user_attrs["feasible"] for t in study.trials)  # the region was explored


def test_resume_continues_to_budget_without_repeats(tmp_path: Path) -> None:
    run_batches(_study(tmp_path), SPACE, evaluate, n_trials=10, batch_size=3)
    study = _study(tmp_path, resume=True)
    stats = run_batches(study, SPACE, evaluate, n_trials=25, batch_size=3)
    assert stats.n_evaluated == 15
    assert [t.number for t in study.trials] == list(range(25))
    with pytest.raises(Exception, match="exists"):
        _study(tmp_path)


def test_abandoned_running_trials_rerun_under_own_number(tmp_path: Path) -> None:
    study = _study(tmp_path)
    run_batches(study, SPACE, evaluate, n_trials=4, batch_size=2)
    for _ in range(3):  # a driver asked a batch and died before telling it
        suggest(study.ask(), SPACE)
    study.ask()  # ... and one more it died while sampling (no params)
    flush_storage(study)  # what run_batches does after asking a batch
    resumed = _study(tmp_path, resume=True)
    stale = stale_trials(resumed, stale_after_s=0.0)
    assert [t.number for t in stale] == [4, 5, 6, 7]
    stats = run_batches(resumed, SPACE, evaluate, n_trials=10, batch_size=4, stale=stale)
    assert stats.n_recovered == 3
    states = {t.number: t.state for t in resumed.trials}
    assert all(states[n] == TrialState.COMPLETE for n in (4, 5, 6))
    assert states[7] == TrialState.FAIL
    assert sum(s == TrialState.COMPLETE for s in states.values()) == 10


def test_buffered_journal_writes_once_per_flush(tmp_path: Path) -> None:
    study = _study(tmp_path)
    path = tmp_path / "s.journal"
    size = path.stat().st_size
    trial = study.ask()
    suggest(trial, SPACE)
    assert path.stat().st_size == size  # buffered: nothing written yet ...
    assert study.trials[0].params == trial.params  # ... but the storage sees its own writes
    flush_storage(study)
    assert path.stat().st_size > size
    other = optuna.load_study(study_name="s", storage=make_storage("journal", tmp_path, "s"))
    assert other.trials[0].params == trial.params


def test_sqlite_storage_and_grid(tmp_path: Path) -> None:
    space = parse_space({"a": "choice(1,2,3)", "b": "range(0,2,1)"})
    storage = make_storage("sqlite", tmp_path, "g")
    sampler = make_sampler("grid", seed=0, space=space, multi_objective=False)
    study = open_study(study_name="g", storage=storage, sampler=sampler,
                       directions=["minimize"], resume=False)

    def ev(points: list[dict[str, Any]]) -> list[TrialOutcome]:
        return [TrialOutcome([p["a"] * 10.0 + p["b"]], [0.0, 0.0], {}, True) for p in points]

    run_batches(study, space, ev, n_trials=6, batch_size=4)
    assert sorted((t.params["a"], t.params["b"]) for t in study.trials) == [
        (a, b) for a in (1, 2, 3) for b in range(2)]
    assert (tmp_path / "optuna.db").exists()


def test_timeout_stops_asking_new_batches(tmp_path: Path) -> None:
    study = _study(tmp_path)
    slow_calls: list[int] = []

    def slow(points: list[dict[str, Any]]) -> list[TrialOutcome]:
        slow_calls.append(len(points))
        import time

        time.sleep(0.3)
        return evaluate(points)

    stats = run_batches(study, SPACE, slow, n_trials=100, batch_size=4, timeout_s=0.5)
    assert 1 <= len(slow_calls) <= 3 and stats.n_evaluated == 4 * len(slow_calls)
    assert len(study.trials) == stats.n_evaluated  # nothing asked and left behind


@pytest.mark.parametrize("error", [RuntimeError, KeyboardInterrupt])
def test_a_failing_batch_leaves_no_running_trial(tmp_path: Path, error: type[BaseException]) -> None:
    """An evaluation that raises tells its batch FAIL (they left the journal RUNNING, and a
    corrected rerun found them); an interrupt keeps them RUNNING, for resume to re-run."""
    calls = []

    def failing(points: list[dict[str, Any]]) -> list[TrialOutcome]:
        calls.append(len(points))
        if len(calls) == 2:
            raise error("evaluation failed")
        return evaluate(points)

    study = _study(tmp_path)
    with pytest.raises(error):
        run_batches(study, SPACE, failing, n_trials=12, batch_size=4)
    stored = _study(tmp_path, resume=True).get_trials()  # read back from the journal file
    states = [t.state for t in stored]
    assert states[:4] == [TrialState.COMPLETE] * 4
    expected = TrialState.RUNNING if error is KeyboardInterrupt else TrialState.FAIL
    assert states[4:] == [expected] * 4
