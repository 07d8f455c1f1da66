"""Checks of a search space against the config before the study exists.

A dimension whose key names nothing in the config (``parallel.tpp``), a choice value of the
wrong type (``parallel.tp=choice(2,abc)``), an interval bound a system field refuses, a derived
value set on an unknown key (``search.derived.parallel.nosuch``) or read from one
(``system.num_gpu``) would otherwise surface trial by trial (every trial infeasible, a String
column in the table) or as an error after the study and its MLflow parent run were created.
They are refused here, as ``simsweep sweep`` refuses them, each naming the key and the rule:

* every value of a choice and both bounds of an interval are set in the key's config group
  (a plain copy) and checked against the group's schema (:func:`search.config.schema.
  validate_config`: unknown keys, types, enumerations, number rules); a key under a searched
  config group (``workload=choice(a,b)``) must pass in at least one of its options' configs;
* an interval bound of a ``system.*`` field is also set on the system spec built from the
  config (:func:`search.config.build.set_path`: the spec's own rules for that field), as a
  sweep checks its hardware axes; a choice value that breaks a spec rule stays an infeasible
  trial (it may hold beside other values of other dimensions);
* every derived value's key is checked as a dimension with a number, and its expression is
  evaluated with each key it reads taken from the first choice (or the low bound) of a
  searched key, an earlier derived value, or the config: an unknown or non-numeric key, or an
  expression the evaluator refuses, is an error here rather than in the running study. An
  expression with no value there (overflow, division by zero: ``DerivedValueError``) is
  evaluated again at the last choices (high bounds) and refused only when it has no value at
  either end; otherwise it may have one at other samples, and the trials where it has none
  fail one by one while the study goes on.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from omegaconf import DictConfig, OmegaConf
from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)

from search.config.build import build_system, set_path
from search.config.schema import group_schemas, validate_config
from search.study.space import DerivedValueError, SearchSpace, derived_names, evaluate_derived
from simcore.errors import InputError

__all__ = ["check_space"]

_MISSING = object()
#: keys gathered or composed per trial rather than set as one value: the per-pool work shares
#: (one list, :func:`search.config.build.gather_work_shares`)
_GATHERED = ("parallel.work_shares.",)
#: system keys applied to the composed config per trial (list elements), not set on the spec
_COMPOSED = ("system.pools.", "system.scaleout_dims.")


def _values(dist: BaseDistribution) -> list[Any]:
    if isinstance(dist, CategoricalDistribution):
        return list(dist.choices)
    if isinstance(dist, IntDistribution | FloatDistribution):
        return [dist.low, dist.high]
    return []


def _set(data: Any, parts: Sequence[str], value: Any) -> bool:
    """Set ``value`` at ``parts`` in plain nested dicts/lists (dicts made where missing);
    False when a list index is out of range (reported by ``check_list_elements``)."""
    node = data
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if isinstance(node, list):
            if not part.isdigit() or int(part) >= len(node):
                return False
            if last:
                node[int(part)] = value
            else:
                node = node[int(part)]
            continue
        if not isinstance(node, dict):
            return True  # a leaf with a key under it: the schema check reports it
        if last:
            node[part] = value
        else:
            if not isinstance(node.get(part), dict | list):
                node[part] = {}
            node = node[part]
    return True


class _Checker:
    def __init__(self, cfgs: Sequence[DictConfig]) -> None:
        self.cfgs = list(cfgs)
        self._plain: dict[tuple[int, str], dict[str, Any] | None] = {}

    def _group(self, i: int, group: str) -> dict[str, Any] | None:
        if (i, group) not in self._plain:
            node = self.cfgs[i].get(group)
            data = OmegaConf.to_container(node, resolve=True) if isinstance(node, DictConfig) \
                else None
            self._plain[i, group] = ({str(k): v for k, v in data.items()}
                                     if isinstance(data, dict) else None)
        return self._plain[i, group]

    def value(self, where: str, key: str, value: Any) -> None:
        """Refuse ``value`` at ``key`` unless some config's group schema takes it."""
        group, _, rest = key.partition(".")
        if group not in group_schemas():
            if all(OmegaConf.select(c, key, default=_MISSING) is _MISSING for c in self.cfgs):
                raise InputError(where + key, value, "unknown config key")
            return
        first: InputError | None = None
        for i in range(len(self.cfgs)):
            base = self._group(i, group)
            if base is None:
                continue
            data = copy.deepcopy(base)
            if not _set(data, rest.split("."), value):
                return
            try:
                validate_config({group: data}, {group})
                return
            except InputError as err:
                first = first or err
        if first is not None:
            rule = first.rule if first.key == key else f"{first.key}: {first.rule}"
            raise InputError(where + key, value, rule)


