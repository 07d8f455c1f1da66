"""Sweep planning: overrides -> validated design points grouped by graph structure.

Model (DESIGN.md "The vectorized engine": points that share workload and parallelization share
the graph structure and differ only in numbers). Axes are split in two kinds:

- *structural* axes (config-group choices, ``workload.*``, ``parallel.*`` and any ``system.*``
  key whose value changes ``simcore.api.structure_key``) give one configuration per distinct
  combination, derived from the config of the fixed overrides without composing each
  (:class:`_Derived`: ~4 ms for plain values, ~13-19 ms with a config group choice, against
  ~0.15 s for a Hydra composition), validated against the schemas and built into specs; a
  combination whose workload spec breaks one of the model's own rules (an unknown layer kind,
  a depth the family does not have) is a set of infeasible points with that one-line reason
  (:class:`search.run.batch.InvalidModel`), not an error of the sweep, except a resource
  bound of :mod:`simcore.limits` (``workload.num_layers`` beyond ``graph_layers``): a value
  alone breaks it, so it is refused before any work, as a fixed value is;
- *hardware* axes (``system.*`` leaves that keep the structure) are applied to the composed
  SystemSpec field by field inside the worker, so 10^5 points cost 10^5 small dataclass
  replacements, not 10^5 Hydra compositions. Every distinct hardware value is checked before
  any work (schema type, then the spec's own rules on the base system), and
  ``tests/search/sweep/test_plan.py`` checks that base+replace equals a full composition per point.

A cluster of several device pools (``system.pools``) adds ``pool<i>_accelerator`` and
``pool<i>_count`` columns per point (:func:`pool_columns`, from each point's built SystemSpec;
pool sizes are structural: they change ``num_gpus``), so a sweep over a mix of devices
(``system.pools.0.count=8,16 system.pools.1.count=16,32,48``) is tabulated and tracked by pool.
The split of a stage's work between pools is an axis too: ``parallel.work_split`` (even,
proportional, balanced) or pool ``i``'s relative work ``parallel.work_shares.<i>`` (composed
as one ``parallel.work_shares`` list with ``work_split=explicit``, pools not named 1.0;
:func:`search.config.build.gather_work_shares`, as the study space does).

Each point gets a stable ``point_hash`` (its composed structural config and hardware values)
and the sweep a ``sweep_hash``; resume and MLflow de-duplication rely on both.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from omegaconf import DictConfig, OmegaConf

from search.config.build import (
    build_model,
    build_parallel,
    build_specs,
    build_system,
    check_not_folded,
    coerce_column,
    field_type,
    gather_work_shares,
    plain_sections,
    sections_with,
    set_path,
)
from search.config.compose import split_value_overrides, value_items, with_value_overrides
from search.config.leaf_columns import valid_in_ranges
from search.config.schema import validate_config
from search.run.batch import InvalidModel
from search.sweep.space import (
    Axis,
    expand_grid,
    format_value,
    parse_overrides,
    sample_random,
    sample_sobol,
)
from simcore.errors import InputError
from simcore.specs.parallel import ParallelSpec

__all__ = ["Combo", "SweepPlan", "format_value", "make_plan", "pool_columns"]

_SIM_GROUPS = ("workload", "parallel", "system", "collective", "memory")
_RUN_GROUPS = ("sweep", "tracking", "ray")  # how a sweep runs, not what it computes
Composer = Callable[[Sequence[str]], DictConfig]


@dataclass(frozen=True, eq=False)
class Combo:
    """One structural combination: its overrides, composed config and built specs."""

    overrides: tuple[str, ...]
    cfg: DictConfig | None  # None: built from the base config's plain spec groups (_Derived)
    model: Any
    parallel: Any
    system: Any
    config_hash: str
    batch_key: str  # equal batch_key => may share one simulate_batch call
    fidelity: str = "calibrated"  # simcore.api.simulate_batch fidelity mode


def _piece_overlap(combo: Combo) -> bool:
    """Whether ``combo`` costs TP overlap, CP rings or chunked all-to-alls as pieces
    (calibrated fidelity)."""
    par = combo.parallel
    return (combo.fidelity == "calibrated" and isinstance(par, ParallelSpec)
            and par.pipelined_pieces and not par.overlap_blocks)


@dataclass(frozen=True, eq=False)
class SweepPlan:
    """Every design point of a sweep, as columns, with its structural combination.

    Attributes:
        base_cfg: the config composed with the fixed (non-sweep) overrides.
        axes: the sweep axes, in order.
        columns: axis key -> (N,) values.
        hardware: hardware axis key -> path inside SystemSpec.
        combos: structural combinations; ``combo_of`` (N,) indexes them.
        derived: derived per-point columns (``pool<i>_accelerator``, ``pool<i>_count``), logged
            with the axes as the point's parameters.
        point_hash: (N,) stable point identities.
        sweep_hash: identity of the whole sweep definition.
    """

    base_cfg: DictConfig
    fixed: tuple[str, ...]
    axes: tuple[Axis, ...]
    columns: dict[str, NDArray[Any]]
    hardware: dict[str, str]
    combos: list[Combo]
    combo_of: NDArray[np.int64]
    point_hash: list[str]
    sweep_hash: str
    derived: dict[str, NDArray[Any]] = dataclasses.field(default_factory=dict)
    unused_file_axes: dict[str, str] = dataclasses.field(default_factory=dict)
    group_cfgs: dict[str, DictConfig] = dataclasses.field(default_factory=dict)

    def _headline_values(self) -> dict[str, dict[str, str]]:
        """:data:`FIXED_KEYS` not swept -> {config-group choice: value} over the configs the
        points start from: the base config, or with config-group axes the config of each
        distinct choice of them (``parallel=megatron_tp8_pp8`` sets ``parallel.pp=8``)."""
        swept = set(self.param_keys)
        cfgs = self.group_cfgs or {"": self.base_cfg}
        out: dict[str, dict[str, str]] = {}
        for key in FIXED_KEYS:
            if key in swept or _is_swept_group(key, swept):
                continue
            values = {label: str(v) for label, cfg in cfgs.items()
                      if (v := OmegaConf.select(cfg, key)) is not None}
            if values:
                out[key] = values
        return out

    @property
    def fixed_values(self) -> dict[str, str]:
        """The headline keys every point shares (:data:`FIXED_KEYS` not swept, and set alike
        by every choice of the config-group axes), as composed."""
        return {k: next(iter(v.values())) for k, v in self._headline_values().items()
                if len(set(v.values())) == 1}

    @property
    def per_group_values(self) -> dict[str, dict[str, str]]:
        """The headline keys a config-group axis sets differently per choice: key ->
        {choice (``parallel=megatron_tp8_pp8``): value}."""
        return {k: v for k, v in self._headline_values().items() if len(set(v.values())) > 1}

    def fixed_note(self) -> str:
        """One line for the terminal: what stays fixed, the headline keys the config-group
        axes set per choice, and the sweep file's entries that a command line naming axes
        left out (they are not merged: ``sweep=<name>`` keeps them)."""
        text = "fixed: " + ", ".join(f"{k}={v}" for k, v in self.fixed_values.items())
        varying = self.per_group_values
        if varying:
            labels = list(next(iter(varying.values())))
            text += ("\n  (set by the config-group axes, per choice: " + "; ".join(
                label + ": " + ", ".join(f"{k}={v[label]}" for k, v in varying.items()
                                         if label in v) for label in labels) + ")")
        if self.unused_file_axes:
            name = self.base_cfg.sweep.name
            text += ("\n  (the command line names axes, so conf/sweep/" + str(name) + ".yaml is "
                     "not used: " + ", ".join(f"{k}={v}" for k, v in self.unused_file_axes.items())
                     + f"; add sweep={name} to sweep its axes with yours, or set those keys)")
        return text

    def piece_overlap_points(self) -> int:
        """Points on plans whose TP overlap, CP rings or chunked all-to-alls are costed as pieces
        (``parallel.overlap_blocks`` false, calibrated fidelity): a point there costs
        ~40-1,000x more than as closed-form blocks."""
        slow = np.asarray([_piece_overlap(c) for c in self.combos], dtype=bool)
        return int(slow[self.combo_of].sum()) if slow.any() else 0

    @property
    def param_keys(self) -> list[str]:
        """The point's parameter columns: the axis keys, then the derived columns."""
        return [a.key for a in self.axes] + [k for k in self.derived if k not in self.columns]

    @property
    def param_columns(self) -> dict[str, NDArray[Any]]:
        """Axis and derived columns by key (what a results row records of its design point)."""
        extra = {k: v for k, v in self.derived.items() if k not in self.columns}
        return {**self.columns, **extra}

    @property
    def num_points(self) -> int:
        """N, the number of design points."""
        return len(self.point_hash)


