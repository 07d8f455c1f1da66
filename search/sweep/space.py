"""Sweep spaces: Hydra override grammar -> axes -> grid or random design points.

Model (DESIGN.md "User-facing contract", ``simsweep sweep``): a sweep is written in Hydra's own
override grammar (https://hydra.cc/docs/advanced/override_grammar/extended/), parsed by Hydra's
``OverridesParser``: ``key=1,2,4`` / ``choice(...)`` (enumerated), ``range(start,stop,step)``
(enumerated, stop excluded), ``glob(*)`` on a config group (its options), ``interval(a,b)``
(continuous; random mode only; ``int(interval(...))`` draws integers, ``tag(log, interval(...))``
draws log-uniformly) and ``shuffle(...)`` (order permuted with the sweep seed).

Grid mode is the Cartesian product of the enumerated axes, first axis slowest (the order of
Hydra's basic sweeper); random mode draws ``num_points`` points, every axis independently uniform,
from a seeded generator, so the same seed gives the same points; sobol mode takes the first
``num_points`` points of a scrambled Sobol' sequence over all axes at once (Owen-scrambled,
``scipy.stats.qmc.Sobol``; Sobol' 1967, Owen 1998): a low-discrepancy design that covers the
space more evenly than independent draws of the same count (lowest discrepancy at a power of
two), the design-of-experiments choice for a hardware sweep of a fixed budget. Points are
returned as columns (one numpy array per axis), never as one dict per point, so 10^5-10^6
points stay cheap.
"""

from __future__ import annotations

import math
import random
import re
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from simcore.errors import InputError
from simcore.limits import check_number, limit

__all__ = ["Axis", "OverrideText", "SweepPlanInput", "expand_grid", "format_value",
           "parse_overrides", "sample_random", "sample_sobol"]


@dataclass(frozen=True)
class Axis:
    """One sweep axis.

    Attributes:
        key: config key (``parallel.tp``) or config group (``system``) it sets.
        expr: the sweep expression as written (for messages and hashes).
        values: enumerated values in sweep order; None for an interval.
        low, high: interval bounds (inclusive high for integer intervals).
        integer: interval draws integers.
        log: interval draws log-uniformly.
        is_group: the key selects a config-group option rather than a value.
        prefix: ``+`` or ``++`` as written (``+system.scaleout_dims=...``: an addition), kept
            in each value's override.
    """

    key: str
    expr: str
    values: tuple[object, ...] | None = None
    low: float = 0.0
    high: float = 0.0
    integer: bool = False
    log: bool = False
    is_group: bool = False
    prefix: str = ""

    @property
    def size(self) -> int:
        """Number of enumerated values (0 for an interval)."""
        return 0 if self.values is None else len(self.values)


@dataclass(frozen=True)
class SweepPlanInput:
    """Overrides split into fixed (single-valued, passed to compose) and swept axes."""

    fixed: tuple[str, ...]
    axes: tuple[Axis, ...]


def _parser() -> Any:
    from hydra.core.override_parser.overrides_parser import OverridesParser

    return OverridesParser.create()


def _parse_one(text: str) -> Any:
    from hydra.errors import HydraException

    try:
        return _parser().parse_override(text)
    except HydraException as err:
        rule = str(err).splitlines()[0]
        raise InputError("override", text, f"not valid Hydra override grammar: {rule}") from None


def _axis_from_override(ov: Any, text: str, options: Callable[[str], list[str]], seed: int) -> Axis:
    from hydra.core.override_parser.types import (
        ChoiceSweep,
        Glob,
        IntervalSweep,
        OverrideType,
        RangeSweep,
    )

    key = ov.key_or_group
    is_group = bool(options(key))
    prefix = {OverrideType.ADD: "+", OverrideType.FORCE_ADD: "++"}.get(ov.type, "")
    val = ov.value()
    if isinstance(val, IntervalSweep):
        integer = isinstance(val.start, int) and isinstance(val.end, int)
        low, high = float(val.start or 0.0), float(val.end or 0.0)
        if not low < high or ("log" in val.tags and low <= 0):
            raise InputError(key, text, "interval(low, high) needs low < high (and low > 0 for log)")
        return Axis(key, text, None, low, high, integer, "log" in val.tags, prefix=prefix)
    if isinstance(val, Glob):
        if not is_group:
            raise InputError(key, text, "glob(...) selects options of a config group only")
        values: list[object] = list(val.filter(sorted(options(key))))
    elif isinstance(val, (ChoiceSweep, RangeSweep)):
        if isinstance(val, RangeSweep):
            _check_range(key, text, val)
        state = random.getstate()  # Hydra shuffles with `random`: seed it, then restore
        random.seed(seed)
        values = list(ov.sweep_iterator())
        random.setstate(state)
    else:
        raise InputError(key, text, "unsupported sweep expression")
    if not values:
        raise InputError(key, text, "sweep axis has no values")
    if len(set(map(repr, values))) != len(values):
        raise InputError(key, text, "sweep axis repeats a value")
    return Axis(key, text, tuple(values), is_group=is_group, prefix=prefix)


