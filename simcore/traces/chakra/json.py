"""Chakra ET messages as JSON objects, as ``chakra_jsonizer`` prints them.

The jsonizer writes ``MessageToJson`` of the ``GlobalMetadata`` and of every ``Node``
(reference/astra-sim-and-chakra.md §4.3). Protobuf's JSON mapping: lowerCamelCase field names,
64-bit integers as strings, enums by name, bytes as base64, default (zero) scalars omitted but
a set oneof member always present, messages that are present but empty as ``{}``.
"""

from __future__ import annotations

import base64
import math
import struct
from collections.abc import Iterator
from typing import Any

from simcore.traces.chakra._wire import walk_fields
from simcore.traces.chakra.lists import decode_list
from simcore.traces.chakra.schema import AttrKind, NodeType
from simcore.traces.chakra.trace import AttrTable, EtTrace

__all__ = ["trace_to_json"]

_STRINGIFIED = {AttrKind.INT64, AttrKind.UINT64, AttrKind.SINT64, AttrKind.FIXED64,
                AttrKind.SFIXED64}
_UNSIGNED64 = {AttrKind.UINT64, AttrKind.FIXED64}


def _json_name(kind: AttrKind) -> str:
    parts = kind.name.lower().split("_")
    if parts[-1] != "list":
        parts.append("val")
    return parts[0] + "".join(p.capitalize() for p in parts[1:])


def _number(value: float) -> float | str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return value


def _scalar(kind: AttrKind, raw: int) -> Any:
    if kind == AttrKind.DOUBLE:
        return _number(struct.unpack("<d", raw.to_bytes(8, "little"))[0])
    if kind == AttrKind.FLOAT:
        return _number(struct.unpack("<f", (raw & 0xFFFFFFFF).to_bytes(4, "little"))[0])
    if kind == AttrKind.BOOL:
        return raw != 0
    if kind in (AttrKind.SINT32, AttrKind.SINT64):
        value = (raw >> 1) ^ -(raw & 1)
    elif kind in (AttrKind.INT32, AttrKind.SFIXED32):
        low = raw & 0xFFFFFFFF
        value = low - (1 << 32) if low >= 1 << 31 else low
    elif kind in (AttrKind.UINT32, AttrKind.FIXED32):
        value = raw & 0xFFFFFFFF
    elif kind in _UNSIGNED64:
        value = raw
    else:  # int64, sfixed64
        value = raw - (1 << 64) if raw >= 1 << 63 else raw
    return str(value) if kind in _STRINGIFIED else value


def _list(kind: AttrKind, payload: bytes) -> dict[str, Any]:
    values = decode_list(kind, payload)
    elem = AttrKind(kind - 1)
    if not values:
        return {}
    if elem == AttrKind.BYTES:
        out: list[Any] = [base64.b64encode(v).decode() for v in values]  # type: ignore[arg-type]
    elif elem in _STRINGIFIED:
        out = [str(v) for v in values]
    elif elem in (AttrKind.DOUBLE, AttrKind.FLOAT):
        out = [_number(float(v)) for v in values]  # type: ignore[arg-type]
    else:
        out = list(values)
    return {"values": out}


def attrs_to_json(table: AttrTable, owner: int) -> list[dict[str, Any]]:
    """The ``attr`` list of one owner (node or metadata)."""
    out = []
    for row in range(int(table.ptr[owner]), int(table.ptr[owner + 1])):
        item: dict[str, Any] = {}
        name = table.names[int(table.name[row])]
        if name:
            item["name"] = name
        doc = table.doc.get(row)
        if doc:
            item["docString"] = doc.decode("utf-8", errors="replace")
        kind = AttrKind(int(table.kind[row]))
        if kind == AttrKind.STRING:
            item[_json_name(kind)] = table.payload.text(row)
        elif kind == AttrKind.BYTES:
            item[_json_name(kind)] = base64.b64encode(table.payload.item(row)).decode()
        elif kind % 2 == 0 and kind:
            item[_json_name(kind)] = _list(kind, table.payload.item(row))
        elif kind:
            item[_json_name(kind)] = _scalar(kind, int(table.value[row]))
        out.append(item)
    return out


def _io(data: bytes) -> dict[str, str]:
    import numpy as np

    buf = np.frombuffer(data + bytes(16), dtype=np.uint8)
    f = walk_fields(buf, np.array([0]), np.array([len(data)]))
    keys = {1: "values", 2: "shapes", 3: "types"}
    return {keys[int(n)]: buf[s:e].tobytes().decode("utf-8", "replace")
            for n, s, e in zip(f.field, f.start, f.end, strict=True) if int(n) in keys and e > s}


def _node(trace: EtTrace, i: int) -> dict[str, Any]:
    b = trace.bulk
    node: dict[str, Any] = {}
    if int(trace.ids[i]):
        node["id"] = str(int(trace.ids[i]))
    name = b.names.text(i)
    if name:
        node["name"] = name
    t = int(trace.types[i])
    if t:
        node["type"] = NodeType(t).name if t in NodeType._value2member_map_ else t
    for key, ptr, deps in (("ctrlDeps", trace.ctrl_ptr, trace.ctrl_deps),
                           ("dataDeps", trace.data_ptr, trace.data_deps)):
        vals = deps[ptr[i] : ptr[i + 1]].tolist()
        if vals:
            node[key] = [str(v) for v in vals]
    for key, col in (("startTimeMicros", trace.start_time_micros),
                     ("durationMicros", trace.duration_micros)):
        if int(col[i]):
            node[key] = str(int(col[i]))
    for key, rag, present in (("inputs", b.inputs, b.inputs_present),
                              ("outputs", b.outputs, b.outputs_present)):
        if present[i]:
            node[key] = _io(rag.item(i))
    attrs = attrs_to_json(b.attrs, i)
    if attrs:
        node["attr"] = attrs
    return node


def trace_to_json(trace: EtTrace) -> Iterator[dict[str, Any]]:
    """The ``GlobalMetadata`` object, then one object per node, in file order."""
    meta: dict[str, Any] = {}
    if trace.version:
        meta["version"] = trace.version
    attrs = attrs_to_json(trace.metadata, 0)
    if attrs:
        meta["attr"] = attrs
    yield meta
    for i in range(trace.num_nodes):
        yield _node(trace, i)
