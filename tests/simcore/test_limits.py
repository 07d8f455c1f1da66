"""The limits layer: finiteness, ranges, JSON/YAML guards, and `require` rejecting NaN/inf."""

from __future__ import annotations

import math
import time

import pytest

from simcore.errors import InputError, require
from simcore.limits import LIMITS, check_number, limit, load_json, load_yaml
from simcore.specs.system import system_from_dict


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan])
def test_require_rejects_non_finite_even_when_the_rule_holds(value: float) -> None:
    with pytest.raises(InputError, match="k=.*must be a finite number"):
        require(True, "k", value, "must be > 0")


@pytest.mark.parametrize(("value", "kw", "rule"), [
    (math.inf, {}, "finite"), (True, {}, "number"), ("3", {}, "number"), (2.5, {"integer": True}, "integer"),
    (0, {"lo": 0, "lo_open": True}, "> 0"), (-1, {"lo": 0}, ">= 0"), (11, {"hi": 10}, "<= 10"),
])
def test_check_number_rules(value: object, kw: dict[str, object], rule: str) -> None:
    with pytest.raises(InputError, match=rule):
        check_number("x", value, **kw)  # type: ignore[arg-type]


def test_check_number_passes_in_range() -> None:
    assert check_number("x", 3, lo=0, hi=3, integer=True) == 3
    assert check_number("x", 4.0, integer=True) == 4.0


def test_limit_env_override(monkeypatch: pytest.MonkeyPatch) -> None:
    assert limit("points") == LIMITS["points"][0]
    monkeypatch.setenv("SIMSWEEP_MAX_POINTS", "10")
    assert limit("points") == 10
    monkeypatch.setenv("SIMSWEEP_MAX_POINTS", "nan")
    with pytest.raises(InputError, match="SIMSWEEP_MAX_POINTS"):
        limit("points")


@pytest.mark.parametrize(("text", "needle"), [
    ('{"a": {"b": NaN}}', "a.b"), ('[1, -Infinity]', "[1]"), ("[" * 200 + "]" * 200, "nested"),
    ("[" * 1_000_000, "nested"), ("{", "not valid JSON"),
])
def test_load_json_guards(text: str, needle: str) -> None:
    t0 = time.monotonic()
    with pytest.raises(InputError, match=needle.replace("[", r"\[").replace("]", r"\]")):
        load_json(text, "f")
    assert time.monotonic() - t0 < 5


def test_load_yaml_guards() -> None:
    assert load_yaml("a: &x [1, 2]\nb: *x\n", "f") == {"a": [1, 2], "b": [1, 2]}
    with pytest.raises(InputError, match="f:lat.*finite"):
        load_yaml("lat: .inf", "f")
    with pytest.raises(InputError, match="alias bomb"):
        load_yaml("a: &a [*a]", "f")
    laughs = "l0: &l0 [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 10) + "]\n" for i in range(1, 9))
    t0 = time.monotonic()
    with pytest.raises(InputError, match="alias bomb"):
        load_yaml(laughs, "f")
    assert time.monotonic() - t0 < 2


@pytest.mark.parametrize(("dim", "key"), [("scaleup", "latency_ns"), ("scaleout", "bandwidth_GBps")])
@pytest.mark.parametrize("value", [math.inf, math.nan])
def test_system_spec_rejects_non_finite_latency_and_bandwidth(dim: str, key: str, value: float) -> None:
    with pytest.raises(InputError, match=f"system.{dim}.{key}.*finite"):
        system_from_dict({dim: {"kind": "Switch", "size": 0, "bandwidth_GBps": 25.0, "latency_ns": 700.0,
                                key: value}})
