"""Parse ASTRA-sim input files into validated specs (reference/astra-sim-and-chakra.md §2.1-§2.4).

- system JSON (§2.1): every key ``Sys::initialize_sys`` reads; keys ignored at HEAD (``boost-mode``,
  ``intra-dimension-scheduling``, ``inter-dimension-scheduling``) are accepted, unknown keys give a
  warning; ``scheduling-policy``, ``collective-optimization`` and ``preferred-dataset-splits`` are
  required (the C++ code leaves them uninitialised or divides by zero).
- analytical network YAML (§2.2): ``topology``/``npus_count``/``bandwidth``/``latency`` lists.
- remote-memory JSON (§2.3) and communicator-group JSON (§2.4).

Every violation raises :class:`InputError` naming the file, the key, the value and the rule.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

from simcore.emulator.specs import (
    CommGroupsSpec,
    NetworkDimSpec,
    NetworkSpec,
    RemoteMemorySpec,
    SystemSpec,
)
from simcore.errors import InputError
from simcore.limits import check_number, decode_utf8, limit, load_json, load_yaml

__all__ = ["read_comm_groups", "read_network", "read_remote_memory", "read_system"]

_IGNORED = ("boost-mode", "intra-dimension-scheduling", "inter-dimension-scheduling")
# json key -> (spec field, kind); kind: int, num, flag, str, algos, custom
_SYSTEM_KEYS: dict[str, tuple[str, str]] = {
    "scheduling-policy": ("scheduling_policy", "str"),
    "collective-optimization": ("collective_optimization", "str"),
    "active-chunks-per-dimension": ("active_chunks_per_dimension", "int"),
    "preferred-dataset-splits": ("preferred_dataset_splits", "int"),
    "endpoint-delay": ("endpoint_delay_ns", "int"),
    "local-reduction-delay": ("local_reduction_delay_ns", "int"),
    "model-shared-bus": ("model_shared_bus", "flag"),
    "L": ("loggp_L", "num"),
    "o": ("loggp_o", "num"),
    "g": ("loggp_g", "num"),
    "G": ("loggp_G", "num"),
    "local-mem-bw": ("local_mem_bw_GBps", "num"),
    "peak-perf": ("peak_perf_TFLOPS", "num"),
    "roofline-enabled": ("roofline_enabled", "flag"),
    "trace-enabled": ("trace_enabled", "flag"),
    "replay-only": ("replay_only", "flag"),
    "track-local-mem": ("track_local_mem", "flag"),
    "local-mem-trace-filename": ("local_mem_trace_filename", "str"),
    "all-reduce-implementation": ("all_reduce_implementation", "algos"),
    "reduce-scatter-implementation": ("reduce_scatter_implementation", "algos"),
    "all-gather-implementation": ("all_gather_implementation", "algos"),
    "all-to-all-implementation": ("all_to_all_implementation", "algos"),
    "all-reduce-implementation-custom": ("all_reduce_implementation_custom", "custom"),
    "reduce-scatter-implementation-custom": ("reduce_scatter_implementation_custom", "custom"),
    "all-gather-implementation-custom": ("all_gather_implementation_custom", "custom"),
    "all-to-all-implementation-custom": ("all_to_all_implementation_custom", "custom"),
    "per-node-custom-implementation": ("per_node_custom_implementation", "str"),
}
_REQUIRED = ("scheduling-policy", "collective-optimization", "preferred-dataset-splits")


def _load_json(path: Path) -> Any:
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise InputError(str(path), "", f"cannot read: {err.strerror or err}") from None
    return load_json(decode_utf8(raw, str(path)), str(path))


def _int_bound(key: str) -> float:
    """Upper bound of an integer system / remote-memory key (README "Limits and bounds")."""
    if key in ("preferred-dataset-splits", "active-chunks-per-dimension"):
        return limit("dataset_splits")
    if key in ("num-nodes", "num-npus-per-node"):
        return limit("graph_ranks")
    return limit("time_ns")


def _convert(path: Path, key: str, kind: str, value: Any) -> Any:
    """Check the JSON type of one system key and convert it to the spec field's type."""
    where = f"{path}:{key}"
    if kind in ("int", "flag"):
        if isinstance(value, bool) or not isinstance(value, int):
            raise InputError(where, value, "must be an integer")
        if kind == "flag" and value not in (0, 1):
            raise InputError(where, value, "must be 0 or 1")
        if kind == "int":
            check_number(where, value, lo=0, hi=_int_bound(key), integer=True)
        return bool(value) if kind == "flag" else value
    if kind == "num":
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise InputError(where, value, "must be a number")
        return float(check_number(where, value, lo=0, hi=limit("time_ns")))
    if kind == "str":
        if not isinstance(value, str):
            raise InputError(where, value, "must be a string")
        return value
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InputError(where, value, "must be a JSON list of strings")
    if kind == "custom":
        if len(value) != 1:
            raise InputError(where, value, "must hold exactly one path prefix")
        return str((path.parent / value[0]) if not Path(value[0]).is_absolute() else value[0])
    if not value:
        raise InputError(where, value, "must list one algorithm per dimension")
    return tuple(value)


def _per_node_map(path: Path, yaml_path: str) -> tuple[tuple[int, str], ...]:
    """Read the ``per-node-custom-implementation`` YAML map ``{node_id: prefix}``."""
    target = Path(yaml_path) if Path(yaml_path).is_absolute() else path.parent / yaml_path
    try:
        raw = target.read_bytes()
    except OSError as err:
        raise InputError(f"{path}:per-node-custom-implementation", yaml_path, f"unreadable YAML: {err}") from None
    data = load_yaml(decode_utf8(raw, str(target)), str(target))
    if not isinstance(data, dict):
        raise InputError(str(target), data, "must be a map from node id to path prefix")
    pairs = []
    for node, prefix in data.items():
        if isinstance(node, bool) or not isinstance(node, int) or not isinstance(prefix, str):
            raise InputError(f"{target}:{node}", prefix, "must map an integer node id to a path prefix")
        pairs.append((node, str(prefix if Path(prefix).is_absolute() else target.parent / prefix)))
    return tuple(sorted(pairs))


