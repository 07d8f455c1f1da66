"""Build an :class:`EtTrace` node by node, with attributes typed as ASTRA-sim's feeders expect.

Attribute values are encoded with the oneof kind given explicitly, or for the attributes the
feeders read with the kind of reference/astra-sim-and-chakra.md §4.1 (``is_cpu_op`` bool_val,
``num_ops`` int64, ``tensor_size`` uint64, ``comm_type``/``comm_size`` int64,
``comm_priority``/``comm_src``/``comm_dst``/``comm_tag`` int32, ``pg_name`` string,
``involved_dim`` bool_list), else inferred from the Python type (bool, int -> int64,
float -> double, str, list of those -> the matching list kind).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence

import numpy as np

from simcore.errors import InputError
from simcore.traces.chakra.columns import int_columns, str_columns
from simcore.traces.chakra.encode import varint
from simcore.traces.chakra.lists import numeric_list_columns
from simcore.traces.chakra.schema import STANDARD_ATTR_KINDS, WIRE_OF_KIND, AttrKind, NodeType
from simcore.traces.chakra.trace import AttrTable, EtBulk, EtTrace, Ragged

__all__ = ["AttrValue", "EtTraceBuilder", "encode_value", "infer_kind"]

Scalar = bool | int | float | str | bytes
AttrValue = Scalar | Sequence[Scalar]
_MASK64 = (1 << 64) - 1
_ZIGZAG = {AttrKind.SINT32, AttrKind.SINT64}


def infer_kind(name: str, value: AttrValue) -> AttrKind:
    """The oneof kind used for ``name`` = ``value`` when none is given."""
    if name in STANDARD_ATTR_KINDS:
        return STANDARD_ATTR_KINDS[name]
    single = {bool: AttrKind.BOOL, int: AttrKind.INT64, float: AttrKind.DOUBLE,
              str: AttrKind.STRING, bytes: AttrKind.BYTES}
    for typ, kind in single.items():
        if type(value) is typ or (typ is int and isinstance(value, np.integer)):
            return kind
    if isinstance(value, float | np.floating):
        return AttrKind.DOUBLE
    if isinstance(value, Sequence):
        first = value[0] if len(value) else 0
        return AttrKind(int(infer_kind("", first)) + 1)
    raise InputError(f"attribute {name}", value, "unsupported attribute value type")


def _scalar_raw(kind: AttrKind, v: Scalar) -> int:
    if kind == AttrKind.DOUBLE:
        return int.from_bytes(struct.pack("<d", float(v)), "little")
    if kind == AttrKind.FLOAT:
        return int.from_bytes(struct.pack("<f", float(v)), "little")
    iv = int(v)
    if kind in _ZIGZAG:
        return ((iv << 1) ^ (iv >> 63)) & _MASK64
    return iv & _MASK64


def encode_value(kind: AttrKind, value: AttrValue) -> tuple[int, bytes]:
    """(raw scalar, payload bytes) of a value of ``kind`` as stored in an :class:`AttrTable`."""
    if kind == AttrKind.STRING:
        return 0, str(value).encode()
    if kind == AttrKind.BYTES:
        return 0, bytes(value)  # type: ignore[arg-type]
    if kind % 2 == 1:
        return _scalar_raw(kind, value), b""  # type: ignore[arg-type]
    items = list(value)  # type: ignore[arg-type]
    elem = AttrKind(kind - 1)
    if kind in (AttrKind.STRING_LIST, AttrKind.BYTES_LIST):
        out = b""
        for x in items:
            data = x.encode() if isinstance(x, str) else bytes(x)  # type: ignore[arg-type]
            out += b"\x0a" + varint(len(data)) + data
        return 0, out
    wire = WIRE_OF_KIND[elem]
    if wire == 0:
        packed = b"".join(varint(_scalar_raw(elem, x)) for x in items)
    else:
        fmt = "<Q" if wire == 1 else "<I"
        mask = _MASK64 if wire == 1 else 0xFFFFFFFF
        packed = b"".join(struct.pack(fmt, _scalar_raw(elem, x) & mask) for x in items)
    return 0, (b"\x0a" + varint(len(packed)) + packed) if packed else b""


def _io_message(io: Mapping[str, str]) -> bytes:
    out = b""
    for tag, key in ((0x0A, "values"), (0x12, "shapes"), (0x1A, "types")):
        data = io.get(key, "").encode()
        if data:
            out += bytes((tag,)) + varint(len(data)) + data
    return out


class _Attrs:
    """Accumulates attribute rows of one table."""

    def __init__(self) -> None:
        self.ptr = [0]
        self.names: dict[str, int] = {}
        self.name: list[int] = []
        self.kind: list[int] = []
        self.value: list[int] = []
        self.payload: list[bytes] = []

    def add_owner(self, attrs: Mapping[str, AttrValue] | Sequence[tuple[str, AttrKind, AttrValue]]) -> None:
        rows = (attrs.items() if isinstance(attrs, Mapping) else [(n, v) for n, _, v in attrs])
        kinds = ([infer_kind(n, v) for n, v in rows] if isinstance(attrs, Mapping)
                 else [AttrKind(k) for _, k, _ in attrs])
        for (name, value), kind in zip(rows, kinds, strict=True):
            raw, payload = encode_value(kind, value)
            self.name.append(self.names.setdefault(name, len(self.names)))
            self.kind.append(int(kind))
            self.value.append(raw)
            self.payload.append(payload)
        self.ptr.append(len(self.name))

    def table(self) -> AttrTable:
        return AttrTable(
            np.array(self.ptr, np.int64), np.array(self.name, np.int32), tuple(self.names),
            np.array(self.kind, np.int8), np.array(self.value, np.uint64),
            Ragged.from_items(self.payload),
        )


class EtTraceBuilder:
    """Collects nodes in order, then :meth:`build` freezes them into an :class:`EtTrace`.

    Example:
        >>> b = EtTraceBuilder()
        >>> b.add_node(0, "ar", NodeType.COMM_COLL_NODE, attrs={"comm_type": 0, "comm_size": 1024})
        >>> trace = b.build()
    """

    def __init__(
        self, version: str = "0.0.4",
        metadata: Mapping[str, AttrValue] | Sequence[tuple[str, AttrKind, AttrValue]] = (),
    ) -> None:
        self.version = version
        self._meta = _Attrs()
        self._meta.add_owner(metadata)
        self._attrs = _Attrs()
        self._ids: list[int] = []
        self._types: list[int] = []
        self._names: list[bytes] = []
        self._start: list[int] = []
        self._dur: list[int] = []
        self._data: list[list[int]] = []
        self._ctrl: list[list[int]] = []
        self._io: dict[str, list[bytes | None]] = {"in": [], "out": []}

    def __len__(self) -> int:
        return len(self._ids)

    def add_node(
        self, node_id: int, name: str, node_type: NodeType | int, *,
        data_deps: Sequence[int] = (), ctrl_deps: Sequence[int] = (),
        duration_micros: int = 0, start_time_micros: int = 0,
        attrs: Mapping[str, AttrValue] | Sequence[tuple[str, AttrKind, AttrValue]] = (),
        inputs: Mapping[str, str] | None = None, outputs: Mapping[str, str] | None = None,
    ) -> int:
        """Append a node; ``attrs`` is a name -> value map or (name, kind, value) rows."""
        if node_id < 0 or duration_micros < 0 or start_time_micros < 0:
            raise InputError(f"node {node_id}", (duration_micros, start_time_micros),
                             "ids and times are unsigned")
        self._ids.append(int(node_id))
        self._types.append(int(node_type))
        self._names.append(name.encode())
        self._start.append(int(start_time_micros))
        self._dur.append(int(duration_micros))
        self._data.append([int(d) for d in data_deps])
        self._ctrl.append([int(d) for d in ctrl_deps])
        self._io["in"].append(None if inputs is None else _io_message(inputs))
        self._io["out"].append(None if outputs is None else _io_message(outputs))
        self._attrs.add_owner(attrs)
        return int(node_id)

    def build(self, path: str = "") -> EtTrace:
        """Freeze into an :class:`EtTrace` (deps must name nodes of this trace)."""
        n = len(self._ids)

        def csr(lists: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
            ptr = np.zeros(n + 1, np.int64)
            np.cumsum([len(x) for x in lists], out=ptr[1:])
            return ptr, np.array([d for x in lists for d in x], dtype=np.uint64)

        data_ptr, data = csr(self._data)
        ctrl_ptr, ctrl = csr(self._ctrl)
        attrs = self._attrs.table()
        io = {k: (Ragged.from_items([b or b"" for b in v]), np.array([b is not None for b in v], bool))
              for k, v in self._io.items()}
        bulk = EtBulk(self._meta.table(), Ragged.from_items(self._names), io["in"][0], io["in"][1],
                      io["out"][0], io["out"][1], attrs)
        trace = EtTrace(
            path=path, version=self.version, ids=np.array(self._ids, np.uint64),
            types=np.array(self._types, np.int8), start_time_micros=np.array(self._start, np.uint64),
            duration_micros=np.array(self._dur, np.uint64), data_ptr=data_ptr, data_deps=data,
            ctrl_ptr=ctrl_ptr, ctrl_deps=ctrl, ints=int_columns(attrs, n),
            strs=str_columns(attrs, n), lists=numeric_list_columns(attrs, n), _bulk=bulk,
        )
        from simcore.traces.chakra.decode import check_nodes

        check_nodes(trace, path or "EtTraceBuilder")
        return trace
