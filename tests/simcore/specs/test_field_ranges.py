"""FIELD_RANGES and ONE_POSITIVE (simcore/specs/system.py) against the specs' own checks.

A column of values for a listed field is checked at once against its range
(``search.run.batch.materialize_systems``); that is only right if the range accepts exactly
the values the spec's checks accept, with every other field unchanged. These tests set each
listed field to values around every bound on several valid specs and compare.
"""

from __future__ import annotations

import math
from dataclasses import fields, replace

import pytest

from simcore.errors import InputError
from simcore.specs.system import (
    FIELD_RANGES,
    ONE_POSITIVE,
    AcceleratorSpec,
    CalibrationSpec,
    TopologyDimSpec,
)

EDGES = [-math.inf, -1e300, -2.0, -1.0, -1e-300, -0.0, 0.0, 5e-324, 1e-300, 0.5, 0.999999,
         1.0, 1.0000001, 2.0, 1e300, math.inf, math.nan, -3, 0, 1, 3]

BASES = {
    AcceleratorSpec: [AcceleratorSpec(), AcceleratorSpec(peak_tflops_fp16=0.0),
                      AcceleratorSpec(peak_tflops_bf16=0.0)],
    TopologyDimSpec: [TopologyDimSpec(), TopologyDimSpec(latency_ns=0.0)],
    CalibrationSpec: [CalibrationSpec(), CalibrationSpec(switch_allreduce_gain=1.0,
                                                         scaleup_pair_loss=0.5)],
}


def _accepted(base: object, name: str, value: float) -> bool:
    """What the spec's checks say (an accelerator checks itself when built; a topology
    dimension and a calibration when the system validates them)."""
    try:
        spec = replace(base, **{name: value})  # type: ignore[type-var]
        if hasattr(spec, "validate"):
            spec.validate("system.x.")
    except InputError:
        return False
    return True


def _in_range(base: object, name: str, value: float) -> bool:
    """What the table says."""
    low, low_in, high, high_in = FIELD_RANGES[type(base)][name]
    v = float(value)
    ok = math.isfinite(v) and (v >= low if low_in else v > low) and (
        v <= high if high_in else v < high)
    for rule in ONE_POSITIVE.get(type(base), ()):
        if name in rule:
            ok = ok and any((v if f == name else getattr(base, f)) > 0 for f in rule)
    return ok


@pytest.mark.parametrize("cls", list(BASES))
def test_every_listed_range_accepts_what_the_spec_accepts(cls: type) -> None:
    checked = 0
    for base in BASES[cls]:
        for name in FIELD_RANGES[cls]:
            for value in EDGES:
                assert _accepted(base, name, value) == _in_range(base, name, value), (
                    cls.__name__, base, name, value)
                checked += 1
    assert checked >= len(FIELD_RANGES[cls]) * len(EDGES)


@pytest.mark.parametrize("cls", list(BASES))
def test_every_float_field_is_listed(cls: type) -> None:
    """A float field missing from the table is only slower (checked one value at a time);
    a listed field that is not a float would be copied as a float."""
    floats = {f.name for f in fields(cls) if isinstance(getattr(cls(), f.name), float)}
    assert set(FIELD_RANGES[cls]) == floats
