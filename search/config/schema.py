"""Structured-config schemas: every group of ``conf/`` is checked against a dataclass.

Model (DESIGN.md "User-facing contract" and "Reliability"; STYLE.md "Hydra practice"): the simcore
spec dataclasses are the schemas of ``workload``, ``parallel`` and ``system`` (their field names are
the YAML keys). Hydra/OmegaConf cannot use them as they are (frozen, ``Literal`` and ``tuple``
fields), so :func:`mirror` derives an equivalent OmegaConf-ready dataclass from each: ``Literal``
becomes an ``Enum`` of its values, tuples become lists, nested specs are mirrored recursively. The
orchestration groups (``sweep``, ``tracking``, ``ray``, ``collective``, ``memory``) are defined here.

:func:`validate_config` merges every composed group into its schema in struct mode, so an unknown
key, a wrong type or a value outside a choice set is one :class:`simcore.errors.InputError`
naming the key, the value and the rule, before any work starts. Validation never changes the
config the caller keeps: the schemas check, :mod:`search.config.build` translates.
"""

from __future__ import annotations

import dataclasses
import enum
import importlib
import types
import typing
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any, Literal, Optional, Union

from omegaconf import MISSING, BooleanNode, DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from simcore.errors import InputError
from simcore.limits import check_number, limit

__all__ = [
    "CollectiveConf",
    "MemoryConf",
    "RayConf",
    "SweepConf",
    "TrackingConf",
    "group_schemas",
    "mirror",
    "register_configs",
    "validate_config",
    "validate_value",
]


@dataclass
class SweepConf:
    """``sweep.*``: what to sweep and how (``conf/sweep/*.yaml``)."""

    name: str = "default"
    mode: str = "grid"  # grid | random | sobol
    num_points: int = 100  # random and sobol modes: points to draw
    seed: int = 0  # random and sobol modes, and shuffle(...) order
    axes: dict[str, str] = field(default_factory=dict)  # key -> Hydra sweep expression
    batch_size: Any = "auto"  # design points per Ray task, or auto (guided sizes, 64-8192)
    output_dir: str | None = None  # default: outputs/sweep-<name>-<timestamp>
    resume: bool = False
    objective: str = "iteration_time_s"
    direction: str = "auto"  # auto (the objective's own: objective_direction) | minimize | maximize
    top_k: int = 10
    progress: bool = True
    flush_interval_s: float = 2.0  # results are appended to parquet at least this often
    in_process: bool = False  # evaluate in this process, without Ray (ray.* unused)


@dataclass
class TrackingConf:
    """``tracking.*``: MLflow logging (``conf/tracking/*.yaml``)."""

    enabled: bool = True
    uri: str | None = None  # null: sqlite store under <repo or cwd>/.simsweep/
    experiment: str | None = None  # null: the sweep name
    child_runs_max: int = 500  # above this many points only the best get child runs
    best_child_runs: int = 20
    plots: bool = True
    async_logging: bool = True
    request_timeout_s: float = 10.0


@dataclass
class RayConf:
    """``ray.*``: where batches run (``conf/ray/*.yaml``)."""

    address: str | None = None  # null: local Ray; "auto" or "ray://host:port": a cluster
    num_workers: int = 2
    num_cpus: int | None = None  # local Ray only; null: num_workers
    inflight_per_worker: int = 2
    max_batch_retries: int = 3
    temp_dir: str | None = None  # null: /tmp/rs_simsweep_<uid>, created 0700
    ship_project: bool | None = None  # runtime_env py_modules; null: only for a cluster
    env_vars: dict[str, str] = field(default_factory=dict)


@dataclass
class CollectiveConf:
    """``collective.*``: collective algorithm per network dimension (ASTRA-sim system JSON §2.1)."""

    name: str = "auto"
    all_reduce: list[str] = field(default_factory=lambda: ["auto"])
    all_gather: list[str] = field(default_factory=lambda: ["auto"])
    reduce_scatter: list[str] = field(default_factory=lambda: ["auto"])
    all_to_all: list[str] = field(default_factory=lambda: ["auto"])
    chunks_per_collective: int = 1  # ASTRA-sim preferred-dataset-splits
    in_network: bool = False  # in-switch reduction where the dimension is a Switch


@dataclass
class MemoryConf:
    """``memory.*``: remote (disaggregated) memory tier (ASTRA-sim remote-memory JSON §2.3)."""

    name: str = "local"
    kind: str = "none"  # none | per_node | per_npu | pool (ASTRA-sim memory-type)
    latency_ns: float = 0.0
    bandwidth_GBps: float = 0.0
    capacity_gib: float = 0.0
    offload_optimizer: bool = False
    offload_activations: bool = False


