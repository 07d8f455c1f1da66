"""Optuna study set-up: storage, sampler, constraints and resume.

* Storage: a local journal file (append-only, so a killed driver never corrupts it; written once
  per batch through :class:`~search.study.journal.BufferedJournalFileBackend`; or per
  operation under Optuna's file lock with ``journal_shared``, for several drivers on one host)
  or SQLite file under ``search.output_dir`` beside the results table, or any RDB URL when
  several drivers on several hosts share a study. Shared drivers join the study in any order;
  the budget is checked before each ask, so it may be overshot by up to (drivers - 1) x
  ``batch_size`` trials.
* Samplers: Optuna's own (TPE with ``constant_liar=True`` so a batch of concurrently asked
  trials spreads out instead of piling on one point; CMA-ES; random; grid; QMC; NSGA-II/III).
  ``auto`` = TPE (single and multi-objective; it honours constraints and batching).
* Constraints: every trial sets named constraint values with ``Trial.set_constraint`` (Optuna
  5's replacement of ``constraints_func``; <= 0 feasible, e.g. peak memory minus HBM capacity)
  before it is told; the samplers that support constraints (TPE, NSGA-II/III) read them, so
  infeasible points teach the sampler (Deb et al. 2002, constrained domination, for NSGA-II).
  :func:`constraints_of` reads them back from a finished trial.
* Seeds: a driver's sampler is seeded from ``search.seed`` and the number of the first trial it
  creates (:func:`driver_seed`): a lone driver's first trial is numbered after the trials the
  study holds (0 for a fresh study: the seed itself), and drivers that share a study never get
  the same number, so they do not draw the same start-up points.
* Resume: ``search.resume=true`` loads the study by name. Trials a killed driver left RUNNING
  are found by :func:`stale_trials` and re-run under their own trial number (so nothing is lost
  and nothing is run twice); with a shared RDB only trials older than ``stale_after_s`` count
  as abandoned.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import optuna
from optuna.samplers import BaseSampler
from optuna.storages import BaseStorage, JournalStorage, RDBStorage
from optuna.study import StudyDirection
from optuna.trial import FrozenTrial, TrialState

from search.study.journal import BufferedJournalFileBackend, InterruptSafeJournalFileBackend
from search.study.space import SearchSpace
from simcore.errors import InputError

__all__ = [
    "SAMPLERS",
    "constraints_of",
    "driver_seed",
    "flush_storage",
    "is_shared",
    "make_sampler",
    "make_storage",
    "open_study",
    "stale_trials",
]

SAMPLERS = ("auto", "tpe", "cmaes", "random", "grid", "qmc", "nsga2", "nsga3")
_MULTI_OK = {"auto", "tpe", "random", "grid", "qmc", "nsga2", "nsga3"}
_LOCAL_KINDS = {"journal", "sqlite"}  # one driver; journal_shared and RDB URLs: several
_DEFAULT_STALE_S = 600.0


def constraints_of(trial: FrozenTrial) -> Sequence[float]:
    """The constraint values the driver stored on ``trial`` (<= 0 = satisfied)."""
    return list(trial.user_attrs.get("constraints", [1.0]))


class _AskTellGridSampler(optuna.samplers.GridSampler):
    """GridSampler whose exhaustion check does not call ``Study.stop`` (only legal inside
    ``Study.optimize``); the driver caps ``n_trials`` at the grid size instead."""

    def after_trial(self, study: optuna.Study, trial: FrozenTrial, state: TrialState,
                    values: Sequence[float] | None) -> None:
        return None


def make_storage(kind: str, output_dir: Path, study_name: str) -> BaseStorage:
    """``journal`` / ``sqlite`` (files under ``output_dir``) or an RDB URL."""
    if kind in ("journal", "journal_shared"):
        output_dir.mkdir(parents=True, exist_ok=True)
        path = str(output_dir / f"{study_name}.journal")
        if kind == "journal":
            return JournalStorage(BufferedJournalFileBackend(path))
        return JournalStorage(InterruptSafeJournalFileBackend(path))
    if kind == "sqlite":
        output_dir.mkdir(parents=True, exist_ok=True)
        return RDBStorage(f"sqlite:///{(output_dir / 'optuna.db').resolve()}")
    if "://" in kind:
        try:
            return RDBStorage(kind)
        except ImportError:
            raise InputError("search.storage", kind.split("@")[-1] if "@" in kind else kind,
                             "needs its database driver installed (psycopg2 for postgresql, "
                             "pymysql or mysqlclient for mysql)") from None
        except Exception as err:  # noqa: BLE001 - SQLAlchemy / Optuna raise many kinds
            raise InputError("search.storage", kind.split("@")[-1], f"cannot open ({type(err).__name__}: "
                             f"{str(err).splitlines()[0][:200] if str(err) else ''})") from None
    raise InputError("search.storage", kind,
                     "must be journal, journal_shared, sqlite or an RDB URL")


def flush_storage(study: optuna.Study) -> None:
    """Write a buffered journal's pending operations (no-op for other storages)."""
    backend = getattr(study._storage, "_backend", None)
    if isinstance(backend, BufferedJournalFileBackend):
        backend.flush()


