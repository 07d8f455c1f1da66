"""Tests of the ASTRA-sim input parsers (reference/astra-sim-and-chakra.md §2.1-§2.4)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simcore.emulator.inputs import (
    read_comm_groups,
    read_network,
    read_remote_memory,
    read_system,
)
from simcore.errors import InputError
from tests.shared_paths import GPT3_INPUTS, needs_shared

DATA = Path(__file__).parents[2] / "data" / "astra"
GPT3 = GPT3_INPUTS


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _system(tmp_path: Path, **changes: object) -> Path:
    data = json.loads((DATA / "Ring_4chunks.json").read_text())
    for key, value in changes.items():
        if value is None:
            data.pop(key.replace("_", "-"), None)
        else:
            data[key.replace("_", "-")] = value
    return _write(tmp_path, "sys.json", json.dumps(data))


def test_system_example_parses_with_units() -> None:
    spec = read_system(DATA / "Ring_4chunks.json")
    assert spec.scheduling_policy == "LIFO"
    assert spec.preferred_dataset_splits == 4
    assert spec.endpoint_delay_ns == 10
    assert spec.local_mem_bw_GBps == 1600.0
    assert spec.all_reduce_implementation == ("ring",)
    assert spec.collective_optimization == "localBWAware"
    assert spec.peak_perf_TFLOPS == 900.0


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"scheduling_policy": "RANDOM"}, "scheduling-policy"),
        ({"preferred_dataset_splits": 0}, "preferred-dataset-splits"),
        ({"preferred_dataset_splits": "4"}, "preferred-dataset-splits"),
        ({"preferred_dataset_splits": None}, "preferred-dataset-splits"),
        ({"endpoint_delay": 1.5}, "endpoint-delay"),
        ({"roofline_enabled": 2}, "roofline-enabled"),
        ({"all_reduce_implementation": ["ringo"]}, "all-reduce-implementation"),
        ({"all_reduce_implementation": "ring"}, "all-reduce-implementation"),
        ({"collective_optimization": "fast"}, "collective-optimization"),
        ({"local_mem_bw": -1}, "local-mem-bw"),
        ({"all_reduce_implementation_custom": ["a", "b"]}, "all-reduce-implementation-custom"),
    ],
)
def test_system_bad_values_name_file_key_and_value(tmp_path: Path, change: dict, key: str) -> None:
    with pytest.raises(InputError) as err:
        read_system(_system(tmp_path, **change))
    message = str(err.value)
    assert "sys.json" in message and key in message and "\n" not in message


def test_system_unknown_key_warns_and_ignored_keys_pass(tmp_path: Path) -> None:
    with pytest.warns(UserWarning, match="frobnicate"):
        spec = read_system(_system(tmp_path, frobnicate=1, inter_dimension_scheduling="x"))
    assert spec.preferred_dataset_splits == 4


def test_system_algorithms_with_windows(tmp_path: Path) -> None:
    spec = read_system(_system(tmp_path, all_to_all_implementation=["direct4", "oneDirect2", "ring"]))
    assert spec.all_to_all_implementation == ("direct4", "oneDirect2", "ring")


def test_system_not_json(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not valid JSON"):
        read_system(_write(tmp_path, "s.json", "{ oops"))


def test_network_golden_example() -> None:
    spec = read_network(DATA / "Ring_FullyConnected_Switch.yml")
    assert spec.npus == 64
    assert [d.kind for d in spec.dims] == ["Ring", "FullyConnected", "Switch"]
    assert [d.bandwidth_GBps for d in spec.dims] == [200.0, 100.0, 50.0]


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("topology: [Ring, Switch]\nnpus_count: [4]\nbandwidth: [1, 1]\nlatency: [1, 1]\n", "equal lengths"),
        ("topology: [Torus]\nnpus_count: [4]\nbandwidth: [1]\nlatency: [1]\n", "Torus"),
        ("topology: [Ring]\nnpus_count: [1]\nbandwidth: [1]\nlatency: [1]\n", "npus_count"),
        ("topology: [Ring]\nnpus_count: [4]\nbandwidth: [0]\nlatency: [1]\n", "bandwidth"),
        ("topology: [Ring]\nnpus_count: [4]\nbandwidth: [1]\nlatency: [-1]\n", "latency"),
        ("topology: [Ring]\nnpus_count: [4]\nbandwidth: [1]\n", "latency"),
        ("topology: [Ring\n", "YAML"),
    ],
)
def test_network_bad_inputs(tmp_path: Path, text: str, match: str) -> None:
    with pytest.raises(InputError, match=match) as err:
        read_network(_write(tmp_path, "n.yml", text))
    assert "n.yml" in str(err.value)


def test_remote_memory_and_comm_groups(tmp_path: Path) -> None:
    pool = read_remote_memory(
        _write(tmp_path, "m.json", '{"memory-type":"MEMORY_POOL","remote-mem-latency":0,"remote-mem-bw":512}')
    )
    assert pool.memory_type == "MEMORY_POOL" and pool.remote_mem_bw_bytes_per_ns == 512
    with pytest.raises(InputError, match="memory-type"):
        read_remote_memory(_write(tmp_path, "m2.json", '{"memory-type":"HBM"}'))
    with pytest.raises(InputError, match="remote-mem-bw"):
        read_remote_memory(_write(tmp_path, "m3.json", '{"memory-type":"MEMORY_POOL","remote-mem-bw":0}'))
    groups = read_comm_groups(_write(tmp_path, "g.json", '{"1": [3, 1], "2": [0]}'), npus=4)
    assert groups.members(1) == (1, 3) and groups.members(7) is None
    for bad, match in (('{"0": [1]}', "> 0"), ('{"1": []}', "non-empty"), ('{"1": [9]}', "< 4")):
        with pytest.raises(InputError, match=match):
            read_comm_groups(_write(tmp_path, "b.json", bad), npus=4)


@needs_shared
def test_gpt3_inputs_parse() -> None:
    assert read_system(GPT3 / "system.json").roofline_enabled
    assert read_network(GPT3 / "network.yml").npus == 64
    assert read_remote_memory(GPT3 / "remote_memory.json").memory_type == "NO_MEMORY_EXPANSION"
    assert read_comm_groups(GPT3 / "comm_groups.json", npus=64).members(33) == tuple(range(0, 16, 2))
