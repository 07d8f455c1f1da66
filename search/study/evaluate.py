"""Trial parameters -> design points -> structure groups -> simulated batches -> outcomes.

One call evaluates a batch of trials (DESIGN.md, "The vectorized engine"):

1. the trial's config-group choices, if the space has any (``system=choice(a,b)``,
   :mod:`search.study.groups`), pick its base config (composed once per combination); derived
   values (``search.derived``) are computed from the trial's parameters and that base config;
   one that is not a positive whole number makes the trial infeasible, one with no value at
   the trial's sample (:class:`~search.study.space.DerivedValueError`) makes it a failed trial
   (its config cannot be built; :func:`search.study.ask_tell.failed_outcome`);
2. the structural part (every non-``system.*`` key: workload and parallelization, the device
   pool sizes ``system.pools.<i>.count``, whose sum the mixed presets' ``num_gpus`` follows, and
   the scale-out dims ``system.scaleout_dims.<i>.*``, list elements that fold into one fabric) is
   applied to the base config and built into specs once per distinct combination
   (``search.config.build``); ``parallel.work_shares.<i>`` (pool ``i``'s relative work) are
   gathered into ``parallel.work_shares`` (unnamed pools: 1.0), with ``parallel.work_split``
   ``explicit`` unless the trial searches the split (shares then apply to ``explicit`` only);
   the other ``system.*`` leaves are applied to the built SystemSpec field by field, and the
   parallelization is resolved against ``system.num_gpus`` (dp, batch divisibility); any
   :class:`~simcore.errors.InputError` on the way is the trial's infeasibility reason;
3. points are grouped by graph structure (``simcore.api.structure_key`` plus model and
   parallelization) into :class:`~search.run.batch.SpecBatch` es, one ``simulate_batch`` call
   each, run by ``runner`` (in process, or on the sweep's Ray pool:
   :func:`search.run.workers.pool_runner`);
4. metrics get cost, power and throughput (:func:`search.study.objectives.design_metrics`) and become
   objective values and constraints (:func:`search.study.objectives.outcome_of`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from omegaconf import DictConfig, OmegaConf, open_dict

from search.config.build import (
    build_specs,
    check_list_elements,
    gather_work_shares,
    plain_sections,
    sections_with,
    set_path,
)
from search.run.batch import Columns, Runner, SpecBatch, in_process_runner, systems_batch
from search.run.metrics import per_iteration
from search.study.ask_tell import TrialOutcome, failed_outcome
from search.study.groups import GroupChoice, GroupComposer, group_keys
from search.study.objectives import Objective, design_metrics, infeasible_outcome, outcome_of
from search.study.space import DerivedValueError, SearchSpace, evaluate_derived
from simcore.cost import ClusterCostSpec
from simcore.errors import InputError

__all__ = ["DesignEvaluator", "Runner", "in_process_runner"]

_MISSING = object()
_POOLS = "system.pools."  # pool sizes: composed (num_gpus follows them), not set on the spec
#: system keys applied to the config and built, not set on the spec: pool sizes, and the
#: scale-out dims (list elements, which the spec's scale-out fabric is the fold of)
_COMPOSED = (_POOLS, "system.scaleout_dims.")


@dataclass
class _Point:
    index: int
    model: Any = None
    parallel: Any = None
    system: Any = None
    reason: str = ""
    fidelity: str = "calibrated"
    #: a derived value with no value at this point: its config cannot be built
    failure: DerivedValueError | None = None


class DesignEvaluator:
    """Callable ``list[params] -> list[TrialOutcome]`` for :func:`search.ask_tell.run_batches`.

    Args:
        base_cfg: the composed config (workload, parallel, system, ...).
        space: the search space (for derived values).
        objectives: the study's objectives.
        cost: cost and power prices (``search.cost``).
        train_tokens: tokens of a full training run (time/cost to train).
        train_samples: samples of a full training run; when set, time/cost to train count
            samples (images, records) instead of tokens.
        runner: evaluates SpecBatches; :func:`in_process_runner` or the Ray pool.
        penalize_infeasible: tell penalty values for infeasible points (samplers without
            constraint support).
        groups: composes the base config of each combination of the space's config-group
            dimensions (None: the space has none; ``base_cfg`` serves every trial).
    """

    def __init__(self, base_cfg: DictConfig, space: SearchSpace, objectives: Sequence[Objective],
                 cost: ClusterCostSpec, train_tokens: float, runner: Runner,
                 penalize_infeasible: bool = False, train_samples: float | None = None,
                 groups: GroupComposer | None = None) -> None:
        self.base_cfg = base_cfg
        self.groups = groups
        self.group_keys = group_keys(list(space.distributions)) if groups is not None else []
        self.space = space
        self.objectives = list(objectives)
        self.cost = cost
        self.train_tokens = train_tokens
        self.train_samples = train_samples
        self.runner = runner
        self.penalize_infeasible = penalize_infeasible
        self._built: dict[tuple[GroupChoice, tuple[tuple[str, Any], ...]],
                          tuple[Any, Any, Any] | str] = {}
        self._done: dict[tuple[tuple[str, Any], ...], TrialOutcome] = {}
        self._base_sections: dict[GroupChoice, dict[str, Any] | bool] = {}  # False: interpolated
        for key, found in [*space.distributions.items(), *space.derived.items()]:
            if key.startswith(_COMPOSED):  # list elements of the config, set per trial
                check_list_elements(base_cfg, key, found, "search.space.")
        self.n_batches = 0
        self.n_simulated = 0  # distinct design points simulated (repeats come from a cache)

    def with_objectives(self, objectives: Sequence[Objective]) -> DesignEvaluator:
        """An evaluator for other objectives that reuses every point evaluated so far."""
        other = DesignEvaluator(self.base_cfg, self.space, objectives, self.cost,
                                self.train_tokens, self.runner, self.penalize_infeasible,
                                self.train_samples, self.groups)
        other._built = self._built
        other._done = {key: o if o.failure is not None else outcome_of(
            o.metrics, other.objectives, penalize_infeasible=self.penalize_infeasible)
            for key, o in self._done.items()}
        return other

    def _base(self, choice: GroupChoice) -> DictConfig:
        """The base config of a trial with group choices ``choice``."""
        return self.base_cfg if self.groups is None or not choice else self.groups.config(choice)

    def _lookup(self, params: Mapping[str, Any], cfg: DictConfig) -> Callable[[str], Any]:
        pools = [(k, v) for k, v in params.items() if k.startswith(_POOLS)]
        if pools:  # derived values see num_gpus of this trial's pool sizes
            cfg = cfg.copy()
            for key, value in pools:
                OmegaConf.update(cfg, key, value, merge=False)

        def get(key: str) -> Any:
            if key in params:
                return params[key]
            value = OmegaConf.select(cfg, key, default=_MISSING)
            if value is _MISSING:
                raise InputError("search.derived", key, "unknown config key")
            return value
        return get

    def _structural(self, choice: GroupChoice, items: tuple[tuple[str, Any], ...]
                    ) -> tuple[Any, Any, Any] | str:
        if (choice, items) not in self._built:
            try:
                sections = self._resolved_with(choice, items)
                if sections is not None:  # the same specs without copying the config tree
                    model, parallel, system = build_specs(sections)
                else:
                    cfg = self._base(choice).copy()
                    with open_dict(cfg):  # keys a preset leaves out (work_shares); specs check
                        for key, value in items:
                            value = list(value) if isinstance(value, tuple) else value
                            OmegaConf.update(cfg, key, value, merge=False)
                    model, parallel, system = build_specs(cfg)
                self._built[choice, items] = (model, parallel, system)
            except (InputError, ValueError) as err:
                self._built[choice, items] = f"invalid: {err}"
        return self._built[choice, items]

    def _resolved_with(self, choice: GroupChoice, items: tuple[tuple[str, Any], ...]
                       ) -> dict[str, Any] | None:
        """The spec config groups of the base config with ``items`` set, as plain dicts, when
        that equals resolving the updated config (:func:`search.config.build.sections_with`,
        opened for keys a preset leaves out, as the copied tree is); None otherwise (the caller
        copies and updates the tree)."""
        if choice not in self._base_sections:
            self._base_sections[choice] = plain_sections(self._base(choice)) or False
        base = self._base_sections[choice]
        if not isinstance(base, dict):
            return None
        return sections_with(base, items, create_missing=True)

    def _point(self, index: int, params: Mapping[str, Any]) -> _Point:
        choice: GroupChoice = ()
        values = dict(params)
        if self.groups is not None:
            choice, values = self.groups.split(self.group_keys, params)
        try:
            cfg = self._base(choice)
        except InputError as err:
            return _Point(index, reason=f"invalid: {err}")
        for key, expr in self.space.derived.items():
            try:
                value, reason = evaluate_derived(key, expr, self._lookup(values, cfg))
            except DerivedValueError as err:
                return _Point(index, failure=err)
            if value is None:
                return _Point(index, reason=f"invalid: {reason}")
            values[key] = value
        try:
            values = gather_work_shares(values, cfg)
        except InputError as err:
            return _Point(index, reason=f"invalid: {err}")
        structural = tuple(sorted((k, v) for k, v in values.items()
                                  if not k.startswith("system.") or k.startswith(_COMPOSED)))
        built = self._structural(choice, structural)
        if isinstance(built, str):
            return _Point(index, reason=built)
        model, parallel, system = built
        try:
            for key, value in values.items():
                if key.startswith("system.") and not key.startswith(_COMPOSED):
                    system = set_path(system, key.split(".")[1:], value, key, "system")
            if "parallel.dp" not in values and cfg.parallel.get("dp") is None:
                parallel = dataclasses.replace(parallel, dp=None)  # re-derive for num_gpus
            parallel = parallel.resolve(system.num_gpus)
        except (InputError, ValueError) as err:
            return _Point(index, reason=f"invalid: {err}")
        return _Point(index, model, parallel, system, fidelity=str(cfg.get("fidelity",
                                                                           "calibrated")))

    def _groups(self, points: list[_Point]) -> list[tuple[SpecBatch, list[_Point]]]:
        from simcore.api import structure_key

        groups: dict[str, list[_Point]] = {}
        for p in points:
            key = (f"{p.fidelity}|{p.model!r}|{p.parallel!r}|"
                   f"{structure_key(p.model, p.parallel, p.system)!r}")
            groups.setdefault(key, []).append(p)
        out = []
        for label, members in groups.items():
            self.n_batches += 1
            out.append((systems_batch(self.n_batches, label[-64:], members[0].model,
                                      members[0].parallel, [p.system for p in members],
                                      members[0].fidelity), members))
        return out

    def __call__(self, points: list[dict[str, Any]]) -> list[TrialOutcome]:
        """Evaluate one batch of trials; infeasible ones never raise.

        A point already evaluated (samplers repeat points of discrete spaces) is answered from
        a cache, so only distinct points are simulated (counted in ``n_simulated``).
        """
        keys = [tuple(sorted(p.items(), key=lambda kv: kv[0])) for p in points]
        outcomes: list[TrialOutcome | None] = [self._done.get(k) for k in keys]
        todo = {k: i for i, k in enumerate(keys) if outcomes[i] is None}
        built = [self._point(i, points[i]) for i in todo.values()]
        ok = [p for p in built if not p.reason and p.failure is None]
        self.n_simulated += len(built)
        for p in built:
            if p.failure is not None:
                outcomes[p.index] = failed_outcome(p.failure, points[p.index])
            elif p.reason:
                outcomes[p.index] = infeasible_outcome(p.reason, self.objectives)
        if ok:
            groups = self._groups(ok)
            results = self.runner([g for g, _ in groups])
            for (_, members), columns in zip(groups, results, strict=True):
                rows = _rows(columns, len(members))
                # every member shares the group's model and parallelization
                samples, tokens = per_iteration(members[0].model, members[0].parallel)
                metrics = design_metrics(rows, [p.system for p in members],
                                         [tokens] * len(members), self.cost, self.train_tokens,
                                         [samples] * len(members), self.train_samples)
                for p, row in zip(members, metrics, strict=True):
                    outcomes[p.index] = outcome_of(
                        row, self.objectives, penalize_infeasible=self.penalize_infeasible)
        for key, i in todo.items():
            self._done[key] = outcomes[i]  # type: ignore[assignment]
        for i, key in enumerate(keys):
            outcomes[i] = self._done[key]
        return [o for o in outcomes if o is not None]


def _rows(columns: Columns, n: int) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = [{} for _ in range(n)]
    for key, values in columns.items():
        listed = np.asarray(values).tolist()
        for j in range(n):
            rows[j][key] = listed[j]
    return rows
