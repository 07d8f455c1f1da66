"""Structured-config schemas mirrored from the spec dataclasses (search/config/schema.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import pytest
from omegaconf import OmegaConf

from search.config.schema import mirror, validate_value
from simcore.errors import InputError


@dataclass(frozen=True)
class _Dim:
    kind: Literal["Ring", "Switch"] = "Switch"
    bandwidth_GBps: float = 100.0


@dataclass(frozen=True)
class _Spec:
    name: str
    sizes: tuple[int, ...] = (8, 4)
    dp: int | None = None
    dim: _Dim = field(default_factory=_Dim)


def test_mirror_keeps_fields_defaults_and_nesting():
    node = OmegaConf.structured(mirror(_Spec))
    assert OmegaConf.is_missing(node, "name")
    assert list(node.sizes) == [8, 4] and node.dp is None
    assert node.dim.bandwidth_GBps == 100.0
    node.dim.kind = "Ring"
    with pytest.raises(Exception, match="expected one of"):
        node.dim.kind = "Torus"


@pytest.mark.parametrize(("group", "content", "key", "rule"), [
    ("sweep", {"batch_sise": 8}, "sweep.batch_sise", "unknown key"),
    ("sweep", {"batch_size": "many"}, "sweep.batch_size", "auto or an integer"),
    ("sweep", {"batch_size": 0}, "sweep.batch_size", "auto or an integer in [1, 1000000]"),
    ("sweep", {"batch_size": 2.5}, "sweep.batch_size", "auto or an integer"),
    ("ray", {"num_workers": 2.5}, "ray.num_workers", "Integer"),
    ("tracking", {"enabled": "perhaps"}, "tracking.enabled", "bool"),
    # OmegaConf takes these for a bool, but the config keeps the raw value, and "no" is truthy
    ("sweep", {"resume": "no"}, "sweep.resume", "must be true or false"),
    ("sweep", {"in_process": 0}, "sweep.in_process", "must be true or false"),
    ("tracking", {"plots": "off"}, "tracking.plots", "must be true or false"),
])
def test_own_groups_reject_typos_and_wrong_types_naming_key_value_rule(group, content, key, rule):
    with pytest.raises(InputError) as err:
        validate_value(group, content)
    assert err.value.key == key and rule in err.value.rule
    assert "valid keys here" not in err.value.rule or "batch_size" in err.value.rule


def test_a_nested_bool_written_as_a_word_is_refused_where_true_and_false_pass():
    assert validate_value("sweep", {"resume": True, "in_process": False, "progress": True}) is None
    with pytest.raises(InputError) as err:
        validate_value("parallel", {"tp": 2, "sequence_parallel": "yes"})
    assert err.value.key == "parallel.sequence_parallel" and err.value.value == "yes"


def test_a_group_found_valid_once_does_not_make_another_content_pass(monkeypatch):
    """validate_config remembers contents found valid (a sweep's combinations repeat most
    groups); a changed value, or a group whose content holds an interpolation, is checked."""
    from pathlib import Path

    from search.config import schema
    from search.config.compose import compose

    conf = Path(__file__).resolve().parents[3] / "conf"
    cfg = compose(["parallel.tp=4"], conf)
    schema.validate_config(cfg)
    assert ("parallel", schema._content_key("parallel", cfg.parallel)[1]) in schema._valid
    checked = []
    monkeypatch.setattr(schema, "validate_value",
                        lambda group, node: checked.append(group) or validate_value(group, node))
    schema.validate_config(cfg)
    assert checked == []  # every group was found valid before
    cfg.parallel.tp = "four"
    with pytest.raises(InputError, match="parallel.tp"):
        schema.validate_config(cfg)
    assert checked == ["parallel"]
    monkeypatch.setenv("SIMSWEEP_TEST_TP", "2")
    cfg.parallel.tp = "${oc.env:SIMSWEEP_TEST_TP}"
    schema.validate_config(cfg)
    monkeypatch.setenv("SIMSWEEP_TEST_TP", "two")
    with pytest.raises(InputError, match="parallel.tp"):
        schema.validate_config(cfg)  # same raw content, other value: checked again


def test_the_cached_schema_form_is_not_changed_by_the_checks_it_serves():
    from search.config import schema

    schema.validate_value("sweep", {"batch_size": 8, "name": "a"})
    cached = schema._STRUCTURED[schema.group_schemas()["sweep"]]
    before = OmegaConf.to_yaml(cached)
    schema.validate_value("sweep", {"batch_size": 16, "name": "b", "axes": {"k": "1,2"}})
    with pytest.raises(InputError, match="sweep.batch_sise"):
        schema.validate_value("sweep", {"batch_sise": 8})
    assert OmegaConf.to_yaml(cached) == before
