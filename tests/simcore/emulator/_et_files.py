"""A minimal Chakra ET encoder for test fixtures (reference §4.1-§4.2: varint-length-prefixed
protobuf messages, GlobalMetadata first). Independent of simcore's codec on purpose."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field(number: int, wire: int) -> bytes:
    return _varint(number << 3 | wire)


def _bytes_field(number: int, payload: bytes) -> bytes:
    return _field(number, 2) + _varint(len(payload)) + payload


def _attr(name: str, value: Any) -> bytes:
    body = _bytes_field(1, name.encode())
    if isinstance(value, bool):
        body += _field(27, 0) + _varint(int(value))  # bool_val
    elif isinstance(value, int):
        body += _field(9, 0) + _varint(value & (2**64 - 1))  # int64_val
    elif isinstance(value, str):
        body += _bytes_field(29, value.encode())  # string_val
    else:  # list of bools: BoolList{values=1 packed}
        body += _bytes_field(28, _bytes_field(1, b"".join(_varint(int(v)) for v in value)))
    return body


def encode_node(node: Mapping[str, Any]) -> bytes:
    """Node{id=1, name=2, type=3, ctrl_deps=4, data_deps=5, duration_micros=7, attr=10}."""
    body = b""
    if node.get("id", 0):
        body += _field(1, 0) + _varint(node["id"])
    body += _bytes_field(2, node.get("name", f"node{node.get('id', 0)}").encode())
    body += _field(3, 0) + _varint(node["type"])
    for number, key in ((4, "ctrl_deps"), (5, "data_deps")):
        deps = node.get(key, ())
        if deps:
            body += _bytes_field(number, b"".join(_varint(d) for d in deps))
    if node.get("duration_micros", 0):
        body += _field(7, 0) + _varint(node["duration_micros"])
    for name, value in node.get("attrs", {}).items():
        body += _bytes_field(10, _attr(name, value))
    return body


def encode_trace(nodes: Iterable[Mapping[str, Any]], version: str = "0.0.4") -> bytes:
    """A whole ET file: GlobalMetadata{version} then the nodes, each length-prefixed."""
    meta = _bytes_field(1, version.encode())
    out = _varint(len(meta)) + meta
    for node in nodes:
        body = encode_node(node)
        out += _varint(len(body)) + body
    return out


def write_workload(folder: Path, name: str, per_rank: list[list[Mapping[str, Any]]]) -> str:
    """Write ``<folder>/<name>.<rank>.et`` for every rank; returns the prefix."""
    for rank, nodes in enumerate(per_rank):
        (folder / f"{name}.{rank}.et").write_bytes(encode_trace(nodes))
    return str(folder / name)


def one_collective_node(rank: int, comm_type: int, size: int) -> list[dict[str, Any]]:
    """``chakra_generator`` microbenchmark: one COMM_COLL node, node id = NPU (reference §2.6)."""
    return [{"id": rank, "name": "coll", "type": 7,
             "attrs": {"is_cpu_op": False, "comm_type": comm_type, "comm_size": size}}]
