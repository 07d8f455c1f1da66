"""The one translation from a composed Hydra config to simulator specs.

``build_specs(cfg)`` turns ``cfg.workload``, ``cfg.parallel`` and ``cfg.system`` (plain YAML
keys = spec field names) into frozen :class:`ModelSpec`, :class:`ParallelSpec`
and :class:`SystemSpec`. Unknown keys and bad values raise :class:`~simcore.errors.InputError`
naming the key, the value and the rule, before any work is done. Sweeps and studies change
built specs field by field with the one override setter :func:`set_path`; a sweep axis is
converted to its field's type by the one column conversion :func:`coerce_column`; validation
case rows are built here too (:mod:`search.config.cases` maps a row to config sections).
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray
from omegaconf import DictConfig, ListConfig, OmegaConf

from search.config.resolvers import register_resolvers
from simcore.errors import InputError, require
from simcore.specs.parallel import ParallelSpec
from simcore.specs.system import SystemSpec, system_from_dict
from simcore.workloads.transformer.spec import ModelSpec

register_resolvers()  # configs may use ${pool_gpus:...} (resolved when built)

SYSTEM_CONF = Path(__file__).resolve().parents[2] / "conf" / "system"

__all__ = [
    "build_model",
    "build_parallel",
    "build_sections",
    "build_specs",
    "build_system",
    "check_list_elements",
    "check_not_folded",
    "coerce_column",
    "field_type",
    "gather_work_shares",
    "plain_sections",
    "sections_with",
    "set_path",
]


#: the config groups :func:`build_specs` reads
SPEC_SECTIONS = ("workload", "parallel", "system", "collective", "memory", "stack")

Reader = Callable[[str], "dict[str, Any] | None"]


def _cfg_reader(cfg: DictConfig) -> Reader:
    """Config group ``key`` of ``cfg`` resolved to a fresh dict; None when the group is absent."""

    def read(key: str) -> dict[str, Any] | None:
        node = cfg.get(key)
        if node is None:
            return None
        try:
            data = OmegaConf.to_container(node, resolve=True)
        except Exception as err:  # omegaconf interpolation errors
            raise InputError(key, "<config>", str(err).splitlines()[0]) from err
        require(isinstance(data, dict), key, data, "must be a mapping")
        assert isinstance(data, dict)
        return {str(k): v for k, v in data.items()}

    return read


def _sections_reader(sections: Mapping[str, Any]) -> Reader:
    """:func:`_cfg_reader` of plain, already resolved config groups (each read is a copy)."""

    def read(key: str) -> dict[str, Any] | None:
        data = sections.get(key)
        if data is None:
            return None
        require(isinstance(data, dict), key, data, "must be a mapping")
        return {str(k): v for k, v in copy.deepcopy(data).items()}

    return read


def _reader(source: DictConfig | Mapping[str, Any]) -> Reader:
    """The reader of a composed config, or of its spec groups as plain resolved dicts."""
    return _cfg_reader(source) if isinstance(source, DictConfig) else _sections_reader(source)


def _section(read: Reader, key: str) -> dict[str, Any]:
    data = read(key)
    require(data is not None, key, None, f"missing config group {key!r}")
    assert data is not None
    return data


def _construct(cls: type, data: dict[str, Any], prefix: str) -> Any:
    known = {f.name for f in fields(cls)}
    for key, value in data.items():
        require(key in known, f"{prefix}.{key}", value,
                f"unknown key (known: {', '.join(sorted(known))})")
    try:
        return cls(**data)
    except TypeError as err:
        raise InputError(prefix, data, str(err)) from err


def build_model(cfg: DictConfig | Mapping[str, Any]) -> ModelSpec:
    """``cfg.workload`` -> the spec of the family ``workload.family`` selects (default
    ``transformer``: :class:`ModelSpec`; :data:`simcore.workloads.REGISTRY`)."""
    return _model(_reader(cfg))


def _model(read: Reader) -> ModelSpec:
    from simcore.workloads import get_family

    data = _section(read, "workload")
    family = get_family(str(data.pop("family", "transformer")))
    spec: ModelSpec = _construct(family.spec_type, data, "workload")
    return spec


def build_parallel(cfg: DictConfig | Mapping[str, Any]) -> ParallelSpec:
    """``cfg.parallel`` -> :class:`ParallelSpec` (``dp`` left as configured)."""
    return _parallel(_reader(cfg))


def _parallel(read: Reader) -> ParallelSpec:
    data = _section(read, "parallel")
    set_here = set(data)  # the presets leave the stack's fields out: set here = by the user
    spec = _construct(ParallelSpec, data, "parallel")
    assert isinstance(spec, ParallelSpec)
    stack = read("stack")
    if stack is not None:  # software stack (conf/stack): its training-loop settings
        from simcore.specs.stack import apply_stack_plan, stack_from_dict

        spec = apply_stack_plan(spec, stack_from_dict(stack), set_here)
    return spec


def build_system(cfg: DictConfig | Mapping[str, Any]) -> SystemSpec:
    """``cfg.system`` -> :class:`SystemSpec`; the ``collective`` and ``memory`` groups, when
    composed, fill ``SystemSpec.collective`` / ``SystemSpec.memory`` (keys set under
    ``system.collective`` / ``system.memory`` win, as a sweep's hardware axes do); the
    ``stack`` group, when composed, scales the calibration (:mod:`simcore.specs.stack`)."""
    return _system(_reader(cfg))


def _system(read: Reader) -> SystemSpec:
    data = _section(read, "system")
    for group in ("collective", "memory"):
        section = read(group)
        if section is not None:
            inner = data.get(group) or {}
            data[group] = {**section, **(inner if isinstance(inner, dict) else {})}
    if isinstance(data.get("pools"), list):
        data["pools"] = [_pool_presets(pool, i) for i, pool in enumerate(data["pools"])]
    system = system_from_dict(data)
    stack = read("stack")
    if stack is not None:  # software stack (conf/stack): scales the calibration
        from simcore.specs.stack import apply_stack, stack_from_dict

        system = apply_stack(system, stack_from_dict(stack))
    return system


def _pool_presets(pool: Any, index: int) -> Any:
    """A ``system.pools`` entry with its accelerator / calibration preset names replaced by the
    preset's content (``conf/system/accelerator/<name>.yaml``, ``.../calibration/<name>.yaml``)."""
    if not isinstance(pool, dict):
        return pool
    out = dict(pool)
    for group in ("accelerator", "calibration"):
        name = out.get(group)
        if isinstance(name, str):
            known = sorted(p.stem for p in (SYSTEM_CONF / group).glob("*.yaml"))
            require(name in known, f"system.pools.{index}.{group}", name,
                    f"unknown {group} preset (known: {', '.join(known)})")
            out[group] = OmegaConf.to_container(OmegaConf.load(SYSTEM_CONF / group / f"{name}.yaml"))
    return out


def build_specs(cfg: DictConfig | Mapping[str, Any]) -> tuple[ModelSpec, ParallelSpec, SystemSpec]:
    """The (model, parallel, system) of one design point: of a composed config, or of its spec
    groups already resolved to plain dicts (``workload``, ``parallel``, ``system``, and
    optionally ``collective``, ``memory``, ``stack``: what ``OmegaConf.to_container(cfg[group],
    resolve=True)`` gives), with the same specs and errors and no OmegaConf tree."""
    read = _reader(cfg)
    return _model(read), _parallel(read), _system(read)


def build_sections(sections: Mapping[str, Any]) -> tuple[ModelSpec, ParallelSpec, SystemSpec]:
    """:func:`build_specs` of plain config sections (``workload``, ``parallel``, ``system``)."""
    return build_specs(OmegaConf.create(dict(sections)))


def plain_sections(cfg: DictConfig, whole: bool = False) -> dict[str, Any] | None:
    """The spec groups (:data:`SPEC_SECTIONS`) of a composed config as plain dicts, when that
    is what resolving them gives: each present group is a mapping and none holds an
    interpolation, a missing value or an escape (with ``whole``, no group of the config does:
    one outside the spec groups could refer into them). None otherwise."""
    raw = {k: OmegaConf.to_container(cfg[k], resolve=False)
           for k in SPEC_SECTIONS if cfg.get(k) is not None}
    if not all(isinstance(v, dict) for v in raw.values()) or _has_interpolation(raw):
        return None
    if whole and _has_interpolation(OmegaConf.to_container(cfg, resolve=False)):
        return None
    return raw


def sections_with(base: Mapping[str, Any], items: Sequence[tuple[str, Any]],
                  create_missing: bool = False) -> dict[str, Any] | None:
    """``base`` (from :func:`plain_sections`) with each dotted ``key`` of ``items`` set to its
    value, equal to what resolving the config with ``OmegaConf.update(cfg, key, value)``
    gives; the groups no key touches are shared with ``base``, the others copied. None when
    that equality is not sure: a key outside the spec groups or naming a list element, a value
    that is not plain (:func:`_plain_value`), or, unless ``create_missing`` (a config opened
    for new keys), a key the group does not hold or one that holds a mapping."""
    out = dict(base)
    copied: set[str] = set()
    for key, value in items:
        path = key.split(".")
        if (path[0] not in out or len(path) < 2 or not _plain_value(value)
                or not all(p and not p.isdigit() and "[" not in p for p in path)):
            return None
        if path[0] not in copied:
            out[path[0]] = copy.deepcopy(out[path[0]])
            copied.add(path[0])
        node = out[path[0]]
        for part in path[1:-1]:
            child = node.setdefault(part, {}) if create_missing else node.get(part)
            if not isinstance(child, dict):
                return None
            node = child
        if not create_missing and (path[-1] not in node or isinstance(node[path[-1]], dict)):
            return None
        node[path[-1]] = list(value) if isinstance(value, tuple) else value
    return out


def _has_interpolation(data: Any) -> bool:
    """Whether a raw (unresolved) config container holds a string OmegaConf would not keep
    as it is (an interpolation, a missing value, an escape)."""
    if isinstance(data, dict):
        return any(_has_interpolation(v) for v in data.values())
    if isinstance(data, list):
        return any(_has_interpolation(v) for v in data)
    return isinstance(data, str) and ("$" in data or "???" in data or "\\" in data)


def _plain_value(value: Any) -> bool:
    """A value OmegaConf stores and resolves unchanged: None, bool, int, float, a string
    without interpolation, or a list/tuple of those."""
    if isinstance(value, list | tuple):
        return all(_plain_value(v) for v in value)
    if isinstance(value, str):
        return not _has_interpolation(value)
    return value is None or type(value) in (bool, int, float)


def check_list_elements(cfg: DictConfig, key: str, value: Any, where: str = "") -> None:
    """Refuse a dotted ``key`` that a study applies to the config when one of its numeric parts
    names no element of the config's list there (``system.pools.7.count`` with two pools):
    applying it would fail inside the evaluation, after the study has started. ``where``
    prefixes the key in the error (``search.space.``)."""
    parts = key.split(".")
    for i, part in enumerate(parts):
        if part.isdigit():
            head = ".".join(parts[:i])
            node = OmegaConf.select(cfg, head, default=None)
            size = len(node) if isinstance(node, ListConfig) else 0
            if int(part) >= size:
                raise InputError(where + key, value, f"{head} has {size} element(s) here, so "
                                 f"no element {part}")


def check_not_folded(key: str, value: Any, has_dims: bool, where: str = "") -> None:
    """Refuse a ``system.scaleout.*`` ``key`` that a sweep or study varies when the system has
    ``scaleout_dims`` (``has_dims``): the scale-out fabric is then their fold (``SystemSpec``),
    which replaces any value set there, so the key would change nothing in a composed config.
    ``where`` prefixes the key in the error (``search.space.``)."""
    if key.startswith("system.scaleout.") and has_dims:
        raise InputError(where + key, value, "the scale-out fabric is the fold of "
                         "system.scaleout_dims when they are given (a value here would be "
                         "replaced by it): vary system.scaleout_dims.<i>.<field> instead")


@functools.lru_cache(maxsize=256)
def _field_names(cls: type) -> frozenset[str]:
    """The field names of dataclass ``cls`` (read once per class: ``set_path`` runs per
    distinct value of a sweep's hardware axes)."""
    return frozenset(f.name for f in fields(cls))


def set_path(spec: Any, path: Sequence[str], value: Any, key: str = "",
             what: str = "spec") -> Any:
    """A copy of the frozen dataclass ``spec`` with the field at ``path`` set to ``value``.

    The copy runs the spec's own checks (``dataclasses.replace``; a spec with a ``with_field``
    method, :class:`SystemSpec`, sets a nested field through it: the same copy and errors,
    checking only the rules that involve that field). A whole number given for a float field
    becomes a float and a whole float given for an int field an int (YAML and samplers do not
    keep the distinction). A path that names no field is an
    :class:`InputError` on ``key`` (default: the dotted path), "not a <what> field".
    """
    if (not dataclasses.is_dataclass(spec) or isinstance(spec, type)
            or path[0] not in _field_names(type(spec))):
        raise InputError(key or ".".join(path), value, f"not a {what} field")
    if len(path) == 1:
        current = getattr(spec, path[0])
        if isinstance(current, int) and not isinstance(current, bool) and isinstance(value, float):
            value = int(value) if value.is_integer() else value
        elif isinstance(current, float) and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        return dataclasses.replace(spec, **{path[0]: value})
    inner = set_path(getattr(spec, path[0]), path[1:], value, key, what)
    if hasattr(spec, "with_field"):  # a SystemSpec: only the rules that involve that field
        return spec.with_field(path[0], inner)
    return dataclasses.replace(spec, **{path[0]: inner})


def field_type(root: type, path: Sequence[str]) -> Any | None:
    """Type of the field at ``path`` inside dataclass ``root`` (None when not a field)."""
    tp: Any = root
    for name in path:
        if not (isinstance(tp, type) and dataclasses.is_dataclass(tp)):
            return None
        hints = typing.get_type_hints(tp)
        if name not in hints:
            return None
        tp = hints[name]
    return tp


def coerce_column(values: NDArray[Any], tp: Any, key: str) -> NDArray[Any]:
    """A column of values for a field of type ``tp`` (floats as float64, str as object)."""
    if tp is float:
        if values.dtype.kind not in "iuf":
            raise InputError(key, values[0], "must be a number")
        return values.astype(np.float64)
    if tp is int and values.dtype.kind not in "iu":
        raise InputError(key, values[0], "must be an integer")
    if tp is str:
        return values.astype(object)
    return values


_SHARES = "parallel.work_shares."


def gather_work_shares(values: dict[str, Any], base_cfg: DictConfig) -> dict[str, Any]:
    """``parallel.work_shares.<i>`` keys (pool ``i``'s relative work, a sweep or search axis)
    -> one ``parallel.work_shares`` tuple (pools not named get 1.0) and
    ``parallel.work_split=explicit`` unless the split is given too; with a split other than
    ``explicit`` the shares are dropped.

    Raises:
        InputError: a key names no pool index.
    """
    shares = {k: v for k, v in values.items() if k.startswith(_SHARES)}
    if not shares:
        return values
    out = {k: v for k, v in values.items() if k not in shares}
    index: dict[int, float] = {}
    for key, value in shares.items():
        tail = key[len(_SHARES):]
        if not tail.isdigit():
            raise InputError(key, value, "parallel.work_shares.<i> needs a pool index i")
        index[int(tail)] = float(value)
    num_pools = max(len(base_cfg.system.get("pools") or ()), max(index) + 1)
    split = out.setdefault("parallel.work_split", "explicit")
    if split == "explicit":
        out["parallel.work_shares"] = tuple(index.get(i, 1.0) for i in range(num_pools))
    return out
