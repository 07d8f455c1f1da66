"""``simsweep search`` end to end: config -> study -> batched ask/tell on Ray -> table, MLflow.

Pipeline (DESIGN.md "User-facing contract"): the search section of the composed config gives
the space, objectives, sampler, budget and storage (:class:`SearchSetup`); the study is created
or resumed (:mod:`search.study.storage`); batches of trials are evaluated by the sweep's Ray
:class:`~search.run.workers.WorkerPool` (in-process when ``ray.num_workers=0``) through
:class:`~search.design_eval.DesignEvaluator`; each told batch is logged as MLflow child runs
(:mod:`search.tracking.study`); at the end the results table is rebuilt from the storage and the
plots, best-trial tags and summary metrics go to the parent run. The study storage is written
first, so an unreachable MLflow never loses a trial.
"""

from __future__ import annotations

import re
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import optuna
from omegaconf import DictConfig, OmegaConf

from search.config.build import check_not_folded
from search.run.batch import Runner, in_process_runner
from search.run.metrics import cost_spec_from
from search.study.ask_tell import LoopStats, SamplerFor, run_batches
from search.study.checks import check_space
from search.study.evaluate import DesignEvaluator
from search.study.groups import GroupComposer, group_keys
from search.study.objectives import Objective, resolve_objectives
from search.study.report import best_trials, write_plots, write_table
from search.study.space import SearchSpace, default_space, parse_space
from search.study.storage import (
    default_stale_after_s,
    driver_seed,
    is_shared,
    make_sampler,
    make_storage,
    open_study,
    stale_trials,
)
from simcore.errors import InputError
from simcore.limits import check_number

__all__ = ["SearchOutcome", "SearchSetup", "prepare_search", "run_search", "study_runner"]

_KEYS = {"study_name", "output_dir", "storage", "resume", "sampler", "seed", "n_trials",
         "timeout_s", "batch_size", "objectives", "train_tokens", "n_startup_trials",
         "population_size", "log_plots", "space", "derived", "cost", "stale_after_s",
         "in_process", "train_samples"}
_CONSTRAINED = {"auto", "tpe", "nsga2", "nsga3"}


@dataclass
class SearchSetup:
    """Everything a search needs, resolved from the config before any work."""

    cfg: DictConfig
    space: SearchSpace
    objectives: list[Objective]
    study: optuna.Study
    study_name: str
    output_dir: Path
    n_trials: int
    batch_size: int
    timeout_s: float | None
    stale_after_s: float
    evaluator: DesignEvaluator
    #: dimensions fixed by a command-line value, and that value
    fixed: dict[str, Any] = field(default_factory=dict)
    #: the sampler of this driver given the number of its first new trial (``driver_seed``)
    sampler_for: SamplerFor | None = None


@dataclass
class SearchOutcome:
    """What :func:`run_search` did."""

    stats: LoopStats
    best: list[optuna.trial.FrozenTrial]
    table_path: Path
    plots: list[Path]
    parent_run_id: str | None
    tracking_error: str


def _check_keys(search: Mapping[str, Any]) -> None:
    for key in search:
        if key not in _KEYS:
            raise InputError(f"search.{key}", search[key], f"unknown key; known: {sorted(_KEYS)}")


def _int(search: Mapping[str, Any], key: str, low: int) -> int:
    value = search.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        raise InputError(f"search.{key}", value, f"must be an integer >= {low}")
    return value


def _study_name(cfg: DictConfig, objectives: list[Objective], space: SearchSpace) -> str:
    name = cfg.search.get("study_name")
    if name:
        return str(name)

    def named(group: str, default: str) -> str:  # a searched group: its choices
        dist = space.distributions.get(group)
        choices = getattr(dist, "choices", None)
        return "+".join(map(str, choices)) if choices else cfg[group].get("name", default)
    parts = [named("workload", "model"), named("system", "system"),
             f"{cfg.system.get('num_gpus', 0)}gpu", "+".join(o.name for o in objectives)]
    return re.sub(r"[^A-Za-z0-9_.+-]", "_", "-".join(str(p) for p in parts))


def _plain_dict(node: Any) -> dict[str, Any]:
    data = OmegaConf.to_container(node, resolve=True) if node is not None else {}
    if not isinstance(data, dict):
        raise InputError("search.space", data, "must be a mapping of key: expression")
    return {str(k): v for k, v in data.items()}


