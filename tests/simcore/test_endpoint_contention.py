"""Endpoint contention and the ACE engine (system.endpoint; ACE §2.3)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from simcore.api import compiled_workload, simulate_batch
from simcore.engine.evaluate import kernel_durations, template_durations
from simcore.errors import InputError
from simcore.fidelity.contention import (
    collective_stretch,
    compute_slowdown,
    hbm_per_wire_byte,
    memory_bound_fraction,
    overlapped_hbm_Bps,
)
from simcore.hardware.batch import SystemBatch
from simcore.ir.graph import CommType
from simcore.ir.ops import COMPUTE
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


def _batch(*endpoints: EndpointSpec) -> SystemBatch:
    return SystemBatch.from_specs([replace(SystemSpec(num_gpus=16), endpoint=e) for e in endpoints])


def test_kernel_classes_take_their_own_roof() -> None:
    """ACE §2.3(c): compute-bound kernels run on U - k SMs, memory-bound ones on M - mu R."""
    ep = EndpointSpec("endpoint", comm_sm_fraction=0.25)
    sb = _batch(ep)
    m = 2039e9 * SystemSpec().calibration.hbm_efficiency
    hbm = np.array([0.25 * m])
    # only compute-bound kernels: the SM roof, 1 / (1 - 0.25) - 1 = 1/3
    assert compute_slowdown(sb, np.array([0.0]), hbm)[0] == pytest.approx(1.0 / 3.0)
    # only memory-bound kernels: the HBM roof, M / (M - M / 4) - 1 = 1/3 as well
    assert compute_slowdown(sb, np.array([1.0]), hbm)[0] == pytest.approx(1.0 / 3.0)
    # half the HBM taken: memory-bound kernels run at half speed, compute-bound ones lose 1/4 SMs
    half = np.array([0.5 * m])
    assert compute_slowdown(sb, np.array([0.6]), half)[0] == pytest.approx(0.6 * 1.0 + 0.4 / 3.0)
    # compute first (CompOpt): memory-bound kernels keep the HBM, only the SMs are lost
    first = _batch(replace(ep, hbm_priority="compute"))
    assert compute_slowdown(first, np.array([0.6]), half)[0] == pytest.approx(0.4 / 3.0)


def test_collective_starves_when_compute_keeps_the_hbm() -> None:
    """CompOpt (§2.3(d)): the collective gets the HBM compute leaves, so it slows down in
    proportion to the memory-bound share of the compute beside it; CommOpt's does not."""
    model, par = ResNetSpec(), ParallelSpec(micro_batch=32, global_batch=512).resolve(16)
    system = SystemSpec(num_gpus=16)
    cw = compiled_workload(model, par, system)
    first = EndpointSpec("endpoint", comm_sm_fraction=0.3, hbm_priority="compute",
                         comm_hbm_share=0.05)  # HBM-bound collectives: the share decides
    sb = _batch(replace(first, hbm_priority="collective"), first)
    tdur = template_durations(cw, sb, par.precision)
    phi = memory_bound_fraction(cw, sb, par.precision)
    assert 0.3 < phi[0] == phi[1] < 0.9  # ResNet-50: batch norm, ReLU and residuals
    out = collective_stretch(cw, tdur, sb, phi)
    coll = [t for t, kind in enumerate(cw.template_kind) if kind != COMPUTE]
    ratio = out[coll, 1] / out[coll, 0]
    assert np.allclose(ratio[ratio > 1.0001], 1.0 / (1.0 - phi[0]))
    assert (ratio > 1.0001).any()


def test_memory_bound_fraction_counts_mem_kernels() -> None:
    """phi is the share of compute time in memory-bound kernels: 0 when the graph has none."""
    from simcore.workloads.recsys.family import DLRMSpec

    dlrm, par = DLRMSpec(), ParallelSpec(global_batch=512, ep=8).resolve(8)
    system = SystemSpec(num_gpus=8, endpoint=EndpointSpec("endpoint"))
    cw = compiled_workload(dlrm, par, system)
    sb = SystemBatch.from_specs([system])
    phi = memory_bound_fraction(cw, sb, par.precision)[0]
    kd = kernel_durations(cw.ops, sb, par.precision)[:, 0]
    is_mem = np.array([c == "mem" for c, _ in cw.ops.kernels])
    assert 0.0 < phi < 1.0
    kd_gemm_only = np.where(is_mem, 0.0, kd)  # the same graph with free memory-bound kernels
    counts = np.asarray(cw.stage_counts).sum(axis=0) * (cw.template_kind == COMPUTE)
    runs = counts @ cw.ops.weights()
    assert phi == pytest.approx(1.0 - (runs @ kd_gemm_only) / (runs @ kd))


def test_overlapped_collectives_take_hbm_at_their_own_rate() -> None:
    """A collective bound by the 25 GB/s scale-out moves less HBM per second than one at the
    scale-up line: the HBM compute loses follows the rate the collective actually runs at."""
    model, par = ResNetSpec(), ParallelSpec(micro_batch=32, global_batch=512).resolve(16)
    ep = EndpointSpec("endpoint", comm_sm_fraction=0.3)
    slow = replace(SystemSpec(num_gpus=16), endpoint=ep)
    fast = replace(slow, scaleout=replace(slow.scaleout, bandwidth_GBps=300.0))
    cw = compiled_workload(model, par, slow)
    sb = SystemBatch.from_specs([slow, fast])
    hbm = overlapped_hbm_Bps(cw, template_durations(cw, sb, par.precision), sb)
    assert 0 < hbm[0] < hbm[1]
    line = 300e9 * slow.calibration.scaleup_efficiency
    assert hbm[0] < hbm_per_wire_byte(ep, int(CommType.ALL_REDUCE), 8) * line


def test_fast_fabric_makes_the_baseline_hbm_bound_not_ace() -> None:
    """ACE §2.3(b) and its headline: when the fabric W outruns what the endpoint's HBM can feed,
    ``M_c / mu`` (half the usable HBM over (5 + 2) / 2 bytes per all-reduce byte), the NPU-driven
    collective runs at that bound while ACE (mu ~ 1) keeps the network's rate; on a slow
    fabric neither is limited."""
    from simcore.fidelity.contention import _collective_templates, engines

    model, par = ResNetSpec(), ParallelSpec(micro_batch=32, global_batch=256).resolve(8)
    comm_opt = EndpointSpec("endpoint", comm_sm_fraction=32 / 108)  # SM cap 320 GB/s: not binding
    for line_GBps, hbm_bound in ((1000.0, True), (100.0, False)):
        system = SystemSpec(num_gpus=8, scaleup=replace(SystemSpec().scaleup,
                                                        bandwidth_GBps=line_GBps))
        cw = compiled_workload(model, par, system)
        sb = SystemBatch.from_specs([replace(system, endpoint=e)
                                     for e in (comm_opt, EndpointSpec("ace"))])
        tdur = template_durations(cw, sb, par.precision)
        out = collective_stretch(cw, tdur, sb, memory_bound_fraction(cw, sb, par.precision))
        bound = (0.5 * system.accelerator.hbm_bandwidth_GBps * 1e9
                 * system.calibration.hbm_efficiency / 3.5)
        templates = _collective_templates(cw, engines(sb))
        assert templates
        for t, wire, _ in templates:
            network = wire / tdur[t, 0]  # the same fabric under both engines
            assert wire / out[t, 1] == pytest.approx(network)  # ACE: the network's rate
            if hbm_bound:
                assert network > 1.2 * bound
                assert wire / out[t, 0] == pytest.approx(bound)
            else:
                assert network < bound
                assert wire / out[t, 0] == pytest.approx(network)
