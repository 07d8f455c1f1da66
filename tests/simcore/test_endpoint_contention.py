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


def test_sm_share_limits_the_collectives_own_rate() -> None:
    # ACE §2.3(b): R_base <= k r. 32 of A100's 108 SMs at 10 GB/s each drive 324 GB/s.
    assert EndpointSpec("endpoint", comm_sm_fraction=0.3).sm_collective_Bps == pytest.approx(
        0.3 * 108 * 10e9)
    # the paper's two baselines differ: with very few SMs the collectives starve the iteration
    many, few = _time("endpoint", comm_sm_fraction=0.30), _time("endpoint", comm_sm_fraction=0.01)
    assert few > many
    # a faster SM (per-SM collective throughput) lifts the starved baseline
    assert _time("endpoint", comm_sm_fraction=0.01, collective_GBps_per_sm=40.0) < few
    # the cap does not touch ACE (no SMs)
    assert _time("ace", collective_GBps_per_sm=1.0) == _time("ace")


def test_endpoint_needs_sms() -> None:
    with pytest.raises(InputError, match=r"system\.endpoint\.comm_sm_fraction=0"):
        EndpointSpec("endpoint", comm_sm_fraction=0.0)
    with pytest.raises(InputError, match=r"system\.endpoint\.sms=0"):
        EndpointSpec("endpoint", sms=0)
