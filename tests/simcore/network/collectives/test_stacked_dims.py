"""Multi-dimensional (3-D) fabrics: ``SystemSpec.scaleout_dims`` and the per-dimension collective.

Golden values are the reference's closed forms, not our output: ASTRA-sim runs a multi-dimensional
all-reduce as reduce-scatter up the dimensions, all-reduce on the last, all-gather back down
(``localBWAware``, reference/astra-sim-and-chakra.md §1.2), each phase an alpha-beta term on its
own dimension (steps x (step latency + hop latency) + wire bytes / (line rate x efficiency), the
ring's 2(p-1) / p-1 steps and 2(p-1)/p, (p-1)/p D bytes, §1.4), chunks pipelined through the
phases; ACE moves the payload through HBM once where the endpoint moves ``mu`` bytes per network
byte of every phase (reference/methods-hap-ace-echo.md §2.3(a)). The fabric is ASTRA-sim's example
Ring(2, 200 GB/s, 50 ns) x FullyConnected(8, 100 GB/s, 500 ns) x Switch(4, 50 GB/s, 2000 ns)
(``input/Ring_FullyConnected_Switch.yml``, astra-sim-and-chakra.md §2.2).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from simcore.api import compiled_workload
from simcore.engine.evaluate import template_durations
from simcore.errors import InputError
from simcore.fidelity.contention import (
    _collective_templates,
    collective_stretch,
    engines,
    hbm_per_wire_byte,
    memory_bound_fraction,
    stacked_wire_fraction,
)
from simcore.hardware.batch import SystemBatch
from simcore.ir.graph import CommType
from simcore.network.collectives.calibrated_algorithms import algorithm_collective_time_s
from simcore.specs.collective import CollectiveSpec
from simcore.specs.endpoint import EndpointSpec
from simcore.specs.parallel import ParallelSpec
from simcore.specs.system import AcceleratorSpec, SystemSpec, TopologyDimSpec, system_from_dict
from simcore.workloads.recsys.family import DLRMSpec

RING = CollectiveSpec(all_reduce=("ring",), reduce_scatter=("ring",), all_gather=("ring",),
                      all_to_all=("ring",))
LOCAL = TopologyDimSpec("Ring", 0, 200.0, 50.0)
FC = TopologyDimSpec("FullyConnected", 8, 100.0, 500.0)
SW = TopologyDimSpec("Switch", 4, 50.0, 2000.0)


def _fabric(collective: CollectiveSpec = RING, **kw: object) -> SystemSpec:
    return SystemSpec(num_gpus=64, gpus_per_node=2, scaleup=LOCAL, scaleout_dims=(FC, SW),
                      collective=collective, **kw)  # type: ignore[arg-type]


def _time_s(system: SystemSpec, comm: CommType, nbytes: float, n: int = 64) -> float:
    sb = SystemBatch.from_specs([system])
    return float(algorithm_collective_time_s(sb, float(int(comm)), nbytes, float(n),
                                             float(system.gpus_per_node))[0, 0])


def _ring(kind: str, p: int, d: float, bw_GBps: float, eff: float, hop_ns: float) -> float:
    """A ring phase's alpha-beta time (reference §1.4): steps and wire bytes of ``p`` ranks."""
    steps, wire = {"rs": (p - 1, (p - 1) / p * d), "ag": (p - 1, (p - 1) / p * d),
                   "ar": (2 * (p - 1), 2 * (p - 1) / p * d)}[kind]
    return steps * (1e-6 + hop_ns * 1e-9) + wire / (bw_GBps * 1e9 * eff)


def _hierarchical_allreduce_s(d: float, chunks: int) -> float:
    """ASTRA-sim's localBWAware all-reduce on Ring(2) x FC(8) x Switch(4), closed form: RS(2),
    RS(8) on D/2, AR(4) on D/16, AG(8), AG(2); T = base + sum t(D/c) + (c-1) max t(D/c)."""
    c = d / chunks
    up, out = 0.77, 0.92  # calibrated scale-up / scale-out efficiency (CalibrationSpec defaults)
    phases = [_ring("rs", 2, c, 200.0, up, 50.0), _ring("rs", 8, c / 2, 100.0, out, 500.0),
              _ring("ar", 4, c / 16, 50.0, out, 2000.0), _ring("ag", 8, c / 2, 100.0, out, 500.0),
              _ring("ag", 2, c, 200.0, up, 50.0)]
    return 30e-6 + sum(phases) + (chunks - 1) * max(phases)