def _check_system_bound(cfg: DictConfig, key: str, dist: BaseDistribution) -> None:
    if not key.startswith("system.") or key.startswith(_COMPOSED) \
            or not isinstance(dist, IntDistribution | FloatDistribution):
        return
    system = build_system(cfg)
    for bound in (dist.low, dist.high):
        try:
            set_path(system, key.split(".")[1:], bound, key, "system")
        except (InputError, ValueError) as err:
            rule = err.rule if isinstance(err, InputError) else str(err).splitlines()[0]
            raise InputError(f"search.space.{key}", f"{dist.low}..{dist.high}",
                             f"bound {bound} refused: {rule}") from None


def _representative(dist: BaseDistribution, end: int = 0) -> Any:
    """The first (``end=0``) or last (``end=-1``) choice or bound of ``dist``."""
    values = _values(dist)
    numbers = [v for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
    if len(numbers) != len(values) or not numbers:
        return values[0] if values else None
    return numbers[end]


def check_space(cfg: DictConfig, space: SearchSpace,
                group_configs: Mapping[str, Sequence[DictConfig]] | None = None) -> None:
    """Refuse a space (see module docstring) before the study exists.

    Args:
        cfg: the composed config.
        space: the parsed space with its derived values.
        group_configs: searched config group -> the config composed with each of its options
            (keys under that group are checked against those configs instead of ``cfg``).
    """
    groups = dict(group_configs or {})
    checkers: dict[str, _Checker] = {}

    def checker(key: str) -> _Checker:
        group = key.partition(".")[0]
        cfgs = groups.get(group) or [cfg]
        if group not in checkers:
            checkers[group] = _Checker(cfgs)
        return checkers[group]

    for key, dist in space.distributions.items():
        if "." not in key or key.startswith(_GATHERED):
            continue  # a config group (GroupComposer.check), or gathered per trial
        for value in _values(dist):
            checker(key).value("search.space.", key, value)
        if key.partition(".")[0] not in groups:
            _check_system_bound(cfg, key, dist)
    for key in space.derived:
        if not key.startswith(_GATHERED):
            checker(key).value("search.derived.", key, 1)
    _check_derived(cfg, space)


def _check_derived(cfg: DictConfig, space: SearchSpace) -> None:
    """Every key a derived expression reads exists and is numeric; one evaluation passes."""
    known: dict[str, Any] = {}
    for key, expr in space.derived.items():
        for name in derived_names(expr):
            if name in space.distributions:
                found = [v for v in _values(space.distributions[name])
                         if isinstance(v, bool) or not isinstance(v, int | float)]
                if found:
                    raise InputError(f"search.derived.{key}", expr, f"reads {name}, whose "
                                     f"value {found[0]!r} is not a number")
            elif name not in space.derived and OmegaConf.select(
                    cfg, name, default=_MISSING) is _MISSING:
                raise InputError(f"search.derived.{key}", expr, f"reads {name}: not a config "
                                 "key, a searched key or a derived value")

        value = _evaluate_at_an_end(cfg, space, key, expr, known)
        known[key] = 1 if value is None else value


def _evaluate_at_an_end(cfg: DictConfig, space: SearchSpace, key: str, expr: str,
                        known: Mapping[str, Any]) -> int | float | None:
    """The value of derived ``key`` with the searched keys at their first values, or, where it
    has none there, at their last; refused when it has a value at neither end, or when the
    evaluator refuses the expression whatever the values."""
    def lookup_at(end: int) -> Any:
        def lookup(name: str) -> Any:
            if name in space.distributions:
                return _representative(space.distributions[name], end)
            if name in known:
                return known[name]
            if name in space.derived:
                return 1
            return OmegaConf.select(cfg, name)
        return lookup

    first: DerivedValueError | None = None
    for end in (0, -1):
        try:
            return evaluate_derived(key, expr, lookup_at(end))[0]
        except DerivedValueError as err:
            first = first or err
        except InputError as err:
            if err.key.startswith("search.derived."):
                raise
            raise InputError(f"search.derived.{key}", expr, f"{err.key}={err.value!r}: "
                             f"{err.rule}") from None
    assert first is not None
    raise InputError(first.key, first.value, f"{first.rule}, at the first and at the last "
                     f"value of every searched key it reads ({expr})")
