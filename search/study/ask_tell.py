"""Batched ask/tell: ask a batch of trials, evaluate them together, tell them, log them.

The loop drives Optuna's ask-and-tell interface itself (Optuna docs, "Ask-and-Tell Interface"):
``batch_size`` trials are asked at once (with TPE's constant liar the pending ones repel each
other), suggested from the :class:`~search.search_space.SearchSpace`, handed to ``evaluate`` as
one list (the caller groups them by graph structure and runs them on the actor pool), and told
with their objective values and constraint values. A trial that cannot run (indivisible
parallelization, out of memory) is told COMPLETE with constraint violations > 0 and penalty
values, so it teaches the sampler and never crashes the study. A trial whose config cannot be
built (a derived expression with no value at its sample: :class:`~search.study.space.
DerivedValueError`) has no objective to tell: it is told FAIL, as Optuna records a trial whose
objective raised, with the reason as a user attribute and a one-line warning, and the study goes
on; only when every one of a driver's first trials fails so (:func:`_check_not_all_failed`) does
the search stop, naming the derived key, the value and the rule. An error of the driver itself
(an evaluation that raises) tells the batch's untold trials FAIL before it propagates, so no
trial is left RUNNING. The budget counts trials that are not FAILED; trials a killed driver left RUNNING are re-evaluated under their own number.
Time spent in the sampler (ask + suggest + tell), in evaluation and in ``on_batch`` (logging) is
measured for the overhead report of ``scripts/bench_search.py``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import optuna
from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)
from optuna.samplers import BaseSampler
from optuna.trial import FrozenTrial, TrialState

from search.study.space import SearchSpace
from search.study.storage import flush_storage
from simcore.errors import InputError

__all__ = ["CONSTRAINT_NAMES", "LoopStats", "TrialOutcome", "failed_outcome", "run_batches",
           "suggest"]

#: named constraints of every trial (<= 0 satisfied), in :attr:`TrialOutcome.constraints` order
CONSTRAINT_NAMES = ("memory_over_gib", "invalid")
#: a driver whose first trials all fail to build stops once it has tried this many, or its
#: whole first batch if that is larger (one unlucky small batch does not stop a search)
FAILED_START_STOPS = 8
_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrialOutcome:
    """What the evaluation of one trial produced."""

    values: list[float]
    constraints: list[float]
    metrics: dict[str, Any]
    feasible: bool
    reason: str = ""
    #: why the trial's config could not be built (the trial is told FAIL); None: it was built
    failure: InputError | None = None


def failed_outcome(error: InputError, params: dict[str, Any]) -> TrialOutcome:
    """The outcome of a trial whose config cannot be built: ``error`` (naming the key, the
    value and the rule) with the trial's sampled values appended."""
    sampled = ", ".join(f"{k}={v}" for k, v in params.items())
    failure = InputError(error.key, error.value, f"{error.rule} at {sampled}")
    return TrialOutcome([], [], {}, False, str(failure), failure)


Evaluate = Callable[[list[dict[str, Any]]], list[TrialOutcome]]
OnBatch = Callable[[list[FrozenTrial]], None]
#: the sampler of a driver whose first new trial has this number
SamplerFor = Callable[[int], BaseSampler]


@dataclass
class LoopStats:
    """Wall time split of a search, seconds, and trial counts."""

    sampler_s: float = 0.0
    evaluate_s: float = 0.0
    logging_s: float = 0.0
    total_s: float = 0.0
    n_evaluated: int = 0
    n_recovered: int = 0
    n_infeasible: int = 0
    n_failed: int = 0
    batches: list[int] = field(default_factory=list)


def suggest(trial: optuna.Trial, space: SearchSpace) -> dict[str, Any]:
    """Sample every dimension of ``space`` on ``trial`` (define-by-run)."""
    params: dict[str, Any] = {}
    for key, dist in space.distributions.items():
        params[key] = _suggest_one(trial, key, dist)
    return params


