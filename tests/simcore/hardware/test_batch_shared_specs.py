"""``SystemBatch.from_specs`` reads each distinct accelerator / calibration object once; the
arrays must equal those of the systems stacked one by one (batches of one)."""

from __future__ import annotations

from dataclasses import fields, replace

import numpy as np

from simcore.hardware.batch import SystemBatch
from simcore.specs.system import SystemSpec


def test_shared_and_distinct_device_specs_stack_like_single_systems() -> None:
    base = SystemSpec(num_gpus=64)
    fast = replace(base.accelerator, peak_tflops_bf16=900.0, hbm_bandwidth_GBps=4000.0)
    cal = replace(base.calibration, kernel_overhead_us=7.0)
    systems = [base, replace(base, accelerator=fast), replace(base, calibration=cal),
               replace(base, accelerator=fast, scaleout=replace(base.scaleout, bandwidth_GBps=50.0)),
               base, replace(base, accelerator=replace(fast, tdp_w=1.0), calibration=cal)]
    got = SystemBatch.from_specs(systems)
    singles = [SystemBatch.from_specs([s]) for s in systems]
    for f in fields(SystemBatch):
        if f.name in ("specs", "pool_index"):
            continue
        value = getattr(got, f.name)
        if isinstance(value, dict):
            for k, v in value.items():
                want = np.concatenate([getattr(b, f.name)[k] for b in singles], axis=-1)
                np.testing.assert_array_equal(v, want, err_msg=f"{f.name}[{k}]")
        else:
            want = np.concatenate([getattr(b, f.name) for b in singles], axis=-1)
            np.testing.assert_array_equal(value, want, err_msg=f.name)


def test_one_pool_path_equals_the_device_pool_path() -> None:
    """Systems without pools skip the per-point DevicePool objects: the same arrays as
    reading every point's resolved device pool."""
    base = SystemSpec(num_gpus=64)
    fast = replace(base.accelerator, peak_tflops_bf16=900.0, hbm_bandwidth_GBps=4000.0,
                   price_usd=1.0, tdp_w=2.0)
    cal = replace(base.calibration, kernel_overhead_us=7.0)
    systems = [base, replace(base, accelerator=fast), replace(base, calibration=cal),
               replace(base, scaleup=replace(base.scaleup, bandwidth_GBps=123.0,
                                             latency_ns=77.0)),
               replace(base, accelerator=fast, scaleout=replace(base.scaleout, bandwidth_GBps=50.0,
                                                               latency_ns=900.0)), base]
    assert all(not s.pools for s in systems)
    got = SystemBatch.from_specs(systems)
    want = SystemBatch._from_devices(systems)
    checked = 0
    for f in fields(SystemBatch):
        value, ref = getattr(got, f.name), getattr(want, f.name)
        if f.name == "specs":
            assert value == ref
        elif isinstance(value, dict):
            assert list(value) == list(ref)
            for k, v in value.items():
                np.testing.assert_array_equal(v, ref[k], err_msg=f"{f.name}[{k}]")
                assert v.shape == ref[k].shape
                checked += 1
        elif isinstance(value, np.ndarray):
            np.testing.assert_array_equal(value, ref, err_msg=f.name)
            assert value.shape == ref.shape and value.dtype == ref.dtype
            checked += 1
        else:
            assert value == ref
    assert checked > 20
    assert got.peak_flops["bf16"][1] == 900e12 and got.pool_tdp_w[0, 4] == 2.0