@pytest.mark.parametrize("chunks", [1, 4, 16])
@pytest.mark.parametrize("nbytes", [1 << 20, 51_114_064])
def test_hierarchical_allreduce_matches_the_closed_form(nbytes: int, chunks: int) -> None:
    system = _fabric(replace(RING, chunks_per_collective=chunks))
    assert _time_s(system, CommType.ALL_REDUCE, nbytes) == pytest.approx(
        _hierarchical_allreduce_s(nbytes, chunks), rel=1e-12)


def test_reduce_scatter_and_all_to_all_run_one_phase_per_dimension() -> None:
    d, up, out = 64e6, 0.77, 0.92
    rs = (30e-6 + _ring("rs", 2, d, 200.0, up, 50.0) + _ring("rs", 8, d / 2, 100.0, out, 500.0)
          + _ring("rs", 4, d / 16, 50.0, out, 2000.0))
    assert _time_s(_fabric(), CommType.REDUCE_SCATTER, d) == pytest.approx(rs, rel=1e-12)

    def a2a(p: int, x: float, bw: float, eff: float, hop: float) -> float:  # ring A2A, §1.4
        return p * (p - 1) / 2 * (1e-6 + hop * 1e-9) + (p - 1) / 2 * x / (bw * 1e9 * eff)
    want = 30e-6 + a2a(2, d * 2 / 64, 200.0, up, 50.0) + a2a(8, d, 100.0, out, 500.0) + a2a(
        4, d, 50.0, out, 2000.0)
    assert _time_s(_fabric(), CommType.ALL_TO_ALL, d) == pytest.approx(want, rel=1e-12)


def test_a_group_spans_the_inner_dimensions_first() -> None:
    # 16 NPUs = 8 packages: the Ring and the FullyConnected dimension, no Switch phase
    d, up, out = 8e6, 0.77, 0.92
    want = 30e-6 + 2 * _ring("rs", 2, d, 200.0, up, 50.0) + _ring("ar", 8, d / 2, 100.0, out, 500.0)
    assert _time_s(_fabric(), CommType.ALL_REDUCE, d, n=16) == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("comm", [CommType.ALL_REDUCE, CommType.REDUCE_SCATTER,
                                  CommType.ALL_GATHER, CommType.ALL_TO_ALL])
@pytest.mark.parametrize("alg", ["ring", "direct", "halvingDoubling"])
def test_one_stacked_dimension_is_the_two_level_model(comm: CommType, alg: str) -> None:
    spec = CollectiveSpec(all_reduce=(alg,), reduce_scatter=(alg,), all_gather=(alg,),
                          all_to_all=("ring" if alg == "halvingDoubling" else alg,),
                          chunks_per_collective=3)
    one = SystemSpec(num_gpus=64, gpus_per_node=2, scaleup=LOCAL, collective=spec,
                     scaleout_dims=(TopologyDimSpec("FullyConnected", 32, 150.0, 2000.0),))
    two = replace(one, scaleout_dims=())
    assert two.scaleout == TopologyDimSpec("FullyConnected", 0, 150.0, 2000.0)
    for n in (2, 16, 64):
        assert _time_s(one, comm, 3e7, n) == pytest.approx(_time_s(two, comm, 3e7, n), rel=1e-12)


def test_the_fold_and_the_rules() -> None:
    s = _fabric()
    assert s.scaleout == TopologyDimSpec("Switch", 0, 150.0, 2000.0)  # summed, slowest latency
    assert s.dims == (LOCAL, s.scaleout)
    built = system_from_dict({"num_gpus": 64, "gpus_per_node": 2, "scaleout_dims": [
        {"kind": "FullyConnected", "size": 8, "bandwidth_GBps": 100.0, "latency_ns": 500.0},
        {"kind": "Switch", "size": 4, "bandwidth_GBps": 50.0, "latency_ns": 2000.0}]})
    assert built.scaleout_dims == (FC, SW)
    with pytest.raises(InputError, match=r"system\.scaleout_dims=\[8, 2\].*multiply to"):
        replace(s, scaleout_dims=(FC, replace(SW, size=2)))
    with pytest.raises(InputError, match=r"system\.scaleout_dims\.1\.size=0.*>= 2"):
        replace(s, scaleout_dims=(FC, replace(SW, size=0)))
    with pytest.raises(InputError, match=r"system\.scaleout_dims\.0\.kind='Torus'"):
        system_from_dict({"num_gpus": 64, "gpus_per_node": 2, "scaleout_dims": [
            {"kind": "Torus", "size": 32}]})