def _suggest_one(trial: optuna.Trial, key: str, dist: BaseDistribution) -> Any:
    if isinstance(dist, CategoricalDistribution):
        return trial.suggest_categorical(key, dist.choices)
    if isinstance(dist, IntDistribution):
        return trial.suggest_int(key, dist.low, dist.high, step=dist.step, log=dist.log)
    if isinstance(dist, FloatDistribution):
        return trial.suggest_float(key, dist.low, dist.high, step=dist.step, log=dist.log)
    raise TypeError(f"unsupported distribution {dist!r}")


def _tell(study: optuna.Study, trial: optuna.Trial, outcome: TrialOutcome) -> None:
    if outcome.failure is not None:
        _tell_failed(study, trial, outcome)
        return
    for name, value in zip(CONSTRAINT_NAMES, outcome.constraints, strict=True):
        trial.set_constraint(name, value)
    trial.set_user_attr("constraints", list(outcome.constraints))
    trial.set_user_attr("feasible", bool(outcome.feasible))
    trial.set_user_attr("reason", outcome.reason)
    trial.set_user_attr("metrics", _jsonable(outcome.metrics))
    study.tell(trial, list(outcome.values), skip_if_finished=True)


def _tell_failed(study: optuna.Study, trial: optuna.Trial, outcome: TrialOutcome) -> None:
    """Tell a trial whose config could not be built FAIL, its reason a user attribute, and
    warn in one line."""
    trial.set_user_attr("feasible", False)
    trial.set_user_attr("reason", outcome.reason)
    study.tell(trial, state=TrialState.FAIL, skip_if_finished=True)
    _log.warning("trial #%d failed (its config cannot be built; the study goes on): %s",
                 trial.number, outcome.reason)


def _check_not_all_failed(stats: LoopStats, batch_size: int,
                          first: InputError | None) -> None:
    """Stop the search when every trial this driver asked failed to build and it asked at
    least :data:`FAILED_START_STOPS` (or one batch): the expression has no value anywhere the
    sampler looks, and failed trials do not count toward ``n_trials``, so the search would
    ask for ever. ``first``: the first failure, named in the error."""
    if first is None or stats.n_failed < stats.n_evaluated \
            or stats.n_evaluated < max(batch_size, FAILED_START_STOPS):
        return
    raise InputError(first.key, first.value, f"{first.rule}; every one of the {stats.n_failed} "
                     "trials this search asked failed so: no sampled point gives the expression "
                     "a value, the search stops (fix the expression or the space)")


