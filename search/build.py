"""The one translation from a composed Hydra config to simulator specs.

``build_specs(cfg)`` turns ``cfg.workload``, ``cfg.parallel`` and ``cfg.system`` (plain YAML
keys = spec field names) into frozen :class:`ModelSpec`, :class:`ParallelSpec`
and :class:`SystemSpec`. Unknown keys and bad values raise :class:`~simcore.errors.InputError`
naming the key, the value and the rule, before any work is done.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from omegaconf import DictConfig, OmegaConf

from simcore.errors import InputError, require
from simcore.specs.parallel import ParallelSpec
from simcore.specs.system import SystemSpec, system_from_dict
from simcore.workloads.transformer.spec import ModelSpec

__all__ = ["build_model", "build_parallel", "build_specs", "build_system"]


def _section(cfg: DictConfig, key: str) -> dict[str, Any]:
    node = cfg.get(key)
    require(node is not None, key, None, f"missing config group {key!r}")
    try:
        data = OmegaConf.to_container(node, resolve=True)
    except Exception as err:  # omegaconf interpolation errors
        raise InputError(key, "<config>", str(err).splitlines()[0]) from err
    require(isinstance(data, dict), key, data, "must be a mapping")
    assert isinstance(data, dict)
    return {str(k): v for k, v in data.items()}


def _construct(cls: type, data: dict[str, Any], prefix: str) -> Any:
    known = {f.name for f in fields(cls)}
    for key, value in data.items():
        require(key in known, f"{prefix}.{key}", value,
                f"unknown key (known: {', '.join(sorted(known))})")
    try:
        return cls(**data)
    except TypeError as err:
        raise InputError(prefix, data, str(err)) from err


def build_model(cfg: DictConfig) -> ModelSpec:
    """``cfg.workload`` -> :class:`ModelSpec`."""
    spec = _construct(ModelSpec, _section(cfg, "workload"), "workload")
    assert isinstance(spec, ModelSpec)
    return spec


def build_parallel(cfg: DictConfig) -> ParallelSpec:
    """``cfg.parallel`` -> :class:`ParallelSpec` (``dp`` left as configured)."""
    spec = _construct(ParallelSpec, _section(cfg, "parallel"), "parallel")
    assert isinstance(spec, ParallelSpec)
    return spec


def build_system(cfg: DictConfig) -> SystemSpec:
    """``cfg.system`` -> :class:`SystemSpec`; the ``collective`` and ``memory`` groups, when
    composed, fill ``SystemSpec.collective`` / ``SystemSpec.memory`` (keys set under
    ``system.collective`` / ``system.memory`` win, as a sweep's hardware axes do); the
    ``stack`` group, when composed, scales the calibration (:mod:`simcore.specs.stack`)."""
    data = _section(cfg, "system")
    for group in ("collective", "memory"):
        if cfg.get(group) is not None:
            inner = data.get(group) or {}
            data[group] = {**_section(cfg, group), **(inner if isinstance(inner, dict) else {})}
    system = system_from_dict(data)
    if cfg.get("stack") is not None:  # software stack (conf/stack): scales the calibration
        from simcore.specs.stack import apply_stack, stack_from_dict

        system = apply_stack(system, stack_from_dict(_section(cfg, "stack")))
    return system


def build_specs(cfg: DictConfig) -> tuple[ModelSpec, ParallelSpec, SystemSpec]:
    """The (model, parallel, system) of one design point."""
    return build_model(cfg), build_parallel(cfg), build_system(cfg)