def make_sampler(
    name: str,
    *,
    seed: int | None,
    space: SearchSpace,
    multi_objective: bool,
    n_startup_trials: int = 10,
    population_size: int = 32,
) -> BaseSampler:
    """One of :data:`SAMPLERS`, constrained where Optuna supports it."""
    if name not in SAMPLERS:
        raise InputError("search.sampler", name, f"must be one of {', '.join(SAMPLERS)}")
    if multi_objective and name not in _MULTI_OK:
        raise InputError("search.sampler", name, "single-objective only; use tpe or nsga2/nsga3")
    samplers = optuna.samplers
    if name in ("auto", "tpe"):
        return samplers.TPESampler(
            seed=seed, n_startup_trials=n_startup_trials, multivariate=True, constant_liar=True)
    if name == "cmaes":
        fallback = samplers.TPESampler(seed=seed, constant_liar=True)
        return samplers.CmaEsSampler(
            seed=seed, n_startup_trials=n_startup_trials, independent_sampler=fallback,
            warn_independent_sampling=False,
        )
    if name == "random":
        return samplers.RandomSampler(seed=seed)
    if name == "grid":
        return _AskTellGridSampler(space.grid(), seed=seed)
    if name == "qmc":
        return samplers.QMCSampler(seed=seed, warn_independent_sampling=False)
    if name == "nsga2":
        return samplers.NSGAIISampler(seed=seed, population_size=population_size)
    return samplers.NSGAIIISampler(seed=seed, population_size=population_size)


def driver_seed(seed: int | None, first_trial: int) -> int | None:
    """The sampler seed of a driver whose first new trial is number ``first_trial``: ``seed``
    itself for the first trial of a study (a fresh study with the same seed proposes the same
    trials), otherwise a seed derived from both (numpy's ``SeedSequence``). A resumed study's
    first new trial is numbered after the trials it holds, so it continues with fresh proposals
    instead of replaying the random sequence its first run drew, and two resumes of the same
    stored study still propose the same trials. Drivers sharing a study never get the same
    trial number (the storage numbers trials one by one), so their seeds differ and they draw
    different start-up points. None (unseeded) stays None."""
    if seed is None or first_trial == 0:
        return seed
    import numpy as np

    return int(np.random.SeedSequence([seed & 0xFFFFFFFF, first_trial]).generate_state(1)[0])


def open_study(
    *,
    study_name: str,
    storage: BaseStorage,
    sampler: BaseSampler,
    directions: Sequence[str],
    resume: bool,
    shared: bool = False,
    metadata: dict[str, Any] | None = None,
) -> optuna.Study:
    """Create the study, or load it when ``resume`` or ``shared`` (directions must match).

    ``shared`` (an RDB URL: several drivers on one study) joins an existing study or creates it,
    so drivers may start in any order; a local file study must be resumed explicitly.
    """
    wanted = [StudyDirection.MAXIMIZE if d == "maximize" else StudyDirection.MINIMIZE
              for d in directions]
    existing = {s.study_name for s in optuna.get_all_study_summaries(storage)}
    if study_name in existing and not (resume or shared):
        raise InputError("search.study_name", study_name,
                         "exists in the storage; set search.resume=true or pick another name")
    if study_name not in existing and resume and not shared:
        raise InputError("search.study_name", study_name, "nothing to resume in the storage")
    study = optuna.create_study(study_name=study_name, storage=storage, sampler=sampler,
                                directions=wanted, load_if_exists=True)
    if study_name in existing:
        _check_same_study(study, metadata or {})
    if list(study.directions) != wanted:
        raise InputError("search.objectives", list(directions),
                         "differ from the directions of the stored study")
    if study_name in existing:
        return study
    for key, value in (metadata or {}).items():
        study.set_user_attr(key, value)
    flush_storage(study)  # the study exists on disk before any trial
    return study


def _check_same_study(study: optuna.Study, metadata: dict[str, Any]) -> None:
    """Refuse to continue a stored study with other objectives, another space or other derived
    values than it was created with (its ``objectives`` / ``space`` / ``derived`` user attrs,
    when it has them): its trials would not answer the same question, and Optuna refuses a
    dimension whose kind changed only mid-study (or accepts a new one, missing from every
    stored trial)."""
    stored = study.user_attrs
    rename = "; resume it as it was, or start another study (search.study_name)"
    if "objectives" in stored and "objectives" in metadata \
            and list(stored["objectives"]) != list(metadata["objectives"]):
        raise InputError("search.objectives", list(metadata["objectives"]),
                         f"the stored study optimizes {list(stored['objectives'])}{rename}")
    for attr, where in (("space", "search.space."), ("derived", "search.derived.")):
        if attr not in stored or attr not in metadata:
            continue
        old, new = dict(stored[attr]), dict(metadata[attr])
        for key in [*new, *(k for k in old if k not in new)]:
            if key not in old:
                raise InputError(where + key, new[key], f"not in the {attr} of the stored "
                                 f"study (a resumed study keeps its {attr}){rename}")
            if key not in new:
                raise InputError(where + key, None, f"in the {attr} of the stored study as "
                                 f"{old[key]} but not in this one{rename}")
            if old[key] != new[key]:
                raise InputError(where + key, new[key], f"the stored study has {old[key]} "
                                 f"(a resumed study keeps its {attr}){rename}")


def stale_trials(
    study: optuna.Study, *, stale_after_s: float, now: _dt.datetime | None = None
) -> list[FrozenTrial]:
    """Trials left RUNNING by a driver that died, started more than ``stale_after_s`` ago."""
    now = now or _dt.datetime.now()
    stale = []
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        started = trial.datetime_start or now
        if (now - started).total_seconds() >= stale_after_s:
            stale.append(trial)
    return stale


def is_shared(storage_kind: str) -> bool:
    """``journal_shared`` and RDB URLs are studies several drivers share; ``journal`` and
    ``sqlite`` files have one driver."""
    return storage_kind not in _LOCAL_KINDS


def default_stale_after_s(storage_kind: str) -> float:
    """Local files have one driver (a RUNNING trial on resume is abandoned); RDB URLs many."""
    return 0.0 if storage_kind in _LOCAL_KINDS else _DEFAULT_STALE_S
