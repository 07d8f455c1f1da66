"""Chakra execution-trace schema constants (``et_def.proto``, package ``ChakraProtoMsg``).

Field numbers, node types, collective types and the ``AttributeProto`` value kinds, as listed
in reference/astra-sim-and-chakra.md §4.1. The attribute types that ASTRA-sim's feeders expect
for the attributes they read (same section) are in :data:`STANDARD_ATTR_KINDS`.
"""

from __future__ import annotations

from enum import IntEnum

from simcore.ir.graph import CommType, NodeKind  # Chakra enums, one definition

__all__ = [
    "AttrKind",
    "CommType",
    "NodeType",
    "NODE_FIELDS",
    "SCALAR_KINDS",
    "STANDARD_ATTR_KINDS",
    "WIRE_OF_KIND",
]


#: Chakra ``NodeType``: the project's one node-kind enum (protobuf names canonical)
NodeType = NodeKind


class AttrKind(IntEnum):
    """``AttributeProto`` oneof value field numbers (0 = no value set)."""

    NONE = 0
    DOUBLE = 3
    DOUBLE_LIST = 4
    FLOAT = 5
    FLOAT_LIST = 6
    INT32 = 7
    INT32_LIST = 8
    INT64 = 9
    INT64_LIST = 10
    UINT32 = 11
    UINT32_LIST = 12
    UINT64 = 13
    UINT64_LIST = 14
    SINT32 = 15
    SINT32_LIST = 16
    SINT64 = 17
    SINT64_LIST = 18
    FIXED32 = 19
    FIXED32_LIST = 20
    FIXED64 = 21
    FIXED64_LIST = 22
    SFIXED32 = 23
    SFIXED32_LIST = 24
    SFIXED64 = 25
    SFIXED64_LIST = 26
    BOOL = 27
    BOOL_LIST = 28
    STRING = 29
    STRING_LIST = 30
    BYTES = 31
    BYTES_LIST = 32


# Node message field numbers (reference §4.1 table)
NODE_FIELDS = {
    "id": 1,
    "name": 2,
    "type": 3,
    "ctrl_deps": 4,
    "data_deps": 5,
    "start_time_micros": 6,
    "duration_micros": 7,
    "inputs": 8,
    "outputs": 9,
    "attr": 10,
}

# wire type of each value kind: scalars 0 (varint), 1 (64-bit) or 5 (32-bit); lists, strings 2
WIRE_OF_KIND: dict[int, int] = {int(k): 2 for k in AttrKind if k % 2 == 0 and k >= 4}
WIRE_OF_KIND.update(
    {
        AttrKind.DOUBLE: 1,
        AttrKind.FLOAT: 5,
        AttrKind.INT32: 0,
        AttrKind.INT64: 0,
        AttrKind.UINT32: 0,
        AttrKind.UINT64: 0,
        AttrKind.SINT32: 0,
        AttrKind.SINT64: 0,
        AttrKind.FIXED32: 5,
        AttrKind.FIXED64: 1,
        AttrKind.SFIXED32: 5,
        AttrKind.SFIXED64: 1,
        AttrKind.BOOL: 0,
        AttrKind.STRING: 2,
        AttrKind.BYTES: 2,
    }
)

# scalar numeric kinds (decoded into per-node columns)
SCALAR_KINDS = frozenset(
    int(k) for k in AttrKind if k % 2 == 1 and k not in (AttrKind.STRING, AttrKind.BYTES)
)

# the attribute types ASTRA-sim's feeders read (reference §4.1, "Attributes consumers read")
STANDARD_ATTR_KINDS: dict[str, AttrKind] = {
    "is_cpu_op": AttrKind.BOOL,
    "num_ops": AttrKind.INT64,
    "tensor_size": AttrKind.UINT64,
    "comm_type": AttrKind.INT64,
    "comm_size": AttrKind.INT64,
    "comm_priority": AttrKind.INT32,
    "comm_src": AttrKind.INT32,
    "comm_dst": AttrKind.INT32,
    "comm_tag": AttrKind.INT32,
    "pg_name": AttrKind.STRING,
    "involved_dim": AttrKind.BOOL_LIST,
}