def _space(cfg: DictConfig, extra_space: Mapping[str, str],
           extra_derived: Mapping[str, str]) -> SearchSpace:
    search = cfg.search
    space = _plain_dict(search.get("space"))
    derived = _plain_dict(search.get("derived"))
    space.update(extra_space)
    derived.update(extra_derived)
    groups = group_keys([k for k, v in space.items() if not isinstance(v, Mapping)])
    if all(k in groups for k in space):  # no value dimension: search the parallelization
        space = {**space, **default_space(
            _plain_dict(cfg.workload), num_gpus=int(cfg.system.num_gpus),
            gpus_per_node=int(cfg.system.gpus_per_node),
            global_batch=int(cfg.parallel.global_batch))}
    return parse_space(space, derived)


def _fix(space: SearchSpace, fixed_keys: Sequence[str],
         extra_space: Mapping[str, str]) -> tuple[SearchSpace, list[str]]:
    """``space`` without the dimensions the command line sets to one value (``key=50``), as a
    sweep fixes a key given on the command line: (the space left, the keys taken out). A key
    both searched and fixed on the command line, or a fix that leaves nothing to search, is
    refused. Derived values are kept: they replace the config's value in every trial (the
    command line's value is then the base that default spaces read, e.g. the global batch)."""
    taken: list[str] = []
    for key in dict.fromkeys(fixed_keys):
        if key in extra_space:
            raise InputError(key, extra_space[key], "is in search.space and set to one value "
                             "on the command line: keep one")
        if key in space.distributions:
            taken.append(key)
    if not taken:
        return space, []
    left = SearchSpace({k: v for k, v in space.distributions.items() if k not in taken},
                       dict(space.derived))
    if not left.distributions:
        raise InputError("search.space", ", ".join(taken), "every dimension is set to one value "
                         "on the command line: nothing left to search (drop a fixed value, or "
                         "use simsweep simulate)")
    return left, taken


def prepare_search(cfg: DictConfig, runner: Runner | None = None,
                   extra_space: Mapping[str, str] | None = None,
                   extra_derived: Mapping[str, str] | None = None,
                   groups: GroupComposer | None = None,
                   fixed_keys: Sequence[str] = ()) -> SearchSetup:
    """Validate the search config and open (or resume) the study; no trial runs yet.
    ``groups`` composes the configs of config-group dimensions (``system=choice(a,b)``,
    :mod:`search.study.groups`); without it a space may not hold one. ``fixed_keys``: the keys
    the command line sets to one value (already in ``cfg``); a dimension of one of them is
    taken out of the space (:attr:`SearchSetup.fixed`)."""
    search = cfg.search
    _check_keys(search)
    objectives = resolve_objectives(list(search.objectives))
    space, fixed = _fix(_space(cfg, extra_space or {}, extra_derived or {}), fixed_keys,
                        extra_space or {})
    has_dims = bool(OmegaConf.select(cfg, "system.scaleout_dims", default=None))
    for key, found in [*space.distributions.items(), *space.derived.items()]:
        check_not_folded(key, found, has_dims, "search.space.")
    searched_groups = group_keys(list(space.distributions))
    for key in searched_groups:
        if groups is None:
            raise InputError(f"search.space.{key}", space.distributions[key],
                             "a config-group dimension needs the config folder to compose "
                             "from (simsweep search)")
        groups.check(key, space.distributions[key])
    check_space(cfg, space, {key: [groups.config(((key, str(v)),)) for v in
                                   getattr(space.distributions[key], "choices", ())]
                             for key in searched_groups} if groups is not None else None)
    sampler_name = str(search.sampler)
    n_trials = _int(search, "n_trials", 1)
    if sampler_name == "grid":
        n_trials = min(n_trials, space.size() or n_trials)
    study_name = _study_name(cfg, objectives, space)
    output_dir = Path(str(search.output_dir)) / study_name
    storage_kind = str(search.storage)
    seed = search.get("seed")

    def sampler_for(first_trial: int) -> optuna.samplers.BaseSampler:
        """The sampler of a driver whose first new trial is ``first_trial`` (QMC keeps its
        scramble: the study holds its place in the sequence)."""
        return make_sampler(
            sampler_name, seed=driver_seed(seed, 0 if sampler_name == "qmc" else first_trial),
            space=space, multi_objective=len(objectives) > 1,
            n_startup_trials=_int(search, "n_startup_trials", 0),
            population_size=_int(search, "population_size", 2))
    sampler = sampler_for(0)
    cost = cost_spec_from(OmegaConf.to_container(search.cost, resolve=True))  # type: ignore[arg-type]
    batch_size = _int(search, "batch_size", 1)
    check_number("search.train_tokens", search.get("train_tokens"), lo=0, lo_open=True, hi=1e18)
    train_samples = search.get("train_samples")
    if train_samples is not None:
        check_number("search.train_samples", train_samples, lo=0, lo_open=True, hi=1e18)
    for key in ("timeout_s", "stale_after_s"):
        if search.get(key) is not None:
            check_number(f"search.{key}", search.get(key), lo=0, lo_open=True, hi=1e9)
    evaluator = DesignEvaluator(cfg, space, objectives, cost, float(search.train_tokens),
                                runner or in_process_runner,
                                penalize_infeasible=sampler_name not in _CONSTRAINED,
                                train_samples=None if train_samples is None else float(train_samples),
                                groups=groups if searched_groups else None)
    storage = make_storage(storage_kind, output_dir, study_name)  # after every check: no
    study = open_study(study_name=study_name, storage=storage, sampler=sampler,  # stray study
                       directions=[o.direction for o in objectives], resume=bool(search.resume),
                       shared=is_shared(storage_kind),
                       metadata={"objectives": [o.name for o in objectives],
                                 "space": {k: repr(v) for k, v in space.distributions.items()},
                                 "derived": dict(space.derived)})
    study.sampler = sampler_for(len(study.get_trials(deepcopy=False)))  # a resume: fresh
    # proposals, not the first run's replayed; run_batches sets it again from the number of
    # the driver's first new trial, which drivers sharing the study never have in common
    stale_s = search.get("stale_after_s")
    timeout = search.get("timeout_s")
    return SearchSetup(cfg, space, objectives, study, study_name, output_dir, n_trials,
                       batch_size, None if timeout is None else float(timeout),
                       default_stale_after_s(storage_kind) if stale_s is None else float(stale_s),
                       evaluator, {k: OmegaConf.select(cfg, k) for k in fixed}, sampler_for)


