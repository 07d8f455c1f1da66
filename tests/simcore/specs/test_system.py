"""SystemSpec validation, dict building and the conf/system presets (composed with Hydra)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from simcore.errors import InputError
from simcore.hardware.batch import SystemBatch
from simcore.specs.system import (
    AcceleratorSpec,
    CalibrationSpec,
    DevicePool,
    SystemSpec,
    TopologyDimSpec,
    system_from_dict,
)

CONF = Path(__file__).resolve().parents[3] / "conf"
CLUSTERS = sorted(p.stem for p in (CONF / "system").glob("*.yaml")
                  if not p.stem.startswith("mixed_"))  # pools name presets: test_mixed_presets
ACCELERATORS = sorted(p.stem for p in (CONF / "system" / "accelerator").glob("*.yaml"))


def _compose(*overrides: str) -> dict:
    with initialize_config_dir(config_dir=str(CONF), version_base=None):
        cfg = compose(overrides=list(overrides))
    return OmegaConf.to_container(cfg.system, resolve=True)  # type: ignore[return-value]


def test_defaults_are_valid_and_derive_sizes() -> None:
    s = SystemSpec(num_gpus=64)
    assert s.num_nodes == 8
    assert s.with_num_gpus(16).num_nodes == 2


@pytest.mark.parametrize(
    ("make", "key"),
    [
        (lambda: AcceleratorSpec(hbm_bandwidth_GBps=0.0), "system.accelerator.hbm_bandwidth_GBps"),
        (lambda: SystemSpec(scaleup=TopologyDimSpec(kind="Torus")), "system.scaleup.kind"),
        (lambda: SystemSpec(num_gpus=12, gpus_per_node=8), "system.num_gpus"),
        (lambda: SystemSpec(calibration=CalibrationSpec(hbm_efficiency=1.5)),
         "system.calibration.hbm_efficiency"),
        (lambda: SystemSpec(scaleout=TopologyDimSpec(latency_ns=-1.0)), "system.scaleout.latency_ns"),
        (lambda: SystemSpec(num_gpus=16, scaleout=TopologyDimSpec(size=3)), "system.scaleout.size"),
    ],
)
def test_bad_values_name_key_value_rule(make, key: str) -> None:
    with pytest.raises(InputError) as err:
        make()
    assert err.value.key == key
    assert "\n" not in str(err.value) and str(err.value).startswith(key + "=")


def test_unknown_key_is_rejected() -> None:
    with pytest.raises(InputError, match=r"system\.scaleout\.bandwidth_gbps"):
        system_from_dict({"scaleout": {"bandwidth_gbps": 3.0}})


def test_unsupported_precision() -> None:
    v100 = AcceleratorSpec(name="v100", peak_tflops_bf16=0.0, peak_tflops_fp16=125.0)
    assert v100.peak_tflops("fp16") == 125.0
    with pytest.raises(InputError, match="not supported"):
        v100.peak_tflops("bf16")


@pytest.mark.parametrize("cluster", CLUSTERS)
def test_every_cluster_preset_composes_and_validates(cluster: str) -> None:
    spec = system_from_dict(_compose(f"+system={cluster}"))
    assert spec.name == cluster
    assert spec.gpus_per_node == (72 if cluster.endswith("_nvl72") else 8)  # NVL72: one rack


@pytest.mark.parametrize("accel", ACCELERATORS)
def test_accelerator_is_a_group_axis(accel: str) -> None:
    spec = system_from_dict(_compose("+system=dgx_a100_80g", f"system/accelerator={accel}"))
    assert spec.accelerator.name == accel


def test_datasheet_figures_of_presets() -> None:
    # golden numbers: reference/peers-hardware-measurements.md A.3
    a100 = system_from_dict(_compose("+system=dgx_a100_80g"))
    h100 = system_from_dict(_compose("+system=dgx_h100_80g"))
    assert (a100.accelerator.peak_tflops_fp16, a100.accelerator.hbm_bandwidth_GBps) == (312.0, 2039.0)
    assert a100.scaleup.bandwidth_GBps == 300.0 and a100.scaleout.bandwidth_GBps == 25.0
    assert round(h100.accelerator.peak_tflops_bf16) == 989
    assert h100.accelerator.hbm_bandwidth_GBps == 3350.0 and h100.scaleout.bandwidth_GBps == 50.0


def test_sweep_axis_override_reaches_spec() -> None:
    spec = system_from_dict(_compose("+system=dgx_h100_80g", "system.scaleout.bandwidth_GBps=125",
                                     "system.num_gpus=64"))
    assert spec.scaleout.bandwidth_GBps == 125 and spec.num_nodes == 8


def test_batch_stacks_numeric_fields() -> None:
    base = SystemSpec(num_gpus=16)
    systems = [replace(base, scaleout=replace(base.scaleout, bandwidth_GBps=bw)) for bw in (12.5, 50.0)]
    batch = SystemBatch.from_specs(systems)
    assert batch.size == 2
    np.testing.assert_allclose(batch.scaleout_bandwidth_Bps, [12.5e9, 50e9])
    np.testing.assert_allclose(batch.peak("fp16"), [312e12, 312e12])
    assert batch.calib["hbm_efficiency"].shape == (2,)
    with pytest.raises(InputError):
        SystemBatch.from_specs([])
    with pytest.raises(InputError, match="fp8"):
        batch.peak("fp8")


def _outcome(make):
    """(the system, None) or (None, the InputError's message) of ``make()``."""
    try:
        return make(), None
    except InputError as err:
        return None, str(err)


_SUBSPECS = [
    ("scaleup", lambda s, v: replace(s.scaleup, bandwidth_GBps=v)),
    ("scaleup", lambda s, v: replace(s.scaleup, latency_ns=v)),
    ("scaleup", lambda s, v: replace(s.scaleup, size=int(v))),
    ("scaleout", lambda s, v: replace(s.scaleout, bandwidth_GBps=v)),
    ("scaleout", lambda s, v: replace(s.scaleout, size=int(v), kind="Ring" if v > 5 else "Bus")),
    ("calibration", lambda s, v: replace(s.calibration, scaleup_efficiency=v)),
    ("calibration", lambda s, v: replace(s.calibration, switch_allreduce_gain=v)),
    ("calibration", lambda s, v: replace(s.calibration, kernel_launch_floor_us=v)),
]


@pytest.mark.parametrize("system", [
    SystemSpec(num_gpus=64),
    SystemSpec(num_gpus=64, scaleout_dims=(TopologyDimSpec(size=2), TopologyDimSpec(size=4))),
    SystemSpec(num_gpus=16, pools=(DevicePool(count=8), DevicePool(count=8))),
], ids=["plain", "scale-out dims", "pools"])
def test_with_field_equals_replace_on_valid_and_invalid_values(system):
    """with_field checks only the rules that involve the field; it must give what replace
    gives, system or error, for every value (a rule added to __post_init__ for one sub-spec
    and not to _field_rules makes this fail)."""
    rng = np.random.default_rng(0)
    values = [0.0, -1.0, 1.0, 8.0, float("nan"), float("inf"), 1.5, 2.0]
    values += rng.uniform(-2, 12, 40).round(2).tolist()
    checked = 0
    for name, make in _SUBSPECS:
        for v in values:
            try:
                sub = make(system, v)  # a sub-spec that checks itself may refuse v already
            except (InputError, ValueError, OverflowError):  # int(nan), int(inf)
                continue
            fast, fast_err = _outcome(lambda n=name, s=sub: system.with_field(n, s))
            full, full_err = _outcome(lambda n=name, s=sub: replace(system, **{n: s}))
            assert fast_err == full_err, (name, v)
            assert fast == full, (name, v)
            checked += 1
    accel = replace(system.accelerator, hbm_bandwidth_GBps=3000.0)
    assert system.with_field("accelerator", accel) == replace(system, accelerator=accel)
    assert (_outcome(lambda: system.with_field("num_gpus", 128))  # a shape field: replace
            == _outcome(lambda: replace(system, num_gpus=128)))
    assert checked > 200


def test_one_pool_batch_equals_the_device_pool_path_bit_for_bit() -> None:
    """SystemBatch reads systems without pools field by field per distinct sub-spec, scaling
    in numpy; the general path reads every resolved device pool per point in Python. Both must
    give the same float64 bits for systems that share some sub-specs and not others."""
    rng = np.random.default_rng(7)
    base = SystemSpec(num_gpus=64)
    shared_acc = replace(base.accelerator, hbm_bandwidth_GBps=1234.5678)
    systems = []
    for i in range(60):
        acc = shared_acc if i % 3 == 0 else replace(
            base.accelerator, hbm_bandwidth_GBps=float(rng.uniform(100, 5000)),
            peak_tflops_bf16=float(rng.uniform(1, 2000)), hbm_capacity_gib=float(rng.uniform(1, 300)),
            price_usd=int(rng.integers(0, 50000)))
        systems.append(replace(
            base, accelerator=acc,
            scaleout=replace(base.scaleout, bandwidth_GBps=float(rng.uniform(0.1, 900)),
                             latency_ns=float(rng.uniform(0, 1e5))),
            scaleup=replace(base.scaleup, latency_ns=int(rng.integers(0, 3000))),
            calibration=replace(base.calibration, hbm_efficiency=float(rng.uniform(0.01, 1)))))
    fast, slow = SystemBatch._one_pool(systems), SystemBatch._from_devices(systems)
    for name in ("num_gpus", "gpus_per_node", "hbm_bandwidth_Bps", "hbm_capacity_bytes",
                 "scaleup_bandwidth_Bps", "scaleout_bandwidth_Bps", "scaleup_latency_s",
                 "scaleout_latency_s", "pool_count", "pool_hbm_bandwidth_Bps",
                 "pool_hbm_capacity_bytes", "pool_price_usd", "pool_tdp_w",
                 "pool_scaleup_bandwidth_Bps", "pool_scaleup_latency_s"):
        a, b = getattr(fast, name), getattr(slow, name)
        assert a.dtype == b.dtype == np.float64 and a.tobytes() == b.tobytes(), name
    for group in ("peak_flops", "calib", "pool_peak_flops", "pool_calib"):
        for key, a in getattr(fast, group).items():
            assert a.tobytes() == getattr(slow, group)[key].tobytes(), (group, key)
