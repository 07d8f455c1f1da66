"""Value overrides applied to a composed config equal a full Hydra composition
(search/config/compose.py: split_value_overrides, with_value_overrides)."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from search.config.compose import compose, split_value_overrides, with_value_overrides
from simcore.errors import InputError

CONF = Path(__file__).resolve().parents[3] / "conf"


def _same(a: object, b: object) -> None:
    assert OmegaConf.to_yaml(a) == OmegaConf.to_yaml(b)  # raw: interpolations kept
    assert OmegaConf.to_yaml(a, resolve=True) == OmegaConf.to_yaml(b, resolve=True)
    assert OmegaConf.is_struct(a) == OmegaConf.is_struct(b)


@pytest.mark.parametrize(("fixed", "extra"), [
    (["workload=gpt3_175b"], ["parallel.tp=4", "parallel.pp=8", "parallel.micro_batch=2"]),
    ([], ["parallel.zero_stage=3", "parallel.recompute=full", "system.scaleout.bandwidth_GBps=50.5"]),
    ([], ["parallel.dp=null", "tracking.experiment='my sweep: a/b'"]),
    (["system=mixed_h100_a100"], ["system.pools.0.count=16", "parallel.work_shares=[1.0,0.5]",
                                  "parallel.work_split=explicit"]),  # num_gpus interpolates pools
    (["workload=gpt3_175b", "parallel.tp=2"], ["parallel.tp=8"]),  # a fixed value overridden again
    (["system.num_gpus=64", "+system.scaleout_dims=[{kind:Ring,size:2,bandwidth_GBps:100,"
      "latency_ns:500},{kind:Switch,size:4,bandwidth_GBps:50,latency_ns:1000}]"],
     ["system.scaleout_dims.0.bandwidth_GBps=200"]),  # a list element's field
])
def test_value_overrides_on_a_copy_equal_a_full_composition(fixed, extra):
    base = compose(fixed, CONF)
    before = OmegaConf.to_yaml(base)
    derived = with_value_overrides(base, extra)
    assert derived is not None
    _same(derived, compose([*fixed, *extra], CONF))
    assert OmegaConf.to_yaml(base) == before  # the composed config is not changed


@pytest.mark.parametrize("override", [
    "workload=gpt_tiny",  # a config group choice
    "fidelity=astra",  # a top-level key: could be a group, Hydra decides
    "+parallel.extra_key=1", "++parallel.tp=2", "~parallel.dp",  # add, force-add, delete
    "parallel.tp=1,2",  # a sweep, not one value
])
def test_overrides_that_need_hydra_are_left_to_it(override):
    others, values = split_value_overrides(["parallel.pp=2", override])
    assert others == (override,) and values == ("parallel.pp=2",)
    assert with_value_overrides(compose([], CONF), [override]) is None


def test_a_value_related_to_another_kind_of_override_keeps_its_place_beside_it():
    others, values = split_value_overrides(["system=dgx_h100_80g", "system.num_gpus=16",
                                            "parallel.tp=2"])
    assert others == ("system=dgx_h100_80g", "system.num_gpus=16")
    assert values == ("parallel.tp=2",)
    others, values = split_value_overrides(["parallel.tp=2", "~parallel.tp", "parallel.pp=4"])
    assert others == ("parallel.tp=2", "~parallel.tp") and values == ("parallel.pp=4",)


def test_a_key_the_config_does_not_have_is_left_to_hydra():
    from simcore.errors import InputError

    assert with_value_overrides(compose([], CONF), ["parallel.no_such_key=1"]) is None
    with pytest.raises(InputError, match="parallel.no_such_key"):
        compose(["parallel.no_such_key=1"], CONF)


def test_a_value_of_the_wrong_type_fails_validation_as_a_composed_one_does():
    from search.config.schema import validate_config
    from simcore.errors import InputError

    derived = with_value_overrides(compose([], CONF), ["parallel.tp=abc"])
    assert derived is not None
    _same(derived, compose(["parallel.tp=abc"], CONF))
    with pytest.raises(InputError, match="parallel.tp"):
        validate_config(derived)


def test_every_plan_field_can_be_set_from_the_command_line():
    """``parallel.<field>=value`` must override a key of the composed config: a field missing
    from ``conf/parallel/default.yaml`` needs Hydra's ``+`` (``Could not override``), which no
    user guesses. The software-stack fields come from the ``stack`` group instead."""
    from dataclasses import fields

    from search.config.build import build_parallel
    from simcore.specs.parallel import ParallelSpec
    from simcore.specs.stack import STACK_PLAN_FIELDS

    stack_set = set(STACK_PLAN_FIELDS)
    cfg = compose(["parallel.pp=4", "parallel.vp=2", "parallel.microbatch_group=6",
                   "parallel.ep=2", "parallel.ep_overlap_chunks=2"])
    keys = set(cfg.parallel)
    missing = {f.name for f in fields(ParallelSpec)} - stack_set - keys
    assert not missing, missing
    assert stack_set <= set(cfg.stack)
    plan = build_parallel(cfg)
    assert (plan.microbatch_group, plan.ep_overlap_chunks) == (6, 2)


def test_a_plan_field_set_beside_a_stack_keeps_the_value_set():
    """``stack=deepspeed`` sets the BF16_Optimizer path and unfused accumulation; a plan that
    sets either itself (``+parallel.<field>``: the presets leave them to the stack) keeps its
    value instead of losing it silently; a stack that leaves a field null keeps the plan's."""
    from search.config.build import build_parallel

    def plan(*overrides: str) -> tuple[bool, bool]:
        p = build_parallel(compose(list(overrides)))
        return p.grad_accumulation_fusion, p.bf16_optimizer

    assert plan("stack=deepspeed") == (False, True)
    assert plan("stack=deepspeed", "+parallel.bf16_optimizer=false") == (False, False)
    assert plan("stack=deepspeed", "+parallel.grad_accumulation_fusion=true") == (True, True)
    assert plan("stack=megatron_core") == (True, False)
    assert plan("stack=megatron_core", "+parallel.grad_accumulation_fusion=false") == (False, False)


