"""Endpoint contention and the ACE engine (system.endpoint; ACE §2.3)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from simcore.api import simulate_batch
from simcore.errors import InputError
from simcore.fidelity.contention import hbm_per_wire_byte
from simcore.ir.graph import CommType
from simcore.specs.endpoint import EndpointSpec
from simcore.specs.parallel import ParallelSpec
from simcore.specs.system import SystemSpec, system_from_dict
from simcore.workloads.cnn.spec import ResNetSpec


def _time(engine: str, **kw: float) -> float:
    system = replace(SystemSpec(num_gpus=16), endpoint=EndpointSpec(collective_engine=engine, **kw))
    res = simulate_batch(ResNetSpec(), ParallelSpec(micro_batch=32, global_batch=512), [system])
    return float(res.iteration_time_s[0])


def test_default_engine_keeps_the_fitted_model() -> None:
    assert _time("nccl") == float(simulate_batch(
        ResNetSpec(), ParallelSpec(micro_batch=32, global_batch=512),
        [SystemSpec(num_gpus=16)]).iteration_time_s[0])


def test_ideal_le_ace_le_endpoint() -> None:
    ideal, ace, endpoint = _time("ideal"), _time("ace"), _time("endpoint")
    assert ideal < ace < endpoint
    # more HBM bytes per network byte: slower
    assert _time("endpoint", hbm_bytes_per_reduce_byte=8.0) > endpoint


def test_memory_bytes_per_network_byte() -> None:
    ace, ep = EndpointSpec(collective_engine="ace"), EndpointSpec(collective_engine="endpoint")
    ar = int(CommType.ALL_REDUCE)
    assert hbm_per_wire_byte(ace, ar, 8) == pytest.approx(2.0 / (2 * 7 / 8))  # read + write once
    assert hbm_per_wire_byte(ep, ar, 8) == pytest.approx(3.5)  # (5 + 2) / 2 per ACE §2.3(a)


def test_engine_is_a_validated_system_key() -> None:
    s = system_from_dict({"endpoint": {"collective_engine": "ace", "ace_alu_GBps": 500.0}})
    assert s.endpoint.collective_engine == "ace"
    with pytest.raises(InputError, match=r"system\.endpoint\.collective_engine='gpu'"):
        system_from_dict({"endpoint": {"collective_engine": "gpu"}})
