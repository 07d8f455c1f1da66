"""CollectiveSpec / RemoteMemorySpec validation: bad values name key, value and rule."""

from __future__ import annotations

import pytest

from simcore.errors import InputError
from simcore.specs.collective import CollectiveSpec
from simcore.specs.memory_tier import RemoteMemorySpec
from simcore.specs.system import SystemSpec, system_from_dict


@pytest.mark.parametrize(("kwargs", "key"), [
    ({"all_reduce": ("rign",)}, "collective.all_reduce"),
    ({"all_reduce": ("auto", "ring")}, "collective.all_reduce"),
    ({"all_reduce": ("ring", "ring", "ring")}, "collective.all_reduce"),
    ({"all_gather": ("doubleBinaryTree",)}, "collective.all_gather"),
    ({"all_to_all": ("halvingDoubling",)}, "collective.all_to_all"),
    ({"chunks_per_collective": 0}, "collective.chunks_per_collective"),
])
def test_bad_collective_values(kwargs: dict[str, object], key: str) -> None:
    with pytest.raises(InputError) as err:
        CollectiveSpec(**kwargs)  # type: ignore[arg-type]
    assert err.value.key == key and "\n" not in str(err.value)


@pytest.mark.parametrize(("kwargs", "key"), [
    ({"kind": "cxl"}, "memory.kind"),
    ({"kind": "none", "offload_optimizer": True}, "memory.kind"),
    ({"kind": "pool", "offload_optimizer": True, "capacity_gib": 1.0}, "memory.bandwidth_GBps"),
    ({"kind": "pool", "offload_optimizer": True, "bandwidth_GBps": 1.0}, "memory.capacity_gib"),
    ({"latency_ns": -1.0}, "memory.latency_ns"),
])
def test_bad_memory_values(kwargs: dict[str, object], key: str) -> None:
    with pytest.raises(InputError) as err:
        RemoteMemorySpec(**kwargs)  # type: ignore[arg-type]
    assert err.value.key == key


def test_lists_from_yaml_become_tuples_and_defaults_keep_the_system_unchanged() -> None:
    spec = system_from_dict({"collective": {"all_reduce": ["ring", "direct"]},
                             "memory": {"kind": "per_node", "bandwidth_GBps": 128.0}})
    assert spec.collective.all_reduce == ("ring", "direct")
    assert spec.collective.per_dim("all_reduce") == ("ring", "direct")
    assert spec.collective.per_dim("all_gather") == ("auto", "auto")
    assert hash(spec) == hash(system_from_dict({"collective": {"all_reduce": ["ring", "direct"]},
                                                "memory": {"kind": "per_node",
                                                           "bandwidth_GBps": 128.0}}))
    assert SystemSpec().collective.is_default and not SystemSpec().memory.offloads
