"""Every config file in conf/ composes, passes its schema and builds specs (STYLE.md test 6).

Each option of each group (nested groups such as ``system/accelerator`` included) is selected on
top of conf/config.yaml and composed with Hydra's compose API; the result is validated against
the structured-config schemas (search/config/schema.py) and translated by search/config/build.py. A typo or a
wrong type in any group must be an error naming the key, the value and the rule.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from search.config.build import build_specs
from search.config.compose import compose_session
from search.config.schema import validate_config
from simcore.errors import InputError
from simcore.workloads import get_family

CONF = Path(__file__).resolve().parents[2] / "conf"
OPTIONS = sorted(
    (str(p.parent.relative_to(CONF)), p.stem)
    for p in CONF.rglob("*.yaml") if p.parent != CONF
)


#: options with a value the user must give (``???``): that value, and the error without it
REQUIRED = {("workload", "traced"): ("workload.trace=runs/model.0.et", "workload.trace")}


@pytest.fixture(scope="module")
def compose():
    fn, _ = compose_session(CONF)
    return fn


def test_every_group_of_the_config_tree_has_files():
    groups = {g.split("/")[0] for g, _ in OPTIONS}
    assert {"workload", "system", "parallel", "collective", "memory", "sweep", "search",
            "tracking", "ray"} <= groups


@pytest.mark.parametrize(("group", "option"), OPTIONS, ids=[f"{g}={o}" for g, o in OPTIONS])
def test_option_composes_validates_and_builds(compose, group, option):
    given, key = REQUIRED.get((group, option), (None, None))
    if given is not None:  # without it: one error naming the missing key
        with pytest.raises(InputError, match="required value is missing") as err:
            validate_config(compose([f"{group}={option}"]))
        assert err.value.key == key
    cfg = compose([f"{group}={option}", *([given] if given else [])])
    validate_config(cfg)
    model, parallel, system = build_specs(cfg)
    family = get_family(str(cfg.workload.get("family", "transformer")))
    assert isinstance(model, family.spec_type)  # the spec of the family the file names
    assert parallel.tp >= 1 and system.num_gpus >= 1
    top = group.split("/")[0]
    assert OmegaConf.select(cfg, top) is not None


@pytest.mark.parametrize(("override", "key", "rule"), [
    ("sweep.batch_size=many", "sweep.batch_size", "auto or an integer"),
    ("+sweep.batch_sise=3", "sweep.batch_sise", "unknown key"),
    ("+tracking.urii=x", "tracking.urii", "unknown key"),
    ("ray.num_workers=0", "ray.num_workers", ">= 1"),
    ("sweep.mode=grud", "sweep.mode", "grid, random"),
    ("memory.kind=cxl", "memory.kind", "one of"),
    ("+system.scaleout.bandwith_GBps=100", "system.scaleout.bandwith_GBps", "unknown key"),
    ("system.scaleout.bandwidth_GBps=fast", "system.scaleout.bandwidth_GBps", "Float"),
    ("parallel.tp=two", "parallel.tp", "Integer"),
])
def test_typos_and_wrong_types_are_errors_naming_key_value_rule(compose, override, key, rule):
    with pytest.raises(InputError) as err:
        validate_config(compose([override]))
    assert err.value.key == key, err.value
    assert rule in err.value.rule
    assert str(err.value).count("\n") == 0


def test_endpoint_is_in_every_system_with_the_spec_defaults(compose):
    from simcore.specs.endpoint import EndpointSpec

    for system in ("dgx_h100_80g", "mixed_v100_p100"):
        cfg = compose([f"system={system}"])
        assert build_specs(cfg)[2].endpoint == EndpointSpec()  # yaml defaults = the spec's


def test_endpoint_keys_override_without_plus(compose):
    cfg = compose(["system.endpoint.collective_engine=ace", "system.endpoint.sms=132"])
    validate_config(cfg)
    endpoint = build_specs(cfg)[2].endpoint
    assert (endpoint.collective_engine, endpoint.sms) == ("ace", 132)
    with pytest.raises(InputError, match=r"system\.endpoint\.collective_engine='gpu'"):
        build_specs(compose(["system.endpoint.collective_engine=gpu"]))
