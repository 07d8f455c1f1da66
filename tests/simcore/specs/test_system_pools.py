"""Device pools in the cluster spec: one pool by default, validation, normalization, Hydra keys."""

from __future__ import annotations

from dataclasses import fields, replace
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from search.config.build import build_system
from search.config.schema import validate_config
from simcore.api import structure_key
from simcore.errors import InputError
from simcore.specs.parallel import ParallelSpec
from simcore.specs.system import (
    AcceleratorSpec,
    CalibrationSpec,
    DevicePool,
    SystemSpec,
    TopologyDim,
    system_from_dict,
)
from simcore.workloads.transformer.spec import ModelSpec

CONF = Path(__file__).resolve().parents[3] / "conf"
CLUSTERS = sorted(p.stem for p in (CONF / "system").glob("*.yaml")
                  if not p.stem.startswith("mixed_"))  # mixed_*: clusters of several pools
H100 = AcceleratorSpec(**OmegaConf.to_container(  # type: ignore[arg-type]
    OmegaConf.load(CONF / "system" / "accelerator" / "h100_80g.yaml")))


def _cfg(*overrides: str):  # noqa: ANN202 - a DictConfig
    with initialize_config_dir(config_dir=str(CONF), version_base=None):
        return compose(config_name="config", overrides=list(overrides))


@pytest.mark.parametrize("name", CLUSTERS)
def test_every_preset_is_one_pool_with_the_old_fields(name: str) -> None:
    cfg = _cfg(f"system={name}")
    data = OmegaConf.to_container(cfg.system, resolve=True)
    assert isinstance(data, dict) and "pools" not in data  # the YAML is unchanged
    s = build_system(cfg)
    assert s.pools == () and s.num_pools == 1 and s.uniform_devices
    (pool,) = s.devices
    assert pool == DevicePool(s.accelerator, s.calibration, s.num_gpus, s.gpus_per_node,
                              s.scaleup)
    assert s.dims == (s.scaleup, s.scaleout)
    # the old fields hold exactly what the preset's groups say
    acc = OmegaConf.to_container(cfg.system.accelerator, resolve=True)
    assert s.accelerator == AcceleratorSpec(**acc)  # type: ignore[arg-type]
    assert s.calibration == CalibrationSpec(**cfg.system.calibration)
    # writing the one pool out explicitly builds an equal spec
    explicit = system_from_dict({**data, "pools": [{"count": s.num_gpus}]})
    assert explicit == s


def test_topology_dim_is_the_dimension_spec() -> None:
    s = SystemSpec(num_gpus=16, scaleout=TopologyDim(bandwidth_GBps=50.0))
    assert s.dims[1] is s.scaleout and s.dims[1].bandwidth_GBps == 50.0


def test_pool_zero_is_the_system_accelerator_and_other_pools_inherit() -> None:
    s = SystemSpec(num_gpus=16, pools=(DevicePool(H100, count=8), DevicePool(count=8)))
    assert s.accelerator == H100  # the alias is pool 0's
    assert [d.accelerator for d in s.devices] == [H100, H100] and s.uniform_devices
    a100 = AcceleratorSpec()
    mixed = SystemSpec(num_gpus=16, pools=(DevicePool(count=8), DevicePool(H100, count=8)))
    assert not mixed.uniform_devices
    assert [d.accelerator for d in mixed.devices] == [a100, H100]
    # replacing the alias changes pool 0 (and the pools that inherit it), not pool 1
    swapped = replace(mixed, accelerator=replace(a100, hbm_capacity_gib=40.0))
    assert [d.accelerator.hbm_capacity_gib for d in swapped.devices] == [40.0, 80.0]
    # a pool equal to pool 0 is stored as inheriting: two spellings, one spec
    same = SystemSpec(num_gpus=16, pools=(DevicePool(count=8), DevicePool(a100, count=8)))
    assert same == SystemSpec(num_gpus=16, pools=(DevicePool(count=8), DevicePool(count=8)))