def run_search(setup: SearchSetup, tracking: Any | None = None,
               release: Callable[[], None] | None = None) -> SearchOutcome:
    """Run the batches, then write the table, plots and MLflow summary. ``release`` (e.g.
    shutting the Ray pool down) is called once the batches are done, while the plots are
    drawn on a thread."""
    study = setup.study
    stale = stale_trials(study, stale_after_s=setup.stale_after_s) if setup.cfg.search.resume else []
    on_batch = tracking.log_trials if tracking is not None else None
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*CmaEsSampler will not use.*")
        warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
        stats = run_batches(study, setup.space, setup.evaluator, n_trials=setup.n_trials,
                            batch_size=setup.batch_size, timeout_s=setup.timeout_s, stale=stale,
                            on_batch=on_batch, sampler_for=setup.sampler_for)
    table = setup.output_dir / "results.parquet"
    write_table(study, setup.objectives, table)
    plots: list[Path] = []
    if setup.cfg.search.get("log_plots", True):
        with ThreadPoolExecutor(1, thread_name_prefix="simsweep-plots") as drawer:
            drawing = drawer.submit(write_plots, study, setup.objectives,
                                    setup.output_dir / "plots")
            if release is not None:
                release()
            plots = drawing.result()
    elif release is not None:
        release()
    best = best_trials(study, setup.objectives)
    parent, error = None, ""
    if tracking is not None:
        t0 = time.perf_counter()
        parent, error = tracking.finish(study, setup.objectives, best, table, plots, stats)
        stats.logging_s += time.perf_counter() - t0  # draining the background logger included
        stats.total_s += time.perf_counter() - t0
    return SearchOutcome(stats, best, table, plots, parent, error)


@contextmanager
def study_runner(cfg: DictConfig) -> Iterator[Runner]:
    """The runner of a study: ``ray.num_workers`` Ray actors (:func:`search.run.workers.ray_pool`),
    or this process when ``search.in_process=true`` or the config has no ``ray`` group."""
    if cfg.search.get("in_process", False) or "ray" not in cfg:
        yield in_process_runner
        return
    from search.run.workers import pool_runner, ray_pool

    with ray_pool(cfg.ray) as pool:
        yield pool_runner(pool)
