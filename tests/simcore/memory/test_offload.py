"""Remote memory tier (simcore.memory.offload through simcore.api.simulate_batch), by hand.

The per-GPU footprint parts (optimizer, activations) are the footprint model's
(simcore.workloads.transformer.memory); everything the tier adds is derived here by hand from them:
ASTRA-sim access cost latency + bytes/bandwidth and contention per memory type
(reference/astra-sim-and-chakra.md §2.3).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from simcore.api import simulate_batch
from simcore.memory import footprint_bytes
from simcore.specs.memory_tier import RemoteMemorySpec
from simcore.specs.parallel import ParallelSpec
from simcore.specs.system import AcceleratorSpec, SystemSpec
from simcore.workloads.transformer.spec import ModelSpec

GIB = 2**30
MODEL = ModelSpec(name="tiny", num_layers=4, hidden_size=256, num_heads=4, seq_len=512,
                  vocab_size=1024)
PAR = ParallelSpec(global_batch=16)


def _system(num_gpus: int = 8, **mem: object) -> SystemSpec:
    tier = RemoteMemorySpec(**mem) if mem else RemoteMemorySpec()  # type: ignore[arg-type]
    return SystemSpec(num_gpus=num_gpus, gpus_per_node=8, memory=tier)


def _fp(num_gpus: int) -> dict[str, int]:
    return footprint_bytes(MODEL, PAR.resolve(num_gpus), 0)


def _opt(kind: str, **extra: object) -> dict[str, object]:
    return {"kind": kind, "latency_ns": 1000.0, "bandwidth_GBps": 10.0, "capacity_gib": 1e4,
            "offload_optimizer": True, **extra}


@pytest.mark.parametrize(("kind", "num_gpus", "sharers"), [
    ("per_npu", 16, 1), ("per_node", 16, 8), ("pool", 16, 16)])
def test_optimizer_offload_time_and_footprint(kind: str, num_gpus: int, sharers: int) -> None:
    base, off = simulate_batch(MODEL, PAR, [_system(num_gpus), _system(num_gpus, **_opt(kind))]
                               ).rows()
    opt = _fp(num_gpus)["optimizer"]
    transfer = sharers * (2 * 1e-6 + 2 * opt / 10e9)  # read + write, 2 accesses, FIFO
    assert off["iteration_time_s"] - base["iteration_time_s"] == pytest.approx(transfer)
    assert off["exposed_comm_s"] - base["exposed_comm_s"] == pytest.approx(transfer)
    assert base["peak_memory_gib"] - off["peak_memory_gib"] == pytest.approx(opt / GIB)
    assert off["feasible"] is True and off["compute_s"] == base["compute_s"]


def test_breakdown_still_adds_up_and_a_mixed_batch_equals_separate_calls() -> None:
    systems = [_system(16), _system(16, **_opt("pool")), _system(16, **_opt("per_node"))]
    batch = simulate_batch(MODEL, PAR, systems)
    total = batch.compute_s + batch.exposed_comm_s + batch.bubble_s
    np.testing.assert_allclose(total, batch.iteration_time_s)
    for i, s in enumerate(systems):
        one = simulate_batch(MODEL, PAR, [s])
        assert one.iteration_time_s[0] == pytest.approx(batch.iteration_time_s[i], rel=1e-12)
        assert one.peak_memory_gib[0] == batch.peak_memory_gib[i]


def test_capacity_exceeded_is_infeasible_with_the_reason() -> None:
    opt = _fp(16)["optimizer"]
    fits = 16 * opt / GIB * 1.01
    small = 16 * opt / GIB * 0.99  # the pool holds 16 GPUs' optimizer state
    res = simulate_batch(MODEL, PAR, [_system(16, **_opt("pool", capacity_gib=fits)),
                                      _system(16, **_opt("pool", capacity_gib=small))])
    assert res.feasible.tolist() == [True, False]
    assert res.reason[1].startswith("memory.capacity_gib=") and "pool" in res.reason[1]


def test_offloading_the_optimizer_makes_an_out_of_memory_plan_fit() -> None:
    fp = _fp(8)
    hbm_gib = (fp["total"] - fp["optimizer"] / 2) / GIB  # between with and without optimizer
    acc = dataclasses.replace(AcceleratorSpec(), hbm_capacity_gib=hbm_gib)
    local = dataclasses.replace(_system(8), accelerator=acc)
    pooled = dataclasses.replace(_system(8, **_opt("pool")), accelerator=acc)
    res = simulate_batch(MODEL, PAR, [local, pooled])
    assert res.feasible.tolist() == [False, True]
    assert "out of memory" in res.reason[0] and res.reason[1] == ""


def test_activation_offload_by_hand_on_one_gpu() -> None:
    # pp=1, L=4 layers all in flight, m = 16 micro-batches; a double buffer of 2 layers stays
    act = _fp(1)["activations"]
    tier = {"kind": "per_npu", "latency_ns": 500.0, "bandwidth_GBps": 20.0,
            "capacity_gib": 1e4, "offload_activations": True}
    base, off = simulate_batch(MODEL, PAR, [_system(1), _system(1, **tier)]).rows()
    per_layer_mb = act / 4
    moved = 2 * per_layer_mb * 4 * 16  # written after forward, read before backward
    accesses = 2 * 4 * 16
    transfer = accesses * 500e-9 + moved / 20e9
    assert off["iteration_time_s"] - base["iteration_time_s"] == pytest.approx(transfer)
    assert base["peak_memory_gib"] - off["peak_memory_gib"] == pytest.approx(act / 2 / GIB)


def test_astra_fidelity_marks_offloading_points_infeasible_instead_of_ignoring_the_tier() -> None:
    res = simulate_batch(MODEL, PAR, [_system(16), _system(16, **_opt("pool"))], "astra")
    assert res.feasible.tolist() == [True, False]
    assert "fidelity=astra" in res.reason[1] and res.reason[0] == ""


def test_activation_offload_follows_the_plans_uneven_split() -> None:
    """Megatron's explicit stage counts (1 layer on stage 0, 4 on stage 1 of L = 5): the tier's
    traffic is each stage's own layers x micro-batches, as the footprint's in-flight count is
    (before, the tier read the even split 3 / 2 whatever the plan said)."""
    model = dataclasses.replace(MODEL, num_layers=5)
    par = ParallelSpec(pp=2, global_batch=16, first_stage_layers=1, last_stage_layers=4)
    tier = {"kind": "per_npu", "latency_ns": 500.0, "bandwidth_GBps": 20.0,
            "capacity_gib": 1e4, "offload_activations": True}
    base, off = simulate_batch(model, par, [_system(2), _system(2, **tier)]).rows()
    m, moved, accesses = 16, [], []
    for stage, layers in enumerate((1, 4)):
        act = footprint_bytes(model, par.resolve(2), stage)["activations"]
        per_layer_mb = act / (min(2 - stage, m) * layers)  # in flight: (pp - s) x its layers
        moved.append(2 * per_layer_mb * layers * m)
        accesses.append(2 * layers * m)
    transfer = max(accesses) * 500e-9 + max(moved) / 20e9
    assert off["iteration_time_s"] - base["iteration_time_s"] == pytest.approx(transfer)