def test_structure_key_has_pool_counts_but_no_hardware_numbers() -> None:
    model = ModelSpec(name="t", num_layers=4, hidden_size=256, num_heads=4, seq_len=256,
                      vocab_size=1024)
    par = ParallelSpec(global_batch=8)
    one = SystemSpec(num_gpus=16, gpus_per_node=4)
    halves = replace(one, pools=(DevicePool(count=8), DevicePool(count=8)))
    uneven = replace(one, pools=(DevicePool(count=4), DevicePool(count=12)))
    other_hw = replace(halves, pools=(DevicePool(count=8), DevicePool(H100, count=8)))
    keys = [structure_key(model, par, s) for s in (one, halves, uneven, other_hw)]
    assert keys[0] == (model, par, 16, 4)  # the one-pool key is unchanged
    assert len({keys[0], keys[1], keys[2]}) == 3
    assert keys[1] == keys[3]


@pytest.mark.parametrize(
    ("pools", "key", "value", "rule"),
    [
        ([{"count": 8}], "system.pools", [8], "sum to num_gpus=16"),
        ([{"count": 8}, {"count": 16}], "system.pools", [8, 16], "sum to num_gpus=16"),
        ([{"count": 0}, {"count": 16}], "system.pools.0.count", 0, "positive whole number"),
        ([{"count": 8}, {}], "system.pools.1.count", 0, "positive whole number"),
        ([{"count": 8}, {"count": 8.0}], "system.pools.1.count", 8.0, "positive whole number"),
        ([{"count": 8}, {"count": True}], "system.pools.1.count", True, "positive whole number"),
        ([{"count": 12}, {"count": 4}], "system.pools.0.count", 12, "whole nodes"),
        ([{"count": 8}, {"count": 8, "gpus_per_node": 4}], "system.pools.1.gpus_per_node", 4,
         "not modelled yet"),
        ([{"count": 8}, {"count": 8, "colour": 1}], "system.pools.1.colour", 1, "unknown key"),
        ([{"count": 8}, {"count": 8, "accelerator": {"tdp_w": -1.0}}],
         "system.pools.1.accelerator.tdp_w", -1.0, ">= 0"),
        ([{"count": 8}, {"count": 8, "calibration": {"hbm_efficiency": 2.0}}],
         "system.pools.1.calibration.hbm_efficiency", 2.0, "fraction"),
        ([{"count": 16}, 5], "system.pools.1", 5, "mapping"),
    ],
)
def test_bad_pools_name_key_value_rule(pools: list, key: str, value: object, rule: str) -> None:
    with pytest.raises(InputError) as err:
        system_from_dict({"num_gpus": 16, "gpus_per_node": 8, "pools": pools})
    assert (err.value.key, err.value.value) == (key, value)
    assert rule in err.value.rule and "\n" not in str(err.value)


def test_hydra_pools_by_preset_name() -> None:
    cfg = _cfg("system.num_gpus=16",
               "+system.pools=[{accelerator: h100_80g, calibration: h100, count: 8},"
               " {accelerator: a100_80g, count: 8}]")
    validate_config(cfg)
    s = build_system(cfg)
    assert [d.accelerator.name for d in s.devices] == ["h100_80g", "a100_80g"]
    assert [d.count for d in s.devices] == [8, 8]
    assert s.accelerator == H100  # alias of pool 0
    h100_cal = OmegaConf.load(CONF / "system" / "calibration" / "h100.yaml")
    assert all(d.calibration == CalibrationSpec(**h100_cal) for d in s.devices)  # inherited


@pytest.mark.parametrize("group", ["accelerator", "calibration"])
def test_hydra_unknown_preset_names_the_pool_key(group: str) -> None:
    cfg = _cfg("system.num_gpus=16", f"+system.pools=[{{count: 8}}, {{{group}: tpu_v9, count: 8}}]")
    validate_config(cfg)
    with pytest.raises(InputError) as err:
        build_system(cfg)
    assert (err.value.key, err.value.value) == (f"system.pools.1.{group}", "tpu_v9")
    assert f"unknown {group} preset" in err.value.rule


def test_schema_knows_the_pools_key() -> None:
    from search.config.schema import group_schemas

    assert "pools" in {f.name for f in fields(group_schemas()["system"])}
    with pytest.raises(InputError, match=r"system\.pools"):
        validate_config(_cfg("+system.pools=3"))
