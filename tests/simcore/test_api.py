"""simulate_batch: batch == singles, infeasible points are data, structure rules."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from simcore.api import simulate_batch, structure_key
from simcore.engine.result import METRICS
from simcore.errors import InputError
from simcore.specs.parallel import ParallelSpec
from simcore.specs.system import AcceleratorSpec, SystemSpec, TopologyDimSpec
from simcore.workloads.transformer.spec import ModelSpec

MODEL = ModelSpec(name="t", num_layers=8, hidden_size=512, num_heads=8, seq_len=1024,
                  vocab_size=4096)
PLAN = ParallelSpec(tp=2, pp=2, global_batch=32, sequence_parallel=True, zero_stage=1)


def _system(out_GBps: float = 25.0, tflops: float = 312.0, hbm_gib: float = 80.0) -> SystemSpec:
    acc = AcceleratorSpec(peak_tflops_bf16=tflops, peak_tflops_fp16=tflops,
                          hbm_capacity_gib=hbm_gib)
    return SystemSpec(num_gpus=16, gpus_per_node=8, accelerator=acc,
                      scaleout=TopologyDimSpec(bandwidth_GBps=out_GBps, latency_ns=5000.0))


def test_batch_equals_single_point_runs() -> None:
    systems = [_system(bw, tf) for bw, tf in [(12.5, 312.0), (25.0, 500.0), (100.0, 989.0)]]
    batch = simulate_batch(MODEL, PLAN, systems)
    for j, s in enumerate(systems):
        single = simulate_batch(MODEL, PLAN, [s])
        for name in METRICS:
            np.testing.assert_allclose(getattr(batch, name)[j], getattr(single, name)[0],
                                       rtol=1e-12)


def test_faster_hardware_is_faster_and_breakdown_adds_up() -> None:
    r = simulate_batch(MODEL, PLAN, [_system(12.5), _system(200.0)])
    assert r.iteration_time_s[1] < r.iteration_time_s[0]
    total = r.compute_s + r.exposed_comm_s + r.bubble_s
    np.testing.assert_allclose(total, r.iteration_time_s, rtol=1e-9)
    assert set(r.exposed_comm_by_kind) == {"tp", "dp", "pp", "cp", "ep"}
    assert all(r.feasible)


def test_out_of_memory_is_masked_with_reason() -> None:
    r = simulate_batch(MODEL, PLAN, [_system(hbm_gib=80.0), _system(hbm_gib=0.01)])
    assert list(r.feasible) == [True, False]
    assert r.reason[0] == "" and "out of memory" in r.reason[1]
    assert np.isfinite(r.iteration_time_s[1])  # the time is still computed


def test_invalid_structure_makes_every_point_infeasible() -> None:
    r = simulate_batch(MODEL, replace(PLAN, tp=3), [_system(), _system()])
    assert not r.feasible.any()
    assert "tp*pp*cp=6" in r.reason[0]
    rows = r.rows()
    assert rows[0]["feasible"] is False and "reason" in rows[0]


def test_mixed_structures_are_rejected() -> None:
    other = replace(_system(), num_gpus=32)
    assert structure_key(MODEL, PLAN, other) != structure_key(MODEL, PLAN, _system())
    with pytest.raises(InputError, match="systems"):
        simulate_batch(MODEL, PLAN, [_system(), other])


def test_one_system_instead_of_a_batch_is_named() -> None:
    with pytest.raises(InputError, match=r"systems='dgx_a100_80g': must be a sequence of "
                                         r"SystemSpec \(a batch\); one system is the batch"):
        simulate_batch(MODEL, PLAN, _system())  # type: ignore[arg-type]
