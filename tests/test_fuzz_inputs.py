"""Bounded fuzzing (hypothesis) of the config / override surface and the ASTRA-sim parsers.

Property: any input either parses or raises :class:`InputError` naming a key; never another
exception, never a hang (each example has a deadline).
"""

from __future__ import annotations

import contextlib
import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simcore.emulator.inputs import read_network, read_system
from simcore.errors import InputError
from simcore.limits import load_json, load_yaml

CONF = Path(__file__).resolve().parents[1] / "conf"
FUZZ = settings(max_examples=60, deadline=2000, suppress_health_check=[HealthCheck.function_scoped_fixture])

numbers = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, 1, -1, 2**64 - 1, 2**63, 1e30, math.inf, -math.inf, math.nan]),
)
values = st.one_of(numbers, st.booleans(), st.text(max_size=8), st.none(), st.lists(numbers, max_size=3))


def _yaml_value(v: Any) -> str:
    if isinstance(v, float) and math.isnan(v):
        return ".nan"
    if isinstance(v, float) and math.isinf(v):
        return ".inf" if v > 0 else "-.inf"
    return json.dumps(v, allow_nan=False) if not isinstance(v, list) else "[" + ", ".join(map(_yaml_value, v)) + "]"


@FUZZ
@given(npus=values, bw=values, lat=values, topo=st.sampled_from(["Ring", "Switch", "FullyConnected", "Torus", "1"]))
def test_network_yaml_parses_or_names_a_key(tmp_path: Path, npus: Any, bw: Any, lat: Any, topo: str) -> None:
    path = tmp_path / "net.yml"
    path.write_text(f"topology: [{topo}]\nnpus_count: {_yaml_value(npus)}\n"
                    f"bandwidth: {_yaml_value(bw)}\nlatency: {_yaml_value(lat)}\n")
    try:
        spec = read_network(path)
    except InputError as err:
        assert str(path) in err.key
        return
    for dim in spec.dims:
        assert math.isfinite(dim.bandwidth_GBps) and math.isfinite(dim.latency_ns) and dim.npus_count >= 2


SYSTEM_KEYS = ["endpoint-delay", "local-reduction-delay", "preferred-dataset-splits", "active-chunks-per-dimension",
               "L", "o", "g", "G", "local-mem-bw", "peak-perf", "roofline-enabled", "model-shared-bus"]


@FUZZ
@given(changes=st.dictionaries(st.sampled_from(SYSTEM_KEYS), values, max_size=4))
def test_system_json_parses_or_names_a_key(tmp_path: Path, changes: dict[str, Any]) -> None:
    base = {"scheduling-policy": "LIFO", "collective-optimization": "baseline", "preferred-dataset-splits": 1,
            "all-reduce-implementation": ["ring"]}
    path = tmp_path / "sys.json"
    path.write_text(json.dumps({**base, **changes}))  # NaN / Infinity written as JSON extensions
    try:
        spec = read_system(path)
    except InputError as err:
        assert str(path) in err.key
        return
    for name in ("endpoint_delay_ns", "local_mem_bw_GBps", "peak_perf_TFLOPS", "loggp_L"):
        value = getattr(spec, name, 0)
        assert math.isfinite(value) and 0 <= value <= 2**53


@FUZZ
@given(text=st.text(alphabet='{}[]":,0123456789.eE+-NaInfity \n', max_size=200))
def test_json_loader_never_raises_anything_else(text: str) -> None:
    with contextlib.suppress(InputError):
        load_json(text, "f")


@FUZZ
@given(text=st.text(alphabet="&*ab: -[],{}\n.infa0123", max_size=200))
def test_yaml_loader_never_raises_anything_else(text: str) -> None:
    with contextlib.suppress(InputError):
        load_yaml(text, "f")


@pytest.fixture(scope="module")
def composed() -> Any:
    from search.config.compose import compose_session

    compose, options = compose_session(CONF)
    return compose, options


OVERRIDE_KEYS = ["system.num_gpus", "system.scaleup.latency_ns", "system.scaleout.bandwidth_GBps",
                 "parallel.tp", "parallel.global_batch", "workload.num_layers", "sweep.batch_size",
                 "sweep.flush_interval_s", "sweep.top_k", "ray.max_batch_retries", "ray.num_workers",
                 "tracking.request_timeout_s", "memory.latency_ns"]
override_values = st.one_of(
    st.sampled_from(["nan", "inf", "-inf", "-1", "0", "1e30", "1000000000", "2", "true", "'x'", "null",
                     "range(1,10,0)", "range(0,100000000)", "1,2", "[1]", "${oops}", "interval(5,1)"]),
    st.integers(min_value=-(10**12), max_value=10**12).map(str),
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pairs=st.lists(st.tuples(st.sampled_from(OVERRIDE_KEYS), override_values), min_size=1, max_size=3,
                      unique_by=lambda p: p[0]))
def test_overrides_validate_or_name_a_key(composed: Any, pairs: list[tuple[str, str]]) -> None:
    """Sweep planning (compose, validate, expand, build every point) of random overrides."""
    from search.sweep.plan import make_plan

    compose, options = composed
    cli = [f"{k}={v}" for k, v in pairs] + ["system.scaleup.bandwidth_GBps=300,600"]  # a 2-value axis
    try:
        plan = make_plan(compose, options, ["sweep.progress=false", *cli])
    except InputError as err:
        assert err.key and err.rule
        return
    assert 1 <= plan.num_points <= 10**7