def _check_range(key: str, text: str, val: Any) -> None:
    """``range(start, stop, step)``: finite numbers, step != 0, at most ``points`` values,
    counted before Hydra enumerates them (a zero step would never end, 1e8 values fill memory)."""
    start, stop = val.start, val.stop
    step = 1 if val.step is None else val.step
    for name, num in (("start", start), ("stop", stop), ("step", step)):
        check_number(f"{key}.range.{name}", num)
    if step == 0:
        raise InputError(key, text, "range(start, stop, step) needs step != 0")
    count = max(0, math.ceil((stop - start) / step))
    if count > limit("points"):
        raise InputError(key, text, f"range has {count} values, more than {limit('points'):g} "
                         "(limit points, SIMSWEEP_MAX_POINTS)")


def parse_overrides(
    cli: Sequence[str],
    file_axes: Mapping[str, str],
    options: Callable[[str], list[str]],
    seed: int = 0,
) -> SweepPlanInput:
    """Split overrides into fixed ones and sweep axes.

    Args:
        cli: command-line overrides in Hydra grammar (``a.b=1``, ``a.b=1,2``, ``group=x``).
        file_axes: ``sweep.axes`` of the sweep file (key -> expression); a command-line override
            of the same key replaces it (as Hydra's sweeper does).
        options: config group name -> its options ([] when the key is not a group).
        seed: seed for ``shuffle(...)``.

    Raises:
        InputError: a malformed override, an empty or repeated axis, glob on a non-group.
    """
    parsed = [(_parse_one(text), text) for text in cli]
    _refuse_repeated_axes(parsed)
    cli_keys = {ov.key_or_group for ov, _ in parsed}
    for key, expr in file_axes.items():
        if key not in cli_keys:
            text = f"{key}={expr}"
            parsed.append((_parse_one(text), text))
    fixed: list[str] = []
    axes: list[Axis] = []
    for ov, text in parsed:
        if ov.is_sweep_override():
            axes.append(_axis_from_override(ov, text, options, seed))
        else:
            fixed.append(text)
    return SweepPlanInput(tuple(fixed), tuple(axes))


def _refuse_repeated_axes(parsed: Sequence[tuple[Any, str]]) -> None:
    """A key given twice on the command line where either is a sweep axis
    (``parallel.tp=1,2 parallel.tp=4``) is an error naming both. Hydra applies repeated
    overrides in order, the last winning, and its multirun sweeper takes the product of both:
    one axis would be silently lost (or every point repeated). Two single values keep Hydra's
    rule (the last wins; the sweep's ``fixed:`` line shows it); a deletion (``~key``) may
    precede its key."""
    from hydra.core.override_parser.types import OverrideType

    seen: dict[str, tuple[Any, str]] = {}
    for ov, text in parsed:
        if ov.type == OverrideType.DEL:
            continue
        key = ov.key_or_group
        first = seen.setdefault(key, (ov, text))
        if first[0] is not ov and (first[0].is_sweep_override() or ov.is_sweep_override()):
            raise InputError(key, text.split("=", 1)[1] if "=" in text else text,
                             f"given twice on the command line ({first[1]} and {text}); one "
                             "would silently replace the other: give the key once (a list of "
                             "values sweeps it)")


_PLAIN = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-./]*$")


class OverrideText(str):
    """A list or dictionary axis value as its column holds it: its override text
    (:func:`format_value`), written back verbatim, where a plain string is quoted."""

    __slots__ = ()


