"""A mixed H100 + A100 LLM run: pipeline stages by device speed beat the even split and the
all-A100 cluster; a stage too big for its device is infeasible naming both."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from simcore.api import simulate_batch
from simcore.specs.layer_split import layers_by_speed
from simcore.specs.parallel import ParallelSpec
from simcore.specs.system import (
    AcceleratorSpec,
    CalibrationSpec,
    DevicePool,
    SystemSpec,
    TopologyDimSpec,
)
from simcore.workloads.transformer.spec import ModelSpec

SYS = Path(__file__).resolve().parents[3] / "conf" / "system"


def _load(kind: type, path: str) -> object:
    data = yaml.safe_load((SYS / path).read_text())
    return kind(**{k: v for k, v in data.items() if k in kind.__dataclass_fields__})


H100 = _load(AcceleratorSpec, "accelerator/h100_80g.yaml")
A100 = _load(AcceleratorSpec, "accelerator/a100_80g.yaml")
A100_40 = _load(AcceleratorSpec, "accelerator/a100_40g.yaml")
CAL_H, CAL_A = _load(CalibrationSpec, "calibration/h100.yaml"), _load(CalibrationSpec,
                                                                       "calibration/a100.yaml")
UP_A = TopologyDimSpec(kind="Switch", bandwidth_GBps=300.0, latency_ns=700.0)
MODEL = ModelSpec(name="gpt_3b", num_layers=16, hidden_size=2560, num_heads=32, seq_len=2048,
                  vocab_size=32000)
PLAN = ParallelSpec(tp=8, pp=2, global_batch=32, micro_batch=1, sequence_parallel=True)


def _cluster(second: AcceleratorSpec = A100) -> SystemSpec:  # type: ignore[assignment]
    return SystemSpec(num_gpus=16, gpus_per_node=8, accelerator=H100, calibration=CAL_H,  # type: ignore[arg-type]
                      scaleup=TopologyDimSpec(kind="Switch", bandwidth_GBps=450.0),
                      pools=(DevicePool(count=8),
                             DevicePool(second, CAL_A, count=8, scaleup=UP_A)))  # type: ignore[arg-type]


def test_stages_by_speed_beat_even_split_and_the_all_a100_cluster() -> None:
    """Device speed = 1 / a stage's compute time on an all-H100 / all-A100 cluster (the
    per-device cost model: ~1.7x, well below the 3.2x of the peak FLOP/s ratio)."""
    all_a100 = SystemSpec(num_gpus=16, gpus_per_node=8, accelerator=A100, calibration=CAL_A,  # type: ignore[arg-type]
                          scaleup=UP_A)
    all_h100 = replace(all_a100, accelerator=H100, calibration=CAL_H,
                       scaleup=TopologyDimSpec(kind="Switch", bandwidth_GBps=450.0))
    t_h, t_a = (simulate_batch(MODEL, PLAN, [s]).compute_s[0] for s in (all_h100, all_a100))
    split = layers_by_speed(MODEL.num_layers, (1 / t_h, 1 / t_a))
    assert split[0] > split[1] and sum(split) == MODEL.num_layers
    by_speed = replace(PLAN, first_stage_layers=split[0])
    mixed_even = simulate_batch(MODEL, PLAN, [_cluster()]).iteration_time_s[0]
    mixed_speed = simulate_batch(MODEL, by_speed, [_cluster()]).iteration_time_s[0]
    slow = simulate_batch(MODEL, PLAN, [all_a100]).iteration_time_s[0]
    # the even split waits for the A100 stage: no faster than all-A100 (its H100 stage idles)
    assert mixed_even == pytest.approx(slow, rel=0.05)
    assert mixed_speed < 0.9 * mixed_even and mixed_speed < 0.9 * slow


def test_a_stage_too_big_for_its_device_is_infeasible_naming_device_and_stage() -> None:
    big = replace(MODEL, num_layers=64, hidden_size=5120, num_heads=40)
    r = simulate_batch(big, replace(PLAN, first_stage_layers=4), [_cluster(A100_40)])  # type: ignore[arg-type]
    assert not r.feasible[0]
    assert "stage 1 on pool 1 (a100_40g)" in r.reason[0]
