"""Mixed device pools: collective volumes follow the shares (batch shares and uneven tensor
shards, HAP §2.5.1) and the overlap slowdown is each pool's own; closed forms by hand."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from simcore.api import compiled_workload, evaluated_durations, simulate_batch
from simcore.engine.devices import device_template_durations
from simcore.hardware.batch import SystemBatch
from simcore.ir.graph import CommType
from simcore.ir.streams import CommKind
from simcore.network.collectives.nccl import collective_time_s
from simcore.network.collectives.uneven import GROUPED_AG_EFFICIENCY, GROUPED_RS_EFFICIENCY
from simcore.specs.parallel import ParallelSpec
from simcore.specs.system import CalibrationSpec, DevicePool, SystemSpec, TopologyDimSpec
from simcore.workloads.transformer.spec import ModelSpec

MODEL = ModelSpec(name="t", num_layers=4, hidden_size=1024, num_heads=16, seq_len=1024,
                  vocab_size=4096)
BASE = SystemSpec(num_gpus=16, gpus_per_node=8,
                  scaleout=TopologyDimSpec(bandwidth_GBps=25.0, latency_ns=5000.0))
TWIN = replace(BASE.accelerator, name="twin")  # the same numbers, another name: the mixed path
MIXED = replace(BASE, pools=(DevicePool(count=8), DevicePool(TWIN, count=8)))
# dp innermost: with dp=2, tp=16 on pools of 16 + 16, every TP group has 8 ranks on each pool
# and every DP group sits in one pool
DP_FIRST = "dp-tp-cp-pp"


def _single_colls(cw, kind: CommKind) -> list[tuple[int, tuple[float, ...]]]:
    """(template, kernel args) of every template of ``kind`` made of one collective, weight 1."""
    out = []
    for t, parts in enumerate(cw.ops.templates):
        if cw.template_kind[t] != kind or len(parts) != 1 or parts[0][1] != 1.0:
            continue
        cost, args = cw.ops.kernels[parts[0][0]]
        if cost == "coll":
            out.append((t, args))
    return out


def _coll(sb: SystemBatch, args: tuple[float, ...], volume: float, bw_factor: float) -> float:
    """Closed form: the NCCL model's fixed part plus ``bw_factor`` x its bandwidth term at
    ``volume`` x the bytes (the fixed part: the time of a vanishing buffer)."""
    ct, nbytes, n, k = args
    fixed = float(collective_time_s(sb, ct, 1e-12, n, k)[0, 0])
    full = float(collective_time_s(sb, ct, nbytes * volume, n, k)[0, 0])
    return fixed + bw_factor * (full - fixed)


def _durations(plan: ParallelSpec, system: SystemSpec):
    cw = compiled_workload(MODEL, plan, system)
    par = plan.resolve(system.num_gpus)
    sb = SystemBatch.from_specs([system])
    return cw, sb, device_template_durations(cw, sb, par)[:, 0]


def test_batch_shares_scale_activation_traffic_not_gradients() -> None:
    """TP inside each pool's nodes, DP across pools, shares 3:1 (batch shares 1.5 and 0.5 of
    even): a TP all-reduce carries 1.5x its activations on pool 0 (the slowest member), the
    gradient all-reduce its full even volume."""
    plan = ParallelSpec(tp=2, global_batch=64, work_split="explicit", work_shares=(3.0, 1.0))
    cw, sb, t = _durations(plan, MIXED)
    assert cw.stage_tp_split is not None and not cw.stage_tp_split.any()
    tp, dp = _single_colls(cw, CommKind.TP), _single_colls(cw, CommKind.DP)
    assert tp and dp
    for u, args in tp:
        assert t[u] == pytest.approx(_coll(sb.pool(0), args, 1.5, 1.0), rel=1e-9)
        assert t[u] > _coll(sb.pool(0), args, 1.0, 1.0)
    for u, args in dp:
        assert t[u] == pytest.approx(_coll(sb.pool(0), args, 1.0, 1.0), rel=1e-9)


@pytest.mark.parametrize(("shares", "method"), [((3.0, 1.0), "grouped"), ((1.02, 0.98), "padded")])
def test_uneven_tensor_shards_pad_or_group_their_gathers(shares: tuple[float, float],
                                                         method: str) -> None:
    """A TP group of 16 over both pools (sequence parallel), shards r = (1.5, 0.5) or
    (1.02, 0.98) of even. HAP §2.5.1: a padded all-gather / reduce-scatter moves n max s_d
    (bandwidth x max r), a grouped one the real total at 9.15/9.46 (AG), 8.76/9.74 (RS) of the
    bandwidth; the cheaper wins: grouped at 1.5, padded at 1.02. The data-parallel gradient of a
    shard carries r_d of the even one (pool 0: 1.5 / 1.02)."""
    plan = ParallelSpec(tp=16, global_batch=8, sequence_parallel=True, work_split="explicit",
                        work_shares=shares, rank_order=DP_FIRST)
    system = replace(MIXED, num_gpus=32, pools=(DevicePool(count=16), DevicePool(TWIN, count=16)))
    cw, sb, t = _durations(plan, system)
    assert cw.stage_tp_split is not None and cw.stage_tp_split.all()
    r_max = 2 * shares[0] / sum(shares)
    eff = {int(CommType.ALL_GATHER): GROUPED_AG_EFFICIENCY,
           int(CommType.REDUCE_SCATTER): GROUPED_RS_EFFICIENCY}
    seen = set()
    for u, args in _single_colls(cw, CommKind.TP):
        ct = int(args[0])
        assert ct in eff, "sequence parallelism: every TP collective is an AG or an RS"
        factor = 1.0 / eff[ct] if method == "grouped" else r_max
        assert factor == min(r_max, 1.0 / eff[ct])
        assert t[u] == pytest.approx(_coll(sb.pool(0), args, 1.0, factor), rel=1e-9)
        seen.add(ct)
    assert seen == set(eff)
    dp = _single_colls(cw, CommKind.DP)
    assert dp
    for u, args in dp:
        assert t[u] == pytest.approx(_coll(sb.pool(0), args, r_max, 1.0), rel=1e-9)


def test_tensor_shard_all_reduce_of_partial_sums_keeps_the_full_tensor() -> None:
    """Without sequence parallelism the TP collectives are all-reduces of partial sums: the
    full tensor whatever the shards (HAP: all-reduce volume = tensor size); compute scales."""
    plan = ParallelSpec(tp=16, global_batch=8, work_split="explicit", work_shares=(3.0, 1.0),
                        rank_order=DP_FIRST)
    even = replace(plan, work_split="even", work_shares=None)
    system = replace(MIXED, num_gpus=32, pools=(DevicePool(count=16), DevicePool(TWIN, count=16)))
    cw, sb, t = _durations(plan, system)
    _, _, t_even = _durations(even, system)
    tp = _single_colls(cw, CommKind.TP)
    assert tp and all(int(a[0]) == CommType.ALL_REDUCE for _, a in tp)
    for u, args in tp:
        assert t[u] == pytest.approx(_coll(sb.pool(0), args, 1.0, 1.0), rel=1e-9)
    comp = np.asarray(cw.template_kind) < 0
    np.testing.assert_allclose(t[comp], 1.5 * t_even[comp], rtol=1e-12)


def _cal(slowdown: float) -> CalibrationSpec:
    return replace(BASE.calibration, overlap_compute_slowdown=slowdown)


def _pp_pools(s0: float, s1: float) -> SystemSpec:
    return replace(BASE, calibration=_cal(s0),
                   pools=(DevicePool(count=8), DevicePool(count=8, calibration=_cal(s1))))


PP = ParallelSpec(tp=2, pp=2, global_batch=32)


def test_each_stage_is_slowed_by_its_own_pools_overlap_calibration() -> None:
    """Pipeline stage 0 on pool 0 (no overlap slowdown), stage 1 on pool 1 (0.3): each stage
    takes its own pool's value; the iteration lies strictly between the all-0 and all-0.3
    clusters (reading pool 0 for every device would give the all-0 one)."""
    _, _, slow = evaluated_durations(MODEL, PP, _pp_pools(0.0, 0.3))
    np.testing.assert_allclose(np.asarray(slow), [0.0, 0.3], rtol=1e-12)
    _, _, slow = evaluated_durations(MODEL, PP, _pp_pools(0.3, 0.0))
    np.testing.assert_allclose(np.asarray(slow), [0.3, 0.0], rtol=1e-12)
    t = {k: simulate_batch(MODEL, PP, [s]).iteration_time_s[0]
         for k, s in (("mixed", _pp_pools(0.0, 0.3)),
                      ("none", replace(BASE, calibration=_cal(0.0))),
                      ("all", replace(BASE, calibration=_cal(0.3))),
                      ("all_pools", _pp_pools(0.3, 0.3)))}
    assert t["none"] < t["mixed"] < t["all"]
    assert t["all_pools"] == pytest.approx(t["all"], rel=1e-12)


def test_a_stage_on_both_pools_takes_the_slowdown_of_the_device_that_sets_its_compute() -> None:
    """DP over a full- and a half-speed pool, even split: the half-speed device sets the stage's
    compute, so its calibration's slowdown applies (whichever pool it is)."""
    half = replace(BASE.accelerator, name="half", peak_tflops_bf16=156.0, peak_tflops_fp16=156.0,
                   hbm_bandwidth_GBps=1019.5)
    plan = ParallelSpec(tp=2, global_batch=64)
    fast_first = replace(BASE, calibration=_cal(0.05), pools=(
        DevicePool(count=8), DevicePool(half, count=8, calibration=_cal(0.2))))
    slow_first = replace(BASE, accelerator=half, calibration=_cal(0.2), pools=(
        DevicePool(count=8), DevicePool(BASE.accelerator, count=8, calibration=_cal(0.05))))
    for system in (fast_first, slow_first):
        _, _, slow = evaluated_durations(MODEL, plan, system)
        np.testing.assert_allclose(np.asarray(slow), [0.2], rtol=1e-12)


