"""The generated graph against hand-derived closed forms on small cases.

Each test fails if a mechanism is dropped from the generator: the pipeline bubble (it comes out
of the schedule, not a formula), ZeRO-3's parameter gathers, TP vs sequence-parallel
collectives, recompute.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from simcore.api import compiled_workload, simulate_batch
from simcore.engine.evaluate import template_durations
from simcore.hardware import SystemBatch
from simcore.specs.parallel import ParallelSpec
from simcore.specs.system import CalibrationSpec, SystemSpec, TopologyDimSpec
from simcore.workloads.transformer.spec import ModelSpec

H, L, SEQ, MB = 512, 8, 512, 1
MODEL = ModelSpec(name="t", num_layers=L, hidden_size=H, num_heads=8, seq_len=SEQ, vocab_size=8)
# no fixed latencies anywhere: collective time = traffic factor x size / bus bandwidth
CAL = CalibrationSpec(kernel_overhead_us=0.0, collective_base_latency_us=0.0,
                      collective_step_latency_us=0.0, scaleup_efficiency=1.0,
                      scaleout_efficiency=1.0, p2p_efficiency=1.0)
UP_GBPS = 100.0


def _system(num_gpus: int, up_GBps: float = UP_GBPS) -> SystemSpec:
    return SystemSpec(num_gpus=num_gpus, gpus_per_node=8, calibration=CAL,
                      scaleup=TopologyDimSpec(bandwidth_GBps=up_GBps, latency_ns=0.0),
                      scaleout=TopologyDimSpec(bandwidth_GBps=up_GBps, latency_ns=0.0))


FREE_NET = 1e9  # GB/s: communication takes ~0


def _run(par: ParallelSpec, system: SystemSpec) -> dict[str, float]:
    r = simulate_batch(MODEL, par, [system])
    assert r.feasible[0], r.reason[0]
    return r.rows()[0]  # type: ignore[return-value]


@pytest.mark.parametrize("vp", [1, 2])
def test_pipeline_bubble_is_pp_minus_one_stage_times_over_vp(vp: int) -> None:
    # uniform stages (vocab 8: embedding/output ~ free), free network, dp = 1
    pp, m = 4, 8
    sysm = _system(pp, FREE_NET)
    par = ParallelSpec(pp=pp, vp=vp, global_batch=m * MB)
    a = _run(par, sysm)
    b = _run(replace(par, global_batch=2 * m * MB), sysm)
    t_stage = (b["compute_s"] - a["compute_s"]) / m  # t_f + t_b of one micro-batch on a stage
    # 1F1B: T = (m + pp - 1)(t_f + t_b); interleaved: bubble / vp (Narayanan'21 2.2.2)
    assert a["bubble_s"] == pytest.approx((pp - 1) * t_stage / vp, rel=0.02)
    assert a["iteration_time_s"] == pytest.approx(a["compute_s"] + a["bubble_s"], rel=1e-6)
    assert a["bubble_s"] > 0.2 * a["iteration_time_s"] / (m / (pp - 1) + 1) / vp


def _allgather_s(nbytes: float, n: int, bw_GBps: float = UP_GBPS) -> float:
    return (n - 1) / n * nbytes / (bw_GBps * 1e9)


def test_zero3_adds_a_parameter_allgather_per_layer_pass() -> None:
    dp, m = 4, 2
    sysm = _system(dp)
    base = ParallelSpec(global_batch=dp * m * MB, dp_overlap=False, zero_stage=2)
    z2 = _run(base, sysm)
    z3 = _run(replace(base, zero_stage=3), sysm)
    layer_bytes = 12 * H * H * 2  # QKV + proj (4h^2) + MLP (8h^2), 16-bit
    t_ag = _allgather_s(layer_bytes, dp)
    # ZeRO-2: one gather per layer after the step; ZeRO-3: one before every forward and
    # backward of every layer in every micro-batch, none after the step
    expected = (2 * m * L - L) * t_ag
    assert z3["iteration_time_s"] - z2["iteration_time_s"] == pytest.approx(expected, rel=0.02)
    assert z3["exposed_comm_dp_s"] - z2["exposed_comm_dp_s"] == pytest.approx(expected, rel=0.02)


@pytest.mark.parametrize("recompute,extra", [("none", 0), ("full", 2)])
def test_sp_replaces_each_tp_allreduce_by_rs_plus_ag(recompute: str, extra: int) -> None:
    tp, m = 4, 2
    sysm = _system(tp)
    par = ParallelSpec(tp=tp, global_batch=m * MB, recompute=recompute)
    no_sp = _run(par, sysm)
    sp = _run(replace(par, sequence_parallel=True), sysm)
    size = MB * SEQ * H * 2
    t_ar = 2 * (tp - 1) / tp * size / (UP_GBPS * 1e9)
    t_rs = t_ag = (tp - 1) / tp * size / (UP_GBPS * 1e9)
    per_layer = 4 + extra  # 2 forward, 2 backward (+2 in the recomputed forward)
    assert no_sp["exposed_comm_tp_s"] == pytest.approx(per_layer * L * m * t_ar, rel=1e-6)
    # SP: each all-reduce -> reduce-scatter + all-gather; the output layer adds one pair
    want = per_layer * L * m * (t_rs + t_ag) + m * (t_rs + t_ag)
    assert sp["exposed_comm_tp_s"] == pytest.approx(want, rel=1e-6)


def _layer_forward_s(par: ParallelSpec, system: SystemSpec, prefix: tuple[str, ...]) -> float:
    cw = compiled_workload(MODEL, par, system)
    tdur = template_durations(cw, SystemBatch.from_specs([system]), par.precision)[:, 0]
    names = cw.ops.template_names
    return float(sum(tdur[i] for i, n in enumerate(names) if n.startswith(prefix)))


@pytest.mark.parametrize("mode", ["full", "selective"])
def test_recompute_adds_the_forward_before_each_backward(mode: str) -> None:
    m = 4
    sysm = _system(1)
    par = ParallelSpec(global_batch=m * MB)
    none = _run(par, sysm)
    rec = _run(replace(par, recompute=mode), sysm)
    fwd = ("attn_pre_fwd", "attn_core_fwd", "attn_post_fwd", "mlp_fwd")
    t_fwd = _layer_forward_s(par, sysm, fwd if mode == "full" else ("attn_core_fwd",))
    assert t_fwd > 0
    expected = L * m * t_fwd  # one more forward (or attention core) per layer and micro-batch
    assert rec["compute_s"] - none["compute_s"] == pytest.approx(expected, rel=1e-6)
    assert rec["iteration_time_s"] - none["iteration_time_s"] == pytest.approx(expected, rel=1e-6)


def test_dp_gradient_allreduce_overlaps_backward_only_when_asked() -> None:
    # a layer's backward (~0.4 ms) and its gradient all-reduce (~0.4 ms) are comparable
    model = replace(MODEL, hidden_size=1024, num_heads=16, seq_len=2048)
    dp, m = 4, 2
    sysm = replace(_system(dp), calibration=replace(CAL, overlap_compute_slowdown=0.0))
    par = ParallelSpec(global_batch=dp * m * MB, dp_overlap=False)
    serial = simulate_batch(model, par, [sysm]).rows()[0]
    overlapped = simulate_batch(model, replace(par, dp_overlap=True), [sysm]).rows()[0]
    t_ar = 2 * (dp - 1) / dp * (12 * 1024 * 1024 * 2) / (UP_GBPS * 1e9)
    # serial: every layer's all-reduce after the flush (+ the tiny embedding one)
    assert serial["exposed_comm_dp_s"] == pytest.approx(L * t_ar, rel=0.01)
    assert overlapped["exposed_comm_dp_s"] < 0.5 * float(serial["exposed_comm_dp_s"])
    assert overlapped["iteration_time_s"] < serial["iteration_time_s"]


def test_overlap_slowdown_stretches_compute_beside_communication_only() -> None:
    dp, m = 4, 2
    fast = replace(_system(dp, up_GBps=5.0), calibration=replace(CAL, overlap_compute_slowdown=0.0))
    slow = replace(fast, calibration=replace(CAL, overlap_compute_slowdown=0.5))
    par = ParallelSpec(global_batch=dp * m * MB, dp_overlap=True)
    base, slowed = _run(par, fast), _run(par, slow)
    assert slowed["compute_s"] > base["compute_s"]
    # at most half of the overlapped DP traffic (all of it hidden) is added to the compute
    layer_bytes = 12 * H * H * 2
    t_ar = 2 * (dp - 1) / dp * layer_bytes / (5.0 * 1e9)
    assert slowed["compute_s"] - base["compute_s"] <= 0.5 * (L + 1) * t_ar * 1.0001
    serial = replace(par, dp_overlap=False)  # DP after the flush: nothing overlaps compute
    assert _run(serial, slow)["compute_s"] == pytest.approx(_run(serial, fast)["compute_s"])