def read_system(path: str | Path) -> SystemSpec:
    """Parse an ASTRA-sim system JSON file into a :class:`SystemSpec`."""
    path = Path(path)
    data = _load_json(path)
    if not isinstance(data, dict):
        raise InputError(str(path), type(data).__name__, "must be a JSON object")
    for key in _REQUIRED:
        if key not in data:
            raise InputError(f"{path}:{key}", None, "is required")
    fields: dict[str, Any] = {}
    for key, value in data.items():
        if key in _IGNORED:
            continue
        if key not in _SYSTEM_KEYS:
            warnings.warn(f"{path}: unknown system key {key!r} ignored", stacklevel=2)
            continue
        name, kind = _SYSTEM_KEYS[key]
        fields[name] = _convert(path, key, kind, value)
    if "per_node_custom_implementation" in fields:
        fields["per_node_custom_implementation"] = _per_node_map(path, fields["per_node_custom_implementation"])
    try:
        return SystemSpec(**fields)
    except InputError as err:
        raise InputError(f"{path}:{err.key}", err.value, err.rule) from None


def read_network(path: str | Path) -> NetworkSpec:
    """Parse an analytical network YAML file (reference §2.2) into a :class:`NetworkSpec`."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise InputError(str(path), "", f"cannot read: {err.strerror or err}") from None
    data = load_yaml(decode_utf8(raw, str(path)), str(path))
    if not isinstance(data, dict):
        raise InputError(str(path), data, "must be a YAML map")
    lists: dict[str, list[Any]] = {}
    for key in ("topology", "npus_count", "bandwidth", "latency"):
        if key not in data:
            raise InputError(f"{path}:{key}", None, "is required")
        value = data[key]
        lists[key] = value if isinstance(value, list) else [value]
    for key in data:
        if key not in lists:
            warnings.warn(f"{path}: unknown network key {key!r} ignored", stacklevel=2)
    lengths = {key: len(v) for key, v in lists.items()}
    if len(set(lengths.values())) != 1:
        raise InputError(f"{path}:lengths", lengths, "topology/npus_count/bandwidth/latency must have equal lengths")
    dims = []
    for kind, npus, bw, lat in zip(*lists.values(), strict=True):
        check_number(f"{path}:npus_count", npus, lo=1, hi=limit("graph_ranks"), integer=True)
        check_number(f"{path}:bandwidth", bw, lo=0, lo_open=True, hi=limit("bytes"))
        check_number(f"{path}:latency", lat, lo=0, hi=limit("time_ns"))
        try:
            dims.append(NetworkDimSpec(str(kind), int(npus), float(bw), float(lat)))
        except InputError as err:
            raise InputError(f"{path}:{err.key}", err.value, err.rule) from None
    spec = NetworkSpec(tuple(dims))
    check_number(f"{path}:npus_count", spec.npus, hi=limit("graph_ranks"))  # product over dimensions
    return spec


def read_remote_memory(path: str | Path) -> RemoteMemorySpec:
    """Parse a remote-memory JSON file (reference §2.3)."""
    path = Path(path)
    data = _load_json(path)
    if not isinstance(data, dict):
        raise InputError(str(path), data, "must be a JSON object")
    if "memory-type" not in data:
        raise InputError(f"{path}:memory-type", None, "is required")
    names = {
        "remote-mem-latency": "remote_mem_latency_ns",
        "remote-mem-bw": "remote_mem_bw_bytes_per_ns",
        "num-nodes": "num_nodes",
        "num-npus-per-node": "num_npus_per_node",
    }
    fields: dict[str, Any] = {"memory_type": data["memory-type"]}
    if not isinstance(fields["memory_type"], str):
        raise InputError(f"{path}:memory-type", fields["memory_type"], "must be a string")
    for key, value in data.items():
        if key == "memory-type":
            continue
        if key not in names:
            warnings.warn(f"{path}: unknown remote-memory key {key!r} ignored", stacklevel=2)
            continue
        fields[names[key]] = _convert(path, key, "int", value)
    try:
        return RemoteMemorySpec(**fields)
    except InputError as err:
        raise InputError(f"{path}:{err.key}", err.value, err.rule) from None


def read_comm_groups(path: str | Path, npus: int | None = None) -> CommGroupsSpec:
    """Parse a communicator-group JSON file (reference §2.4): ``{"1": [0, 1], ...}``."""
    path = Path(path)
    data = _load_json(path)
    if not isinstance(data, dict):
        raise InputError(str(path), data, "must be a JSON object of group id -> NPU list")
    groups = []
    for key, members in data.items():
        if not key.isdigit() or int(key) <= 0:
            raise InputError(f"{path}:{key}", key, "group ids must be integers > 0")
        ok = isinstance(members, list) and members and all(
            isinstance(m, int) and not isinstance(m, bool) and m >= 0 for m in members
        )
        if not ok:
            raise InputError(f"{path}:{key}", members, "must be a non-empty list of NPU ids >= 0")
        if len(set(members)) != len(members):
            raise InputError(f"{path}:{key}", members, "lists an NPU twice")
        if npus is not None and max(members) >= npus:
            raise InputError(f"{path}:{key}", max(members), f"NPU id must be < {npus} (the network size)")
        groups.append((int(key), tuple(sorted(members))))
    return CommGroupsSpec(tuple(sorted(groups)))
