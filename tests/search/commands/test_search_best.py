"""The end of ``simsweep search`` prints the best trials; a Pareto front longer than the
printed part says how many trials it leaves out and where they all are."""

from __future__ import annotations

from types import SimpleNamespace

import optuna

from search.commands.optimize import BEST_SHOWN, _print_best


def _front(n: int) -> list[optuna.trial.FrozenTrial]:
    return [optuna.trial.create_trial(values=[1.0 + i, 100.0 - i], params={"parallel.tp": 2},
                                      distributions={"parallel.tp": optuna.distributions
                                                     .CategoricalDistribution([1, 2])})
            for i in range(n)]


def _printed(capsys, n: int) -> str:
    setup = SimpleNamespace(objectives=[SimpleNamespace(name="iteration_time_s"),
                                        SimpleNamespace(name="capex_usd")])
    _print_best(setup, SimpleNamespace(best=_front(n)))
    return str(capsys.readouterr().out)


def test_a_long_front_says_how_many_trials_are_not_shown(capsys):
    text = _printed(capsys, BEST_SHOWN + 4)
    assert f"Pareto front ({BEST_SHOWN + 4} trials)" in text
    assert text.count("iteration_time_s=") == BEST_SHOWN
    assert "... and 4 more on the front, not shown" in text and "best_trials.json" in text


def test_a_front_that_fits_prints_every_trial_and_no_note(capsys):
    text = _printed(capsys, BEST_SHOWN)
    assert text.count("iteration_time_s=") == BEST_SHOWN and "more on the front" not in text