# group -> "module:Class" of the simcore spec whose fields are that group's keys
_SPEC_GROUPS: dict[str, str] = {
    "workload": "simcore.workloads.transformer.spec:ModelSpec",
    "parallel": "simcore.specs.parallel:ParallelSpec",
    "system": "simcore.specs.system:SystemSpec",
}
_OWN_GROUPS: dict[str, type] = {
    "sweep": SweepConf,
    "tracking": TrackingConf,
    "ray": RayConf,
    "collective": CollectiveConf,
    "memory": MemoryConf,
}
_MIRRORS: dict[type, type] = {}
# (spec class name, field) -> schema type, where YAML accepts more than the spec holds:
# system.pools entries name their accelerator / calibration by preset or map them; search.config.build
# resolves the names and SystemSpec checks each entry, naming system.pools.<i>.<key>
_FIELD_TYPES: dict[tuple[str, str], Any] = {("SystemSpec", "pools"): Optional[list[Any]]}  # noqa: UP045
_CHOICES: dict[str, tuple[str, ...]] = {
    "sweep.mode": ("grid", "random", "sobol"),
    "sweep.direction": ("auto", "minimize", "maximize"),
    "memory.kind": ("none", "per_node", "per_npu", "pool"),
}


def _conf_type(tp: Any) -> Any:
    """Translate a spec field type into one OmegaConf accepts (see module docstring)."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return mirror(tp)
    if origin is Literal:
        if all(isinstance(a, str) for a in args):
            return enum.Enum(f"Choice_{'_'.join(args)}", {a: a for a in args})
        return type(args[0]) if args else Any
    if origin in (Union, types.UnionType):
        rest = [a for a in args if a is not type(None)]
        inner = _conf_type(rest[0]) if len(rest) == 1 else Any
        return Optional[inner] if len(rest) < len(args) else inner  # noqa: UP045 - a runtime type
    if origin in (tuple, list, typing.Sequence) or tp in (tuple, list):
        item = [a for a in args if a is not Ellipsis]
        return list.__class_getitem__(_conf_type(item[0]) if len(set(item)) == 1 else Any)
    if origin is dict or tp is dict:
        return dict.__class_getitem__((str, _conf_type(args[1]) if args else Any))
    if tp in (int, float, str, bool) or (isinstance(tp, type) and issubclass(tp, enum.Enum)):
        return tp
    return Any


def _conf_default(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return mirror(type(value))(
            **{f.name: _conf_default(getattr(value, f.name)) for f in dataclasses.fields(value)}
        )
    if isinstance(value, tuple):
        return [_conf_default(v) for v in value]
    if isinstance(value, enum.Enum):
        return value.value
    return value


def _const(value: Any) -> Any:
    return lambda: value


def mirror(cls: type) -> type:
    """An OmegaConf-ready dataclass with the fields, types and defaults of spec ``cls``."""
    if cls in _MIRRORS:
        return _MIRRORS[cls]
    hints = typing.get_type_hints(cls)
    specs: list[tuple[str, Any, Any]] = []
    for f in dataclasses.fields(cls):
        tp = _FIELD_TYPES.get((cls.__name__, f.name)) or _conf_type(hints[f.name])
        if f.default is not dataclasses.MISSING:
            default = _conf_default(f.default)
        elif f.default_factory is not dataclasses.MISSING:
            default = _conf_default(f.default_factory())
        else:
            default = MISSING
        if isinstance(default, (list, dict)) or dataclasses.is_dataclass(default):
            specs.append((f.name, tp, field(default_factory=_const(default))))
        else:
            specs.append((f.name, tp, field(default=default)))
    made = dataclasses.make_dataclass(f"{cls.__name__}Conf", specs)
    _MIRRORS[cls] = made
    return made


def _load_spec(path: str) -> type | None:
    module, _, name = path.partition(":")
    try:
        spec: type = getattr(importlib.import_module(module), name)
        return spec
    except (ImportError, AttributeError):
        return None


def _with_family(schema: type) -> type:
    """``schema`` plus the key ``family`` (default ``transformer``)."""
    if schema not in _MIRRORS:
        _MIRRORS[schema] = dataclasses.make_dataclass(
            schema.__name__, [("family", str, field(default="transformer"))], bases=(schema,))
    return _MIRRORS[schema]


def group_schemas() -> dict[str, type]:
    """Group name -> schema dataclass for every group with a schema."""
    out: dict[str, type] = {}
    for group, path in _SPEC_GROUPS.items():
        spec = _load_spec(path)
        if spec is not None:
            out[group] = mirror(spec)
    if "workload" in out:  # workload.family selects the family (simcore.workloads.REGISTRY)
        out["workload"] = _with_family(out["workload"])
    out.update({group: mirror(cls) for group, cls in _OWN_GROUPS.items()})
    return out


def register_configs() -> None:
    """Store every group schema in Hydra's ConfigStore as ``schema/<group>``."""
    from hydra.core.config_store import ConfigStore

    store = ConfigStore.instance()
    for group, schema in group_schemas().items():
        store.store(group="schema", name=group, node=schema)


