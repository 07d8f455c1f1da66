"""Search quality against ground truth: enumerate a small space, then search it on a budget.

Method (used by ``scripts/bench_search.py`` and its smaller test):

1. every point of a discrete space is evaluated once through the same
   :class:`~search.design_eval.DesignEvaluator` the search uses (grouped by structure, one
   ``simulate_batch`` per group); the feasible optimum (one objective) or the feasible Pareto
   front (two objectives) is the truth;
2. a study with a given sampler and seed runs ``budget`` trials (e.g. 10% of the space) in
   batches; repeated points are answered from the evaluator's cache, so they cost no simulation;
3. single objective: the gap ``|best found - optimum| / |optimum|`` (feasible points only);
   two objectives: the hypervolume of the front found over that of the true front, both with
   objectives normalized to [0, 1] by the true front's ideal and the feasible set's nadir, and
   the reference point 1.1 x nadir (Zitzler & Thiele 1999; the common 10% margin).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import optuna
from optuna.study import StudyDirection

from search.study.ask_tell import LoopStats, run_batches
from search.study.evaluate import DesignEvaluator
from search.study.objectives import Objective
from search.study.pareto import hypervolume_2d, pareto_mask
from search.study.space import SearchSpace
from search.study.storage import make_sampler

__all__ = ["GroundTruth", "SearchScore", "enumerate_space", "score_search"]


@dataclass(frozen=True)
class GroundTruth:
    """Every point of the space with its (signed, minimized) objective values."""

    points: list[dict[str, Any]]
    values: np.ndarray  # (N, M), maximized objectives negated
    feasible: np.ndarray  # (N,) bool

    @property
    def best(self) -> float:
        """The feasible optimum of the first objective (minimized sign)."""
        return float(self.values[self.feasible, 0].min())

    @property
    def front(self) -> np.ndarray:
        """The feasible Pareto front, (F, M)."""
        feasible = self.values[self.feasible]
        return feasible[pareto_mask(feasible)]


@dataclass(frozen=True)
class SearchScore:
    """The outcome of one budgeted search."""

    sampler: str
    seed: int
    trials: int
    distinct: int
    gap: float  # single objective: relative gap to the optimum (inf: nothing feasible found)
    hv_ratio: float  # two objectives: hypervolume found / true (nan for one objective)
    stats: LoopStats


def _signs(objectives: Sequence[Objective]) -> np.ndarray:
    return np.array([1.0 if o.direction == "minimize" else -1.0 for o in objectives])


def enumerate_space(space: SearchSpace, evaluator: DesignEvaluator) -> GroundTruth:
    """Evaluate every point of a discrete ``space`` (fills the evaluator's cache)."""
    grid = space.grid()
    points = [dict(zip(grid, combo, strict=True)) for combo in itertools.product(*grid.values())]
    outcomes = evaluator(points)
    signs = _signs(evaluator.objectives)
    values = np.array([o.values for o in outcomes], dtype=np.float64) * signs
    feasible = np.array([o.feasible for o in outcomes], dtype=bool)
    return GroundTruth(points, values, feasible)


def _normalized_hv(front: np.ndarray, truth: GroundTruth) -> float:
    feasible = truth.values[truth.feasible]
    ideal, nadir = truth.front.min(axis=0), feasible.max(axis=0)
    scale = np.where(nadir > ideal, nadir - ideal, 1.0)
    ref = np.full(2, 1.1)
    return hypervolume_2d((front - ideal) / scale, ref)


def score_search(space: SearchSpace, evaluator: DesignEvaluator, truth: GroundTruth, *,
                 sampler: str, seed: int, budget: int, batch_size: int,
                 n_startup_trials: int = 10, population_size: int = 16) -> SearchScore:
    """Run one budgeted search on an in-memory study and score it against ``truth``."""
    objectives = evaluator.objectives
    multi = len(objectives) > 1
    study = optuna.create_study(
        directions=[StudyDirection.MAXIMIZE if o.direction == "maximize"
                    else StudyDirection.MINIMIZE for o in objectives],
        sampler=make_sampler(sampler, seed=seed, space=space, multi_objective=multi,
                             n_startup_trials=n_startup_trials, population_size=population_size))
    stats = run_batches(study, space, evaluator, n_trials=budget, batch_size=batch_size)
    found = [t for t in study.trials if t.user_attrs.get("feasible")]
    distinct = len({tuple(sorted(t.params.items())) for t in study.trials})
    signs = _signs(objectives)
    if not found:
        return SearchScore(sampler, seed, budget, distinct, math.inf, 0.0, stats)
    values = np.array([t.values for t in found], dtype=np.float64) * signs
    if not multi:
        best = float(values[:, 0].min())
        gap = abs(best - truth.best) / abs(truth.best)
        return SearchScore(sampler, seed, budget, distinct, gap, math.nan, stats)
    ratio = _normalized_hv(values, truth) / _normalized_hv(truth.front, truth)
    return SearchScore(sampler, seed, budget, distinct, math.nan, ratio, stats)

