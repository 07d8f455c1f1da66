"""Encode an :class:`EtTrace` as a Chakra ET byte stream (the canonical protobuf encoding).

Fields are written in field-number order, proto3 scalars only when non-zero, repeated varints
packed, and every ``AttributeProto`` oneof value even when it is zero (``comm_type=ALL_REDUCE``
is ``48 00``) -- what protobuf's own serializer writes, so a file written by the official
``protolib.encodeMessage`` reads back and re-encodes byte-identical (reference/
astra-sim-and-chakra.md §4.1-4.2). Each message is prefixed by its varint32 length.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import numpy as np

from simcore.traces.chakra.schema import WIRE_OF_KIND, AttrKind
from simcore.traces.chakra.trace import AttrTable, EtTrace

__all__ = ["encode_attr", "encode_attr_value", "encode_metadata_fields", "encode_node_fields",
           "encode_record", "encode_record_field", "encode_trace", "varint"]

_MASK64 = (1 << 64) - 1


def varint(value: int) -> bytes:
    """Protobuf varint of a non-negative integer (negative: two's complement 64-bit)."""
    value &= _MASK64
    if value < 0x80:
        return bytes((value,))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _len_field(tag: int, payload: bytes) -> bytes:
    return bytes((tag,)) + varint(len(payload)) + payload


def _packed(tag: int, values: np.ndarray) -> bytes:
    if values.size == 0:
        return b""
    return _len_field(tag, b"".join(varint(int(v)) for v in values.tolist()))


def encode_attr_value(kind: int, raw: int, payload: bytes) -> bytes:
    """The oneof value field of an ``AttributeProto`` (tag and value)."""
    if kind == AttrKind.NONE:
        return b""
    wire = WIRE_OF_KIND[kind]
    tag = varint((kind << 3) | wire)
    if wire == 0:
        return tag + varint(raw)
    if wire == 1:
        return tag + struct.pack("<Q", raw & _MASK64)
    if wire == 5:
        return tag + struct.pack("<I", raw & 0xFFFFFFFF)
    return tag + varint(len(payload)) + payload


def _attr_messages(table: AttrTable, owner: int) -> list[bytes]:
    out = []
    names = [n.encode() for n in table.names]
    kinds = table.kind
    values = table.value
    for row in range(int(table.ptr[owner]), int(table.ptr[owner + 1])):
        msg = b""
        name = names[int(table.name[row])]
        if name:
            msg += _len_field(0x0A, name)
        doc = table.doc.get(row)
        if doc:
            msg += _len_field(0x12, doc)
        kind = int(kinds[row])
        payload = table.payload.item(row) if WIRE_OF_KIND.get(kind) == 2 else b""
        msg += encode_attr_value(kind, int(values[row]), payload)
        out.append(msg)
    return out


def encode_metadata(trace: EtTrace) -> bytes:
    """The ``GlobalMetadata`` message."""
    msg = _len_field(0x0A, trace.version.encode()) if trace.version else b""
    for attr in _attr_messages(trace.metadata, 0):
        msg += _len_field(0x12, attr)
    return msg


def encode_node(trace: EtTrace, i: int) -> bytes:
    """The ``Node`` message of node ``i``."""
    b = trace.bulk
    parts: list[bytes] = []
    node_id = int(trace.ids[i])
    if node_id:
        parts.append(b"\x08" + varint(node_id))
    name = b.names.item(i)
    if name:
        parts.append(_len_field(0x12, name))
    node_type = int(trace.types[i])
    if node_type:
        parts.append(b"\x18" + varint(node_type))
    parts.append(_packed(0x22, trace.ctrl_deps[trace.ctrl_ptr[i] : trace.ctrl_ptr[i + 1]]))
    parts.append(_packed(0x2A, trace.data_deps[trace.data_ptr[i] : trace.data_ptr[i + 1]]))
    for tag, col in ((0x30, trace.start_time_micros), (0x38, trace.duration_micros)):
        v = int(col[i])
        if v:
            parts.append(bytes((tag,)) + varint(v))
    if b.inputs_present[i]:
        parts.append(_len_field(0x42, b.inputs.item(i)))
    if b.outputs_present[i]:
        parts.append(_len_field(0x4A, b.outputs.item(i)))
    parts.extend(_len_field(0x52, a) for a in _attr_messages(b.attrs, i))
    return b"".join(parts)


def _packed_ints(tag: int, values: Sequence[int]) -> bytes:
    return _len_field(tag, b"".join(varint(v) for v in values)) if values else b""


def encode_attr(name: str, kind: int, raw: int, payload: bytes) -> bytes:
    """One ``AttributeProto`` (name, no doc, value) as :func:`encode_node` writes it."""
    return (_len_field(0x0A, name.encode()) if name else b"") + encode_attr_value(kind, raw, payload)


def encode_record(message: bytes) -> bytes:
    """A message with its varint length prefix, as laid end to end in an ET file."""
    return varint(len(message)) + message


def encode_record_field(attr: bytes) -> bytes:
    """An encoded attribute as the ``attr`` field of a ``Node`` (what :func:`encode_node_fields`
    appends for each of its ``attrs``)."""
    return _len_field(0x52, attr)


def encode_node_fields(
    node_id: int, name: str, node_type: int, *, ctrl_deps: Sequence[int] = (),
    data_deps: Sequence[int] = (), duration_micros: int = 0, attrs: Sequence[bytes] = (),
) -> bytes:
    """The ``Node`` message of a node given field by field (no start time, inputs or outputs;
    ``attrs`` from :func:`encode_attr`): the bytes :func:`encode_node` writes for the same node
    of a built trace, without building one (the exporter encodes each distinct node once)."""
    parts = [b"\x08" + varint(node_id) if node_id else b"",
             _len_field(0x12, name.encode()) if name else b"",
             b"\x18" + varint(node_type) if node_type else b"",
             _packed_ints(0x22, ctrl_deps), _packed_ints(0x2A, data_deps),
             b"\x38" + varint(duration_micros) if duration_micros else b""]
    parts.extend(encode_record_field(a) for a in attrs)
    return b"".join(parts)


def encode_metadata_fields(version: str, attrs: Sequence[bytes]) -> bytes:
    """The ``GlobalMetadata`` message from its version and encoded attributes."""
    msg = _len_field(0x0A, version.encode()) if version else b""
    return msg + b"".join(_len_field(0x12, a) for a in attrs)


def encode_trace(trace: EtTrace) -> bytes:
    """The whole file: length-prefixed ``GlobalMetadata`` then every node in order."""
    out: list[bytes] = []
    meta = encode_metadata(trace)
    out.append(varint(len(meta)) + meta)
    for i in range(trace.num_nodes):
        node = encode_node(trace, i)
        out.append(varint(len(node)) + node)
    return b"".join(out)