def _as_input_error(group: str, err: OmegaConfBaseException) -> InputError:
    key = f"{group}.{err.full_key}" if getattr(err, "full_key", None) else group
    value = getattr(err, "value", None)
    msg = str(getattr(err, "msg", err)).splitlines()[0]
    if "not in" in msg and "Key" in msg:
        return InputError(key, value, f"unknown key; valid keys here: {_valid_keys(group, key)}")
    if "Missing mandatory value" in msg:
        return InputError(key, "???", "required value is missing")
    return InputError(key, value, msg)


def _valid_keys(group: str, key: str) -> str:
    parent = key.rpartition(".")[0].partition(".")[2]
    node = OmegaConf.structured(group_schemas()[group])
    sub = OmegaConf.select(node, parent) if parent else node
    return ", ".join(str(k) for k in sub) if isinstance(sub, DictConfig) else "?"


def _family_schema(node: Any) -> type | None:
    """The schema of ``workload`` when ``workload.family`` names a non-transformer family (its
    spec's fields plus ``family``), else None."""
    name = node.get("family") if hasattr(node, "get") else None
    if not isinstance(name, str) or name == "transformer":
        return None
    from simcore.workloads import get_family

    spec = get_family(name).spec_type
    if spec not in _MIRRORS:
        _MIRRORS[spec] = dataclasses.make_dataclass(
            f"{spec.__name__}Family", [("family", str, field(default=name))], bases=(mirror(spec),))
    return _MIRRORS[spec]


#: the OmegaConf form of each schema, made once (~1.3 ms each); ``OmegaConf.merge`` copies its
#: first argument, so the cached form is never changed
_STRUCTURED: dict[type, DictConfig] = {}


def _structured(schema: type) -> DictConfig:
    if schema not in _STRUCTURED:
        _STRUCTURED[schema] = OmegaConf.structured(schema)
    return _STRUCTURED[schema]


def validate_value(group: str, node: Any) -> None:
    """Check one group's content against its schema; raise InputError on the first problem."""
    schema = group_schemas().get(group)
    if group == "workload":
        schema = _family_schema(node) or schema
    if schema is None:
        return
    try:
        merged = OmegaConf.merge(_structured(schema), node)
        OmegaConf.to_container(merged, resolve=True, throw_on_missing=True)
    except OmegaConfBaseException as err:
        found = _as_input_error(group, err)
        if found.value is None:
            given = OmegaConf.create(node) if not isinstance(node, DictConfig) else node
            rel = found.key.partition(".")[2]
            value = OmegaConf.select(given, rel, default=None, throw_on_resolution_failure=False)
            found = InputError(found.key, value, found.rule)
        raise found from None
    _check_booleans(group, node, merged)
    if group == "sweep" and "batch_size" in node:
        check_batch_size(node.get("batch_size"))


def _check_booleans(key: str, given: Any, merged: Any) -> None:
    """Every boolean field of ``given`` is written ``true`` or ``false``. OmegaConf's schema
    check also accepts ``yes`` / ``no`` / ``on`` / ``off`` / ``0`` / ``1`` for a bool, but the
    config the caller keeps holds the raw value, and a string is truthy: ``sweep.resume=no``
    would resume. Raises :class:`InputError` on the first such value."""
    if isinstance(given, dict | DictConfig):
        for name, value in given.items():
            if isinstance(merged, DictConfig) and name in merged:
                _check_booleans(f"{key}.{name!s}", value, merged._get_node(name))
    elif isinstance(merged, BooleanNode) and given is not None and not isinstance(given, bool):
        raise InputError(key, given, "must be true or false")


#: groups found valid, by their content (:func:`_content_key`); at most this many are kept
_VALID_MAX = 4096
_valid: set[tuple[str, str]] = set()


def _content_key(group: str, node: Any) -> tuple[str, str] | None:
    """The key of a group's check: its raw content as sorted JSON. None when the content holds
    an interpolation or a resolver call (``${...}``): its check may then depend on other keys,
    the environment or the time, so it is not remembered."""
    import json

    raw = OmegaConf.to_container(node, resolve=False) if isinstance(node, DictConfig) else node
    text = json.dumps(raw, sort_keys=True, default=repr)
    return None if "${" in text else (group, text)