def _jsonable(metrics: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in metrics.items():
        if hasattr(value, "item"):
            value = value.item()
        if isinstance(value, float) and value != value:  # NaN is not valid JSON in storages
            value = None
        out[key] = value
    return out


def _recover(study: optuna.Study, space: SearchSpace, stale: Sequence[FrozenTrial],
             evaluate: Evaluate, stats: LoopStats, on_batch: OnBatch | None,
             flush: Callable[[], None]) -> None:
    """Re-run trials a killed driver left RUNNING, under their own trial numbers."""
    complete = [t for t in stale if set(space.distributions) <= set(t.params)]
    for trial in stale:
        if trial not in complete:  # killed while sampling: no params to re-run; not counted
            study.tell(trial.number, state=TrialState.FAIL, skip_if_finished=True)
    flush()
    if not complete:
        return
    told = []
    with _failing(study, [optuna.Trial(study, t._trial_id) for t in complete], flush):
        outcomes = evaluate([dict(t.params) for t in complete])
        for frozen, outcome in zip(complete, outcomes, strict=True):
            _tell(study, optuna.Trial(study, frozen._trial_id), outcome)
            told.append(frozen.number)
        flush()
    stats.n_recovered += len(told)
    if on_batch is not None:
        on_batch(_by_number(study, told))


@contextmanager
def _failing(study: optuna.Study, trials: Sequence[optuna.Trial],
             flush: Callable[[], None]) -> Iterator[None]:
    """On an error (not an interrupt) inside the block, tell the ``trials`` not told yet FAIL
    and flush, then re-raise: the study keeps no RUNNING trial of a driver that failed (a
    RUNNING trial means a killed driver, which ``search.resume=true`` re-runs). A FAIL trial
    does not count toward ``n_trials``."""
    try:
        yield
    except Exception:
        for trial in trials:
            try:
                study.tell(trial, state=TrialState.FAIL, skip_if_finished=True)
            except Exception:  # noqa: BLE001, S112 - the first error is the one to report
                continue
        flush()
        raise


def _ask_first(study: optuna.Study, sampler_for: SamplerFor) -> optuna.Trial:
    """The driver's first new trial, its sampler set from the trial's number before the trial
    samples anything (a sampler may draw as the trial is made: the grid picks its point).

    The storage numbers the trials of a study one by one, so drivers that share a study never
    get the same first number, hence never the same seed; a lone driver's first number is the
    count of trials the study holds, so its run, and a resume of it, stay reproducible."""
    storage = study._storage
    trial_id = storage.create_new_trial(study._study_id)
    study.sampler = sampler_for(storage.get_trial_number_from_id(trial_id))
    return optuna.Trial(study, trial_id)


def _by_number(study: optuna.Study, numbers: Sequence[int]) -> list[FrozenTrial]:
    wanted = set(numbers)
    return [t for t in study.get_trials(deepcopy=False) if t.number in wanted]


def _counted(study: optuna.Study) -> int:
    states = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING, TrialState.WAITING)
    return len(study.get_trials(deepcopy=False, states=states))


def run_batches(
    study: optuna.Study,
    space: SearchSpace,
    evaluate: Evaluate,
    *,
    n_trials: int,
    batch_size: int,
    timeout_s: float | None = None,
    stale: Sequence[FrozenTrial] = (),
    on_batch: OnBatch | None = None,
    sampler_for: SamplerFor | None = None,
) -> LoopStats:
    """Run the study until it holds ``n_trials`` counted trials or ``timeout_s`` elapsed.

    A buffered journal is flushed after a batch is asked and after it is told, so a killed
    driver leaves the batch RUNNING with its parameters, or told. ``sampler_for``: the
    sampler to use from the driver's first new trial on, given that trial's number
    (:func:`_ask_first`); None keeps the study's sampler.
    """

    def flush() -> None:
        flush_storage(study)

    stats = LoopStats()
    first_failure: InputError | None = None
    start = time.perf_counter()
    if stale:
        _recover(study, space, stale, evaluate, stats, on_batch, flush)
    while (remaining := n_trials - _counted(study)) > 0:  # recounted: drivers may share a study
        if timeout_s is not None and time.perf_counter() - start >= timeout_s:
            break
        size = min(batch_size, remaining)
        t0 = time.perf_counter()
        trials: list[optuna.Trial] = []
        with _failing(study, trials, flush):
            if sampler_for is not None:
                trials.append(_ask_first(study, sampler_for))
                sampler_for = None
            trials += [study.ask() for _ in range(size - len(trials))]
            params = [suggest(trial, space) for trial in trials]
            flush()
            t1 = time.perf_counter()
            outcomes = evaluate(params)
            t2 = time.perf_counter()
            for trial, outcome in zip(trials, outcomes, strict=True):
                _tell(study, trial, outcome)
                stats.n_failed += outcome.failure is not None
                stats.n_infeasible += not outcome.feasible and outcome.failure is None
                first_failure = first_failure or outcome.failure
            flush()
            stats.n_evaluated += size
            _check_not_all_failed(stats, batch_size, first_failure)
        t3 = time.perf_counter()
        if on_batch is not None:
            on_batch(_by_number(study, [t.number for t in trials]))
        t4 = time.perf_counter()
        stats.sampler_s += (t1 - t0) + (t3 - t2)
        stats.evaluate_s += t2 - t1
        stats.logging_s += t4 - t3
        stats.batches.append(size)
    stats.total_s = time.perf_counter() - start
    return stats