def test_every_phase_lands_in_hbm_on_the_endpoint_once_with_ace() -> None:
    s = _fabric()
    ar, a2a = int(CommType.ALL_REDUCE), int(CommType.ALL_TO_ALL)
    # a hierarchical all-reduce's phases sum to the ring's 2 (n-1)/n D
    assert stacked_wire_fraction(ar, 64, 2, s) == pytest.approx(2 * 63 / 64)
    # all-to-all: 1/64 inside the package, then D over FC(8) and D over Switch(4)
    wire = stacked_wire_fraction(a2a, 64, 2, s)
    assert wire == pytest.approx(1 / 64 + 7 / 8 + 3 / 4)
    ep, ace = EndpointSpec("endpoint"), EndpointSpec("ace")
    # endpoint: 2 HBM bytes per copied network byte of every phase; ACE: read + write once
    assert hbm_per_wire_byte(ep, a2a, 64, wire) * wire == pytest.approx(2 * wire)
    assert hbm_per_wire_byte(ace, a2a, 64, wire) * wire == pytest.approx(2.0)
    # all-reduce: (5 + 2) / 2 per network byte against 2 D: ~3.45x, the paper's "3.5x"
    ratio = hbm_per_wire_byte(ep, ar, 64) / hbm_per_wire_byte(ace, ar, 64)
    assert ratio == pytest.approx(3.5 * 2 * 63 / 64 / 2)


def test_endpoint_feeds_every_dimension_from_one_hbm() -> None:
    """On the 3-D fabric the pipelined collective drives the dimensions at once; the endpoint's
    HBM (share x usable / mu) and SMs (k r) bound the summed rate: stretched time =
    max(network, mu wire / (share M), wire / (k r)) per collective (ACE §2.3(b))."""
    v100 = AcceleratorSpec(name="v100", peak_tflops_fp16=125.0, peak_tflops_bf16=0.0,
                           hbm_capacity_gib=32.0, hbm_bandwidth_GBps=900.0)
    ep = EndpointSpec("endpoint", comm_sm_fraction=32 / 80, sms=80)
    system = _fabric(replace(RING, chunks_per_collective=8), accelerator=v100, endpoint=ep)
    par = ParallelSpec(micro_batch=512, global_batch=512 * 64, ep=64,
                       precision="fp16").resolve(64)
    cw = compiled_workload(DLRMSpec(num_tables=64), par, system)
    sb = SystemBatch.from_specs([system])
    net = template_durations(cw, sb, "fp16")
    phi = memory_bound_fraction(cw, sb, "fp16")
    out = collective_stretch(cw, net, sb, phi)
    share = 0.5 * 900e9 * system.calibration.hbm_efficiency
    bound = 0
    templates = _collective_templates(cw, engines(sb), sb.specs)
    assert any(int(cw.ops.kernels[cw.ops.templates[t][0][0]][1][0]) == int(CommType.ALL_TO_ALL)
               for t, _, _ in templates)
    for t, wire, mu in templates:
        w = float(np.asarray(wire).ravel()[0])
        (kid, weight), = cw.ops.templates[t]
        comm, nbytes = int(cw.ops.kernels[kid][1][0]), cw.ops.kernels[kid][1][1] * weight
        frac = 1 / 64 + 7 / 8 + 3 / 4 if comm == int(CommType.ALL_TO_ALL) else 2 * 63 / 64
        assert w == pytest.approx(frac * nbytes)  # every phase's bytes (closed forms above)
        want = max(float(net[t, 0]), float(mu[0]) * w / share, w / ep.sm_collective_Bps)
        assert float(out[t, 0]) == pytest.approx(want, rel=1e-12)
        bound += want > float(net[t, 0])
    assert bound > 0  # the HBM bound binds somewhere: the test is not vacuous


def test_the_astra_fidelity_says_it_has_two_dimensions() -> None:
    from simcore.api import simulate_batch
    from simcore.workloads.cnn.spec import ResNetSpec
    par = ParallelSpec(micro_batch=8, global_batch=8 * 64)
    stacked = replace(_fabric(), scaleup=replace(LOCAL, kind="Switch"))  # astra: no Ring dims
    folded = replace(stacked, scaleout_dims=())
    res = simulate_batch(ResNetSpec(), par, [stacked, folded], fidelity="astra")
    assert not res.feasible[0] and "system.scaleout_dims" in res.reason[0]
    assert res.feasible[1]
    cal = simulate_batch(ResNetSpec(), par, [stacked, folded])
    assert cal.feasible.all() and cal.iteration_time_s[0] != cal.iteration_time_s[1]