def test_memory_follows_the_share_of_each_device() -> None:
    """DP over two pools at batch shares 1.5 and 0.5 of even: pool 0's devices hold 1.5x the
    activations of the even split and the same model state; a device with room for the even
    split but not for 1.5x its activations makes the point infeasible, naming it."""
    from simcore.workloads import family_of

    plan = ParallelSpec(tp=2, global_batch=64, work_split="explicit", work_shares=(3.0, 1.0))
    par = plan.resolve(16)
    fp = family_of(MODEL).footprint(MODEL, par, 0)
    r = simulate_batch(MODEL, plan, [MIXED])
    want = fp["total"] + 0.5 * (fp["activations"] + fp["recompute_workspace"])
    assert r.peak_memory_gib[0] == pytest.approx(want / 2**30, rel=1e-12)
    even = simulate_batch(MODEL, replace(plan, work_split="even", work_shares=None), [MIXED])
    assert even.peak_memory_gib[0] == pytest.approx(fp["total"] / 2**30, rel=1e-12)
    gib = (fp["total"] + 0.25 * fp["activations"]) / 2**30  # fits even, not 1.5x activations
    small = replace(TWIN, name="small", hbm_capacity_gib=gib)
    tight = replace(MIXED, accelerator=small, pools=(DevicePool(count=8), DevicePool(TWIN, count=8)))
    assert simulate_batch(MODEL, replace(plan, work_split="even", work_shares=None),
                          [tight]).feasible[0]
    out = simulate_batch(MODEL, plan, [tight])
    assert not out.feasible[0] and "stage 0 on pool 0 (small)" in out.reason[0]