def validate_config(cfg: Any, groups: Collection[str] | None = None) -> None:
    """Validate every group of a composed config that has a schema (see module docstring).

    ``cfg``: the composed config, or a mapping of its groups as plain dicts. ``groups``: check
    only these, for a config that differs in nothing else from one already checked.
    A group's schema check is a function of its content alone when that content has no
    interpolation, so a content found valid once in this process is not checked again: a
    sweep's structural combinations repeat every group but the one or two their axes change
    (a group's check costs ~1.3-3 ms, its content key ~0.01-0.2 ms)."""
    def wanted(group: str) -> bool:
        return groups is None or group in groups

    for group in group_schemas():
        if wanted(group) and group in cfg and cfg[group] is not None:
            content = _content_key(group, cfg[group])
            if content is not None and content in _valid:
                continue
            validate_value(group, cfg[group])
            if content is not None:
                if len(_valid) >= _VALID_MAX:
                    _valid.clear()
                _valid.add(content)
    for key, allowed in _CHOICES.items():
        group, _, name = key.partition(".")
        node = cfg.get(group) if wanted(group) else None
        if node is not None and node.get(name) is not None and node.get(name) not in allowed:
            raise InputError(key, node.get(name), f"must be one of {', '.join(allowed)}")
    for key, (lo, lo_open, hi, integer) in NUMBER_RULES.items():
        group, _, name = key.partition(".")
        node = cfg.get(group) if wanted(group) else None
        if node is None or node.get(name) is None:
            continue
        check_number(key, node.get(name), lo=lo, lo_open=lo_open,
                     hi=limit(hi) if isinstance(hi, str) else hi, integer=integer)
    sweep = cfg.get("sweep") if wanted("sweep") else None
    if sweep is not None and sweep.get("objective") is not None:
        check_objective(str(sweep.get("objective")))


def check_batch_size(value: Any, key: str = "sweep.batch_size") -> None:
    """``value`` is ``auto`` or a whole number of design points in [1, 1e6]."""
    if value == "auto":
        return
    try:
        check_number(key, value, lo=1, hi=1e6, integer=True)
    except InputError:
        raise InputError(key, value, "must be auto or an integer in [1, 1000000] (design points "
                         "per batch)") from None


# key -> (lower bound, lower bound strict?, upper bound (number or simcore.limits name), integer?):
# the orchestration settings whose wrong value would switch fault tolerance off or start
# unbounded work (README "Limits and bounds"). NaN / inf never pass (simcore.limits.check_number).
NUMBER_RULES: dict[str, tuple[float, bool, float | str | None, bool]] = {
    "sweep.num_points": (1, False, "points", True),
    "sweep.top_k": (0, False, 1e6, True),
    "sweep.flush_interval_s": (0, False, 86400.0, False),  # 0 = flush after every batch
    "ray.num_workers": (1, False, 4096, True),
    "ray.num_cpus": (1, False, 4096, True),
    "ray.inflight_per_worker": (1, False, 1024, True),
    "ray.max_batch_retries": (0, False, 100, True),
    "tracking.child_runs_max": (0, False, 1e6, True),
    "tracking.best_child_runs": (0, False, 1e6, True),
    "tracking.request_timeout_s": (0, True, 3600.0, False),
    "memory.latency_ns": (0, False, "time_ns", False),
    "memory.bandwidth_GBps": (0, False, 1e9, False),
    "memory.capacity_gib": (0, False, 1e9, False),
}


#: result columns a sweep ranks by their largest value (``sweep.direction=auto``); every other
#: objective (times, memory, cost, power) by its smallest
MAXIMIZED = ("mfu", "model_tflops_per_gpu", "samples_per_s", "tokens_per_s")


def objective_direction(name: str, direction: str = "auto") -> str:
    """``direction`` (``minimize`` / ``maximize``) of a sweep's objective ``name``; ``auto``:
    ``maximize`` for the columns of :data:`MAXIMIZED`, else ``minimize``."""
    if direction != "auto":
        return direction
    return "maximize" if name in MAXIMIZED else "minimize"


def check_objective(name: str, key: str = "sweep.objective") -> None:
    """``name`` is a result column a sweep can rank by (an engine metric, a throughput or a
    cost column)."""
    from simcore.engine.result import METRICS

    known = {*METRICS, "samples_per_s", "tokens_per_s", "cost_usd_per_iter", "capex_usd",
             "power_kw"}
    if name not in known and not (name.startswith("exposed_comm_") and name.endswith("_s")):
        raise InputError(key, name, f"unknown metric; one of {', '.join(sorted(known))}")
