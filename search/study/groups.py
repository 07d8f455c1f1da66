"""Config-group dimensions of a search: which preset, not which value (``system=choice(a,b)``).

A search-space key without a dot that names a config group of ``conf/`` (``system``,
``workload``, ``fidelity``, ...) is a categorical dimension over that group's options, so a
co-design study can ask which cluster (or model, or fidelity) to take as well as how to run it:
``'system=choice(dgx_h100_80g,dgx_b200,gb200_nvl72)'``. Hydra composes the configuration once
per distinct combination of group choices, with the command's other overrides (so
``system.num_gpus=64`` holds for every system), and caches it; a trial's other parameters then
apply to that configuration exactly as they apply to the one configuration of a study without
group dimensions (:class:`search.study.evaluate.DesignEvaluator`). The sweep command's group
axes work the same way (``search.sweep.plan``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from omegaconf import DictConfig
from optuna.distributions import BaseDistribution, CategoricalDistribution

from simcore.errors import InputError

__all__ = ["GroupChoice", "GroupComposer", "group_keys"]

#: a trial's group choices, sorted by group: (("system", "dgx_b200"), ...); () = none searched
GroupChoice = tuple[tuple[str, str], ...]


def group_keys(keys: Sequence[str]) -> list[str]:
    """The keys of a search space that name a config group (no dot: ``system``)."""
    return [k for k in keys if "." not in k]


@dataclass
class GroupComposer:
    """Composes (and caches) the configuration of each combination of group choices.

    Args:
        compose: Hydra's compose bound to the config folder (``compose_session``).
        options: a group's options (``compose_session``).
        overrides: the command's plain overrides (every one but the searched dimensions).
    """

    compose: Callable[[Sequence[str]], DictConfig]
    options: Callable[[str], list[str]]
    overrides: tuple[str, ...] = ()
    _configs: dict[GroupChoice, DictConfig] = field(default_factory=dict)

    def check(self, key: str, distribution: BaseDistribution) -> None:
        """Refuse a group dimension that is not a choice among the group's options, or that the
        command also sets; compose each option once, so a bad preset fails before any trial."""
        where = f"search.space.{key}"
        if not isinstance(distribution, CategoricalDistribution):
            raise InputError(where, distribution, "a config group is searched as a "
                             "choice(...) of its options, not a range")
        options = self.options(key)
        if not options:
            raise InputError(where, key, "no config group of that name (a dotted key "
                             "searches a value: system.scaleout.bandwidth_GBps=...)")
        for value in distribution.choices:
            if value not in options:
                raise InputError(where, value, f"must be one of {', '.join(sorted(options))}")
        for text in self.overrides:
            if text.lstrip("+~").partition("=")[0] == key:
                raise InputError(key, text, "is searched (search.space) and set on the command "
                                 "line: keep one")
        for value in distribution.choices:
            self.config(((key, str(value)),))

    def split(self, keys: Sequence[str], params: Mapping[str, Any]
              ) -> tuple[GroupChoice, dict[str, Any]]:
        """(the trial's group choices, its other parameters)."""
        choice = tuple(sorted((k, str(params[k])) for k in keys if k in params))
        return choice, {k: v for k, v in params.items() if k not in keys}

    def config(self, choice: GroupChoice) -> DictConfig:
        """The configuration composed with ``choice`` (cached)."""
        if choice not in self._configs:
            self._configs[choice] = self.compose(
                [*self.overrides, *(f"{k}={v}" for k, v in choice)])
        return self._configs[choice]