def _sha(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()[:16]


def _sim_config_hash(cfg: DictConfig | dict[str, Any], fidelity: str) -> str:
    """sha of the resolved simulation groups and the fidelity (``cfg``: the composed config,
    or its spec groups as plain resolved dicts: the same tree, so the same hash)."""
    if isinstance(cfg, DictConfig):
        tree = {g: OmegaConf.to_container(cfg[g], resolve=True) for g in _SIM_GROUPS if g in cfg}
    else:
        tree = {g: cfg[g] for g in _SIM_GROUPS if g in cfg}
    tree["fidelity"] = fidelity
    return _sha(json.dumps(tree, sort_keys=True, default=str))


def _structure(model: Any, parallel: Any, system: Any) -> str:
    from simcore.api import structure_key

    return repr(structure_key(model, parallel, system))


def _hardware_axes(base: Combo, axes: Sequence[Axis], columns: dict[str, NDArray[Any]]) -> dict[str, str]:
    """Axis key -> SystemSpec path for system leaves that keep the graph structure."""
    from simcore.api import structure_key

    out: dict[str, str] = {}
    base_key = structure_key(base.model, base.parallel, base.system)
    for ax in axes:
        if ax.is_group or not ax.key.startswith("system."):
            continue
        path = tuple(ax.key.split(".")[1:])
        check_not_folded(ax.key, ax.expr, bool(base.system.scaleout_dims))
        tp = field_type(type(base.system), path)
        if not isinstance(tp, type) or dataclasses.is_dataclass(tp):
            continue  # not a scalar leaf (a sub-spec, a list of dimensions): composed per value
        col = coerce_column(columns[ax.key], tp, ax.key)
        columns[ax.key] = col
        distinct = np.unique(col)
        ok = (valid_in_ranges([base.system], path[0], [path[1:]],
                              np.zeros(distinct.shape[0], dtype=np.int64), distinct[:, None])
              if len(path) == 2 else None)
        if ok is not None:  # a listed leaf, checked as one column
            if not ok.all():  # the first bad value (sorted) gets the spec's own error
                set_path(base.system, path, distinct[int(np.argmin(ok))].item())
            # never structural: the key reads the cluster's shape and pools, which a sub-spec
            # leaf of a system without pools does not touch (tests/search/sweep/test_plan.py)
            out[ax.key] = ".".join(path)
            continue
        structural = False
        for value in distinct.tolist():
            spec = set_path(base.system, path, value)  # raises InputError on a bad value
            structural |= structure_key(base.model, base.parallel, spec) != base_key
        if not structural:
            out[ax.key] = ".".join(path)
    return out


def _kind(value: object) -> str:
    if isinstance(value, bool | int | float):
        return type(value).__name__
    return "text"


def _check_mixed_axes(compose: Composer, fixed: tuple[str, ...], axes: Sequence[Axis],
                      base: Combo) -> None:
    """Check each value alone of an axis whose values are of different kinds (``2,abc``,
    ``2,4.5``, ``true,maybe``), so that an error names the value as written: such an axis
    becomes one column of a common type (text, or floats), and the first value of that column
    (``'2'``, ``2.0``, ``'True'``) would be reported instead of the offending one.

    A ``system.*`` leaf of the SystemSpec is checked as the hardware axis check types it
    (:func:`~search.config.build.coerce_column`), any other key as its combinations are (its
    group's schema and rules, on the config of the fixed overrides)."""
    derived: _Derived | None = None
    for ax in axes:
        if ax.values is None or ax.is_group or len({_kind(v) for v in ax.values}) < 2:
            continue
        tp = None
        if ax.key.startswith("system."):
            tp = field_type(type(base.system), tuple(ax.key.split(".")[1:]))
            if isinstance(tp, type) and dataclasses.is_dataclass(tp):
                tp = None
        for value in ax.values:
            if tp is not None:
                single = np.empty(1, dtype=object)
                single[0] = value
                try:
                    coerce_column(single if _kind(value) == "text" else np.asarray([value]), tp,
                                  ax.key)
                except InputError as err:  # named as written, not as a numpy scalar
                    raise InputError(err.key, value, err.rule) from None
                continue
            assert base.cfg is not None
            derived = derived or _Derived(compose, fixed, base.cfg)
            override = f"{ax.prefix}{ax.key}={format_value(value)}"
            if derived((override,)) is None:  # not applicable as a plain value: compose
                validate_config(compose((*fixed, override)))


def _combo(compose: Composer, overrides: tuple[str, ...], axis: bool = False,
           composed: DictConfig | dict[str, Any] | None = None,
           fidelity: str | None = None) -> Combo:
    """The composed, validated and built combination; with ``axis`` (a combination of swept
    values) a workload spec that breaks the model's rules gives an :class:`InvalidModel`.
    ``composed``: the config of ``overrides`` when the caller has already composed and
    validated it (composition is a pure function of the overrides), or its spec groups as
    plain resolved dicts with the config's ``fidelity``."""
    cfg = composed
    if cfg is None:
        cfg = compose(overrides)
        validate_config(cfg)
    if isinstance(cfg, DictConfig):
        fidelity = str(cfg.get("fidelity", "calibrated"))
    assert fidelity is not None
    kept = cfg if isinstance(cfg, DictConfig) else None
    if axis:
        try:
            build_model(cfg)
        except InputError as err:
            if "(limit " in err.rule:  # a resource bound (simcore.limits) a value alone breaks:
                raise  # refused before any work, as a fixed value is (README "Limits and bounds")
            invalid = InvalidModel(f"invalid_spec: {err}")
            return Combo(overrides, kept, invalid, build_parallel(cfg), build_system(cfg),
                         _sim_config_hash(cfg, fidelity), _sha(f"invalid|{overrides}"), fidelity)
    model, parallel, system = build_specs(cfg)
    key = _structure(model, parallel, system)
    batch_key = _sha(f"{model!r}|{parallel!r}|{key}|{fidelity}")
    return Combo(overrides, kept, model, parallel, system, _sim_config_hash(cfg, fidelity),
                 batch_key, fidelity)


def make_plan(compose: Composer, options: Callable[[str], list[str]], cli: Sequence[str]) -> SweepPlan:
    """Expand and validate a sweep (see module docstring).

    Args:
        compose: overrides -> composed config (Hydra compose API).
        options: config group -> its options (for ``glob``).
        cli: command-line overrides, sweep axes included.
    """
    probe = parse_overrides(cli, {}, options)  # fixed overrides select the sweep file
    base_cfg = compose(probe.fixed)
    validate_config(base_cfg)
    sweep = base_cfg.sweep
    file_axes = {str(k): str(v) for k, v in (sweep.get("axes") or {}).items()}
    unused: dict[str, str] = {}
    if probe.axes and not any(t.split("=", 1)[0] == "sweep" for t in probe.fixed):
        # axes on the command line replace the default sweep file's (fixed values included:
        # a preset may derive them, e.g. num_gpus of a device-pool cluster)
        cli_keys = {t.split("=", 1)[0].lstrip("+~") for t in cli}
        unused = {k: v for k, v in file_axes.items() if k not in cli_keys}
        file_axes = {}
    seed = int(sweep.seed)
    parsed = parse_overrides(cli, file_axes, options, seed)
    if parsed.fixed != probe.fixed:  # the sweep file also fixes single values
        base_cfg = compose(parsed.fixed)
        validate_config(base_cfg)
        sweep = base_cfg.sweep
    if sweep.mode == "random":
        columns = sample_random(parsed.axes, int(sweep.num_points), seed)
    elif sweep.mode == "sobol":
        columns = sample_sobol(parsed.axes, int(sweep.num_points), seed)
    else:
        columns = expand_grid(parsed.axes)
    n = len(next(iter(columns.values()))) if columns else 1
    base = _combo(compose, parsed.fixed, composed=base_cfg)
    _check_mixed_axes(compose, parsed.fixed, parsed.axes, base)
    hardware = _hardware_axes(base, parsed.axes, columns)
    structural = [ax.key for ax in parsed.axes if ax.key not in hardware]
    prefixes = {ax.key: ax.prefix for ax in parsed.axes if ax.prefix}
    combo_of, combos, group_cfgs = _combos(compose, parsed.fixed, structural, columns, n, base,
                                           prefixes)
    hashes = _point_hashes(combos, combo_of, [columns[k] for k in hardware])
    sim_fixed = [t for t in parsed.fixed
                 if t.lstrip("+~").split("=")[0].split(".")[0] not in _RUN_GROUPS]
    ident = {"fixed": sorted(sim_fixed), "axes": [a.expr for a in parsed.axes],
             "mode": str(sweep.mode), "seed": seed, "n": n, "base": base.config_hash}
    return SweepPlan(base_cfg, parsed.fixed, parsed.axes, columns, hardware, combos, combo_of,
                     hashes, _sha(json.dumps(ident, sort_keys=True)),
                     pool_columns([c.system for c in combos], combo_of), unused, group_cfgs)


#: keys a sweep's terminal header reports as fixed when they are not swept
FIXED_KEYS = ("workload.name", "system.name", "system.num_gpus", "parallel.global_batch",
              "parallel.micro_batch", "parallel.tp", "parallel.pp", "fidelity")


def _is_swept_group(key: str, swept: set[str]) -> bool:
    """``workload.name`` is swept when the ``workload`` group is an axis."""
    return key.endswith(".name") and key.rsplit(".", 1)[0] in swept


def pool_columns(systems: Sequence[Any], index: NDArray[np.int64]) -> dict[str, NDArray[Any]]:
    """``pool<i>_accelerator`` (preset name) and ``pool<i>_count`` (accelerators) per point,
    point ``j`` being ``systems[index[j]]``; empty when every system is one device pool."""
    width = max((s.num_pools for s in systems), default=1)
    if width < 2:
        return {}
    cols: dict[str, NDArray[Any]] = {}
    for i in range(width):
        names = np.asarray([s.devices[i].accelerator.name if i < s.num_pools else ""
                            for s in systems], dtype=object)
        counts = np.asarray([s.devices[i].count if i < s.num_pools else 0 for s in systems],
                            dtype=np.int64)
        cols[f"pool{i}_accelerator"] = names[index]
        cols[f"pool{i}_count"] = counts[index]
    return cols


def _combos(compose: Composer, fixed: tuple[str, ...], structural: list[str],
            columns: dict[str, NDArray[Any]], n: int, base: Combo,
            prefixes: dict[str, str] | None = None,
            ) -> tuple[NDArray[np.int64], list[Combo], dict[str, DictConfig]]:
    """(combination of each point, the combinations, the config composed per distinct
    config-group choice of the axes, labelled by its overrides: empty without such axes).
    ``prefixes``: axis key -> ``+`` / ``++`` as written (an addition stays one per value)."""
    prefixes = prefixes or {}
    if not structural:
        return np.zeros(n, dtype=np.int64), [base], {}
    keys = [tuple(columns[k][i] for k in structural) for i in range(n)]
    index: dict[tuple[Any, ...], int] = {}
    combo_of = np.empty(n, dtype=np.int64)
    for i, key in enumerate(keys):
        combo_of[i] = index.setdefault(key, len(index))
    combos = []
    shares = [k for k in structural if k.startswith("parallel.work_shares.")]
    if shares and "parallel.work_split" in structural:
        raise InputError(shares[0], "axis", "per-pool work shares imply "
                         "parallel.work_split=explicit; sweep the split in another sweep "
                         "(points with another split would repeat each other)")
    assert base.cfg is not None
    derived = _Derived(compose, fixed, base.cfg)
    for key in index:
        # per-pool share axes (parallel.work_shares.<i>) compose as one list, split explicit
        values = gather_work_shares(dict(zip(structural, key, strict=True)), base.cfg)
        extra = tuple(f"{prefixes.get(k, '')}{k}={format_value(v)}" for k, v in values.items())
        try:
            combos.append(_combo(compose, (*fixed, *extra), axis=True, composed=derived(extra),
                                 fidelity=derived.fidelity))
        except InputError as err:
            raise _combination_error(err, extra, derived) from None
    return combo_of, combos, {" ".join(k): v for k, v in derived.by_groups.items()}


def _combination_error(err: InputError, extra: tuple[str, ...], derived: _Derived) -> InputError:
    """``err`` of one structural combination (``extra``: its axis values), named by the value
    that caused it: a value override whose key the combination's config does not have gets
    the key, and what is there instead (an index beyond a list: the list's length; a key not
    in a section: the section's keys) in place of Hydra's text; and a combination choosing
    config-group options (``workload=resnet50``) names them, so one bad combination does not
    read as a fault of the whole sweep."""
    groups = tuple(t for t in extra if "." not in t.split("=", 1)[0])
    values = [t for t in extra if t not in groups and not t.startswith(("+", "~"))]
    start = derived.base_cfg
    if groups:  # the config of the combination's choices alone (an error path: compose)
        with contextlib.suppress(InputError):
            start = derived.compose((*derived.fixed, *groups))
    where = f" (with {', '.join(groups)})" if groups else ""
    for text in values:
        key, _, value = text.partition("=")
        if err.key not in (key, "overrides"):
            continue
        missing = _missing_path(start, key)
        if missing is not None:
            return InputError(key, value, missing + where)
    return InputError(err.key, err.value, err.rule + where) if where else err


def _missing_path(cfg: Any, key: str) -> str | None:
    """Why dotted ``key`` is not in ``cfg`` (None when it is)."""
    from omegaconf import ListConfig

    parts = key.split(".")
    node: Any = cfg
    for i, part in enumerate(parts):
        prefix = ".".join(parts[:i]) or "the config"
        if isinstance(node, ListConfig):
            if not part.isdigit() or int(part) >= len(node):
                return (f"index {part} out of range: {prefix} has {len(node)} entr"
                        + ("y (index 0)" if len(node) == 1 else
                           f"ies (indices 0-{len(node) - 1})" if node else "ies"))
            node = node._get_node(int(part))
        elif isinstance(node, DictConfig):
            if part not in node:
                return f"{prefix} has no key {part!r}; its keys: {', '.join(map(str, node))}"
            node = node._get_node(part)
        else:
            return f"{prefix} is a value, not a section"
    return None


class _Derived:
    """The validated configs of a sweep's structural combinations, from the config of its
    fixed overrides (``base_cfg``) without composing each:

    - plain values on spec groups (``parallel.tp=4``) are set in the base's spec groups as
      plain dicts (:func:`search.config.build.sections_with`): what resolving the updated
      config gives, when no group of the base config holds an interpolation; only the groups
      they change are checked (~4 ms per combination);
    - otherwise Hydra composes the fixed overrides and ``extra``'s config group choices, once
      per distinct choice, and the plain values are applied to a copy of that config as Hydra
      applies them (:func:`search.config.compose.with_value_overrides`; ~13-19 ms);
    - None when a value cannot be applied so: :func:`_combo` then composes the whole, and
      reports Hydra's error (~0.15 s).
    """

    def __init__(self, compose: Composer, fixed: tuple[str, ...], base_cfg: DictConfig) -> None:
        self.compose, self.fixed, self.base_cfg = compose, fixed, base_cfg
        self.fidelity = str(base_cfg.get("fidelity", "calibrated"))
        plain = plain_sections(base_cfg, whole=True)
        # the plain groups hash as the config does when they hold every simulation group it has
        hashes_alike = plain is not None and all(g in plain for g in _SIM_GROUPS if g in base_cfg)
        self.plain = plain if hashes_alike else None
        self.by_groups: dict[tuple[str, ...], DictConfig] = {}

    def __call__(self, extra: tuple[str, ...]) -> DictConfig | dict[str, Any] | None:
        others, values = split_value_overrides(extra)
        items = value_items(values) if not others and self.plain is not None else None
        if items is not None:
            assert self.plain is not None
            sections = sections_with(self.plain, items)
            if sections is not None:
                validate_config(sections, {key.split(".")[0] for key, _ in items})
                return sections
        start = self.base_cfg
        if others:
            if others not in self.by_groups:
                self.by_groups[others] = self.compose((*self.fixed, *others))
            start = self.by_groups[others]
        cfg = with_value_overrides(start, values)
        if cfg is not None:
            validate_config(cfg)
        return cfg


#: points hashed at a time: the texts of a chunk are made and dropped before the next, so a
#: sweep of millions of points does not hold every text at once (2,000,000 random interval
#: points: max RSS after planning 686 -> 351 MiB, the same hashes; scripts/bench_continuous.py)
_HASH_CHUNK = 1 << 18


def _point_hashes(combos: list[Combo], combo_of: NDArray[np.int64], hw: list[NDArray[Any]]) -> list[str]:
    """sha1 of ``<combo config hash>|<repr of each hardware value>`` per point (first 16 hex
    digits). The reprs are formed once per distinct value of a column within a chunk of
    :data:`_HASH_CHUNK` points (a grid has a few dozen per axis), not once per point."""
    config_hashes = np.asarray([c.config_hash for c in combos], dtype=object)
    out: list[str] = []
    for start in range(0, combo_of.shape[0], _HASH_CHUNK):
        part = slice(start, start + _HASH_CHUNK)
        prefix = config_hashes[combo_of[part]].tolist()
        if not hw:
            out += [hashlib.sha1(f"{p}|".encode()).hexdigest()[:16] for p in prefix]
            continue
        texts = map("|".join, zip(prefix, *(_reprs(col[part]) for col in hw), strict=True))
        out += [hashlib.sha1(t.encode()).hexdigest()[:16] for t in texts]
    return out


def _reprs(col: NDArray[Any]) -> list[str]:
    """``repr`` of each element's Python value. Numeric columns: one repr per distinct bit
    pattern (so 0.0 and -0.0, or two NaN payloads, keep their own reprs)."""
    if col.dtype.kind not in "biuf":
        return [repr(v) for v in col.tolist()]
    bits = col.view(f"u{col.dtype.itemsize}") if col.dtype.kind == "f" else col
    _, first, inverse = np.unique(bits, return_index=True, return_inverse=True)
    table = np.asarray([repr(v) for v in col[first].tolist()], dtype=object)
    return table[inverse.reshape(-1)].tolist()