def format_value(value: Any) -> str:
    """A Python value as a Hydra override value (quoted when it is not a plain token; lists
    and dictionaries in Hydra's ``[a,b]`` / ``{key:value}`` grammar)."""
    if isinstance(value, OverrideText):
        return str.__str__(value)
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        return repr(float(value))
    if isinstance(value, (tuple, list)):
        return "[" + ",".join(format_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ",".join(f"{_format_key(k)}:{format_value(v)}" for k, v in value.items()) + "}"
    text = str(value)
    if _PLAIN.match(text) and text.lower() not in {"true", "false", "null"}:
        return text
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _format_key(key: object) -> str:
    """A dictionary key as Hydra's grammar takes it: a plain name, unquoted."""
    text = str(key)
    if not _PLAIN.match(text):
        raise InputError(text, "dictionary key", "a key of a dictionary value must be a plain "
                         "name (letters, digits, _ - . /)")
    return text


def _column(values: Sequence[object]) -> NDArray[np.generic]:
    """One typed column: bool, int64, float64 or object (strings / mixed)."""
    if all(isinstance(v, bool) for v in values):
        return np.asarray(values, dtype=bool)
    if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return np.asarray(values, dtype=np.int64)
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        return np.asarray(values, dtype=np.float64)
    out = np.empty(len(values), dtype=object)
    out[:] = [v if isinstance(v, str)
              else OverrideText(format_value(v)) if isinstance(v, (list, tuple, Mapping))
              else str(v) for v in values]
    return out


def expand_grid(axes: Sequence[Axis], max_points: int | None = None) -> dict[str, NDArray[np.generic]]:
    """Cartesian product of enumerated axes as columns (first axis slowest).

    The product of the axis sizes is checked against ``max_points`` (default: the ``points``
    limit) before anything is expanded."""
    max_points = int(limit("points")) if max_points is None else max_points
    for ax in axes:
        if ax.values is None:
            raise InputError(ax.key, ax.expr, "interval(...) cannot be enumerated: use sweep.mode=random (or sobol) or range(...)")
    sizes = [ax.size for ax in axes]
    total = math.prod(sizes)
    if total > max_points:
        raise InputError("sweep.axes", total, f"grid has more than {max_points} points")
    if not axes:
        return {}
    idx = np.indices(sizes, dtype=np.int64).reshape(len(axes), -1)
    return {ax.key: _column(ax.values)[idx[i]] for i, ax in enumerate(axes)}  # type: ignore[arg-type]


def sample_random(axes: Sequence[Axis], num_points: int, seed: int) -> dict[str, NDArray[np.generic]]:
    """``num_points`` independent uniform draws per axis from a generator seeded with ``seed``."""
    check_number("sweep.num_points", num_points, lo=1, hi=limit("points"), integer=True)
    rng = np.random.default_rng(seed)
    cols: dict[str, NDArray[np.generic]] = {}
    for ax in axes:
        if ax.values is not None:
            cols[ax.key] = _column(ax.values)[rng.integers(0, ax.size, num_points)]
        elif ax.integer:
            if ax.log:
                draw = np.exp(rng.uniform(math.log(ax.low), math.log(ax.high + 1), num_points))
                cols[ax.key] = np.minimum(np.floor(draw), ax.high).astype(np.int64)
            else:
                cols[ax.key] = rng.integers(int(ax.low), int(ax.high) + 1, num_points)
        elif ax.log:
            cols[ax.key] = np.exp(rng.uniform(math.log(ax.low), math.log(ax.high), num_points))
        else:
            cols[ax.key] = rng.uniform(ax.low, ax.high, num_points)
    return cols


def sample_sobol(axes: Sequence[Axis], num_points: int, seed: int) -> dict[str, NDArray[np.generic]]:
    """The first ``num_points`` points of an Owen-scrambled Sobol' sequence in as many
    dimensions as ``axes`` (seeded with ``seed``), each coordinate u in [0, 1) mapped to its
    axis: an enumerated axis takes value ``floor(u * size)``, an interval ``low + u * (high -
    low)`` (in log space with ``tag(log, ...)``; an integer interval the floor over
    ``high - low + 1`` values)."""
    from scipy.stats import qmc

    check_number("sweep.num_points", num_points, lo=1, hi=limit("points"), integer=True)
    if not axes:
        return {}
    if len(axes) > qmc.Sobol.MAXDIM:
        raise InputError("sweep.axes", len(axes), f"sobol mode takes at most {qmc.Sobol.MAXDIM} "
                         "axes (the dimensions of scipy's Sobol' direction numbers): use "
                         "sweep.mode=random")
    sampler = qmc.Sobol(d=len(axes), scramble=True, seed=seed)
    with warnings.catch_warnings():  # a count that is not a power of two is allowed (documented)
        warnings.filterwarnings("ignore", message=".*balance properties of Sobol", category=UserWarning)
        u = sampler.random(num_points)
    cols: dict[str, NDArray[np.generic]] = {}
    for j, ax in enumerate(axes):
        col = u[:, j]
        if ax.values is not None:
            idx = np.minimum((col * ax.size).astype(np.int64), ax.size - 1)
            cols[ax.key] = _column(ax.values)[idx]
        elif ax.integer:
            low, high = int(ax.low), int(ax.high)
            if ax.log:
                draw = np.exp(math.log(low) + col * (math.log(high + 1) - math.log(low)))
                cols[ax.key] = np.minimum(np.floor(draw), high).astype(np.int64)
            else:
                cols[ax.key] = np.minimum(low + np.floor(col * (high - low + 1)), high).astype(np.int64)
        elif ax.log:
            cols[ax.key] = np.exp(math.log(ax.low) + col * (math.log(ax.high) - math.log(ax.low)))
        else:
            cols[ax.key] = ax.low + col * (ax.high - ax.low)
    return cols
