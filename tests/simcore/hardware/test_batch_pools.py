"""SystemBatch's device-pool axis: (D, B) arrays, pool views, kernels costed per pool."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from simcore.errors import InputError
from simcore.hardware import (
    SystemBatch,
    attention_time_s,
    gather_by_pool,
    gemm_time_s,
    memory_bound_time_s,
    per_pool,
)
from simcore.specs.system import AcceleratorSpec, CalibrationSpec, DevicePool, SystemSpec

CONF = Path(__file__).resolve().parents[3] / "conf" / "system"


def _acc(name: str) -> AcceleratorSpec:
    return AcceleratorSpec(**yaml.safe_load((CONF / "accelerator" / f"{name}.yaml").read_text()))


def _cal(name: str) -> CalibrationSpec:
    return CalibrationSpec(**yaml.safe_load((CONF / "calibration" / f"{name}.yaml").read_text()))


A100, H100 = _acc("a100_80g"), _acc("h100_80g")


def _mixed(fast: AcceleratorSpec = H100) -> SystemSpec:
    return SystemSpec(num_gpus=16, calibration=_cal("a100"),
                      pools=(DevicePool(count=8), DevicePool(fast, _cal("h100"), count=8)))


def test_two_pool_batch_has_d_by_b_arrays_from_the_yaml() -> None:
    sb = SystemBatch.from_specs([_mixed(), _mixed(_acc("h200_141g"))])
    assert sb.num_pools == 2 and sb.size == 2
    assert sb.pool_count.tolist() == [[8.0, 8.0], [8.0, 8.0]]
    assert sb.pool_hbm_bandwidth_Bps.shape == (2, 2)
    assert sb.pool_hbm_bandwidth_Bps[:, 0].tolist() == [2039.0e9, 3350.0e9]
    assert sb.pool_hbm_capacity_bytes[:, 1].tolist() == [80 * 2**30, 141 * 2**30]  # H200: 141 GB
    assert sb.pool_peak_flops["bf16"][:, 0].tolist() == [312.0e12, 989.4e12]
    assert sb.pool_price_usd[:, 0].tolist() == [15000.0, 30000.0]
    assert sb.pool_tdp_w[:, 0].tolist() == [400.0, 700.0]
    assert sb.pool_calib["scaleup_efficiency"][:, 0].tolist() == [
        _cal("a100").scaleup_efficiency, _cal("h100").scaleup_efficiency]
    # the (B,) fields are pool 0's row; pool(1) shows pool 1's, network fields unchanged
    assert np.shares_memory(sb.hbm_bandwidth_Bps, sb.pool_hbm_bandwidth_Bps)
    assert sb.hbm_bandwidth_Bps.tolist() == [2039.0e9, 2039.0e9]
    p1 = sb.pool(1)
    assert p1.pool_index == 1 and p1.peak("bf16").tolist() == [989.4e12, 989.4e12]
    assert p1.calib["hbm_efficiency"][0] == _cal("h100").hbm_efficiency
    assert p1.scaleout_bandwidth_Bps is sb.scaleout_bandwidth_Bps
    assert sb.pool(0) is sb


def test_one_pool_batch_is_the_old_batch() -> None:
    sb = SystemBatch.from_specs([SystemSpec(num_gpus=16, accelerator=H100)])
    assert sb.num_pools == 1 and sb.pool_count.tolist() == [[16.0]]
    assert sb.peak_flops["bf16"].tolist() == [989.4e12] and sb.hbm_capacity_bytes.shape == (1,)


def test_batches_need_one_pool_count_and_pools_exist() -> None:
    with pytest.raises(InputError, match="same number of pools"):
        SystemBatch.from_specs([_mixed(), SystemSpec(num_gpus=16)])
    sb = SystemBatch.from_specs([_mixed()])
    with pytest.raises(InputError) as err:
        sb.pool(2)
    assert (err.value.key, err.value.value) == ("pool", 2)


def test_kernels_are_costed_on_their_pool() -> None:
    sb = SystemBatch.from_specs([_mixed()])
    alone = SystemBatch.from_specs([SystemSpec(accelerator=H100, calibration=_cal("h100"))])
    m, n, k = np.array([1024.0, 8192.0]), np.array([12288.0, 8192.0]), np.array([4096.0, 256.0])
    np.testing.assert_array_equal(gemm_time_s(sb, m, n, k, "bf16", pool=1),
                                  gemm_time_s(alone, m, n, k, "bf16"))
    np.testing.assert_array_equal(attention_time_s(sb, 32, 2048, 2048, 128, True, "bf16", pool=1),
                                  attention_time_s(alone, 32, 2048, 2048, 128, True, "bf16"))
    np.testing.assert_array_equal(memory_bound_time_s(sb, 1e9, pool=1),
                                  memory_bound_time_s(alone, 1e9))
    # the default is pool 0, as before
    np.testing.assert_array_equal(gemm_time_s(sb, m, n, k, "bf16"),
                                  gemm_time_s(sb, m, n, k, "bf16", pool=0))
    every = per_pool(gemm_time_s, sb, m, n, k, "bf16")
    assert every.shape == (2, 2, 1)
    assert np.all(every[1] < every[0])  # H100 is faster than A100 on both shapes
    picked = gather_by_pool(every, np.array([1, 0]))
    np.testing.assert_array_equal(picked, np.stack([every[1, 0], every[0, 1]]))
    with pytest.raises(InputError):
        gather_by_pool(every, np.array([2, 0]))