@pytest.mark.parametrize("preset", sorted(p.stem for p in (CONF / "workload").glob("*.yaml")))
def test_every_model_field_of_a_workload_preset_can_be_set_from_the_command_line(preset):
    """As the plan's fields: ``workload.<field>=value`` on any preset, e.g.
    ``workload.dropout=0`` on gpt_1b, must not need Hydra's ``+``."""
    from dataclasses import fields

    from simcore.workloads import get_family

    cfg = compose([f"workload={preset}"])
    spec = get_family(str(cfg.workload.get("family", "transformer"))).spec_type
    missing = {f.name for f in fields(spec)} - set(cfg.workload)
    assert not missing, missing


@pytest.mark.parametrize("preset", sorted(p.stem for p in (CONF / "system").glob("*.yaml")))
def test_every_accelerator_topology_and_calibration_field_can_be_set(preset):
    """``system.accelerator.<field>`` (e.g. a what-if NVFP4 peak on an H100), ``system.scaleup.*``,
    ``system.scaleout.*`` and ``system.calibration.*`` on every cluster preset."""
    from dataclasses import fields

    from simcore.specs.system import AcceleratorSpec, CalibrationSpec, TopologyDimSpec

    system = compose([f"system={preset}"]).system
    for node, spec in (("accelerator", AcceleratorSpec), ("scaleup", TopologyDimSpec),
                       ("scaleout", TopologyDimSpec), ("calibration", CalibrationSpec)):
        missing = {f.name for f in fields(spec)} - set(system[node])
        assert not missing, (node, missing)


def test_an_override_omegaconf_cannot_merge_is_named_with_its_reason_not_every_override():
    dims = ("+system.scaleout_dims=[{kind: FullyConnected, size: 8, bandwidth_GBps: 100, "
            "latency_ns: 500}, {kind: Switch, size: 4, bandwidth_GBps: 50, latency_ns: 2000}]")
    with pytest.raises(InputError) as err:
        compose(["system.num_gpus=64", "system.gpus_per_node=2", dims,
                 "system.scaleout_dims.2.bandwidth_GBps=5"])
    assert err.value.key == "system.scaleout_dims.2.bandwidth_GBps" and err.value.value == "5"
    assert err.value.rule == "cannot set it: list index out of range (system.scaleout_dims[2])"
