"""Checking a column of values for a system leaf at once, instead of one copy per value.

Model: a valid :class:`~simcore.specs.system.SystemSpec` with one numeric leaf of a sub-spec
changed (``scaleout.bandwidth_GBps``, ``accelerator.hbm_bandwidth_GBps``, a calibration
value) is valid exactly when the new value passes the rules that involve that leaf. For the
leaves listed in :data:`~simcore.specs.system.FIELD_RANGES` those rules are a range on the
leaf alone (plus the few :data:`~simcore.specs.system.ONE_POSITIVE` rules), so numpy decides
a whole column with a few comparisons. A random sweep over ``interval`` axes gives every point
its own value, where checking by copies (``set_path``: a ``dataclasses.replace`` and every
rule of the sub-spec and of the system, ~10-20 us) ran once per point, in the sweep's planning
and again in each batch's :func:`search.run.batch.materialize_systems`. A value the column
refuses still goes through the copy, so its error is the spec's own words.
``tests/simcore/specs/test_field_ranges.py`` holds the ranges to the specs' checks;
``tests/search/run/test_workers.py`` compares the systems and errors with full copies.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from simcore.specs.system import FIELD_RANGES, ONE_POSITIVE

__all__ = ["copy_with_leaves", "valid_in_ranges", "with_fields"]

#: the SystemSpec fields whose sub-specs have listed leaves
_HEADS = ("accelerator", "scaleup", "scaleout", "calibration")


def valid_in_ranges(bases: list[Any], head: str, paths: list[tuple[str, ...]],
                    base_of: NDArray[np.int64], values: NDArray[Any]) -> NDArray[np.bool_] | None:
    """Per row ``i``, whether setting ``values[i]`` (one per path) on field ``head`` of
    ``bases[base_of[i]]`` (at ``paths`` inside it, in order) gives a valid system; None when
    the column cannot decide it (then check each row by copying).

    Decidable when ``values`` is a numeric (int or float, not bool) array, every path is one
    float field of the sub-spec listed in :data:`~simcore.specs.system.FIELD_RANGES`, and no
    base has device pools or scale-out dims (whose normalization reads several fields). The
    bases are valid systems, so a row is valid exactly when each value is finite and in its
    field's range and each rule of :data:`~simcore.specs.system.ONE_POSITIVE` holds after each
    value is set, in order (``set_path`` sets them one by one and checks each copy)."""
    values = np.asarray(values)
    if head not in _HEADS or values.size == 0 or values.dtype.kind not in "iuf":
        return None
    values = values.astype(np.float64, copy=False).reshape(len(base_of), len(paths))
    used = np.unique(base_of).tolist()
    if any(bases[b].pools or bases[b].scaleout_dims for b in used):
        return None
    cls = type(getattr(bases[used[0]], head))
    ranges = FIELD_RANGES.get(cls, {})
    names = [path[0] if len(path) == 1 else "" for path in paths]
    if not all(n in ranges for n in names) or any(
            type(getattr(bases[b], head)) is not cls
            or any(type(getattr(getattr(bases[b], head), n)) is not float for n in names)
            for b in used):
        return None
    ok: NDArray[np.bool_] = np.asarray(np.isfinite(values).all(axis=1))
    for j, name in enumerate(names):
        low, low_in, high, high_in = ranges[name]
        col = values[:, j]
        ok &= (col >= low) if low_in else (col > low)
        ok &= (col <= high) if high_in else (col < high)
    for rule in ONE_POSITIVE.get(cls, ()):
        if not set(rule) & set(names):
            continue
        current = {f: np.array([float(getattr(getattr(b, head), f)) for b in bases])[base_of]
                   for f in rule}
        for j, name in enumerate(names):  # the rule holds after each set, as set_path checks
            if name in rule:
                current[name] = values[:, j]
                ok &= np.logical_or.reduce([current[f] > 0 for f in rule], axis=0)
    return ok


def copy_with_leaves(spec: Any, names: list[str], values: tuple[Any, ...]) -> Any:
    """A copy of the sub-spec ``spec`` with its float fields ``names`` set to ``values`` (as
    floats, as ``set_path`` converts a whole number for a float field), without running its
    checks: for values :func:`valid_in_ranges` accepted."""
    return with_fields(spec, {name: float(value) for name, value in zip(names, values, strict=True)})


def with_fields(base: Any, fields: dict[str, Any]) -> Any:
    """A copy of frozen dataclass ``base`` with ``fields`` set, without running its checks:
    for fields already checked against ``base`` (a slotted dataclass gets a checked
    ``replace``)."""
    if not fields:
        return base
    if not hasattr(base, "__dict__"):
        return replace(base, **fields)
    obj = object.__new__(type(base))
    obj.__dict__.update(base.__dict__)
    obj.__dict__.update(fields)
    return obj
