"""Decode list-valued Chakra attributes (``*List`` messages: ``repeated values = 1``).

Numeric lists are packed in proto3 (varints, or 4/8-byte little-endian for float, double and
fixed types) but a reader must also accept them unpacked; bool lists are varints 0/1
(reference/astra-sim-and-chakra.md §4.1, ``involved_dim`` is a ``bool_list``).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from simcore.errors import InputError
from simcore.traces.chakra._keys import distinct
from simcore.traces.chakra._wire import WireError, decode_packed_varints, ranges, walk_fields
from simcore.traces.chakra.columns import scalar_as_float
from simcore.traces.chakra.schema import AttrKind
from simcore.traces.chakra.trace import AttrTable

__all__ = ["decode_list", "numeric_list_column", "numeric_list_columns"]

_ELEMENT = {
    AttrKind.DOUBLE_LIST: AttrKind.DOUBLE, AttrKind.FLOAT_LIST: AttrKind.FLOAT,
    AttrKind.INT32_LIST: AttrKind.INT32, AttrKind.INT64_LIST: AttrKind.INT64,
    AttrKind.UINT32_LIST: AttrKind.UINT32, AttrKind.UINT64_LIST: AttrKind.UINT64,
    AttrKind.SINT32_LIST: AttrKind.SINT32, AttrKind.SINT64_LIST: AttrKind.SINT64,
    AttrKind.FIXED32_LIST: AttrKind.FIXED32, AttrKind.FIXED64_LIST: AttrKind.FIXED64,
    AttrKind.SFIXED32_LIST: AttrKind.SFIXED32, AttrKind.SFIXED64_LIST: AttrKind.SFIXED64,
    AttrKind.BOOL_LIST: AttrKind.BOOL,
}
_WIDTH = {AttrKind.DOUBLE: 8, AttrKind.FIXED64: 8, AttrKind.SFIXED64: 8,
          AttrKind.FLOAT: 4, AttrKind.FIXED32: 4, AttrKind.SFIXED32: 4}


def decode_list(kind: int, payload: bytes) -> list[object]:
    """Values of one encoded ``*List`` message of value kind ``kind``.

    Raises:
        InputError: malformed list message.
    """
    buf = np.frombuffer(payload + bytes(16), dtype=np.uint8)
    s = np.array([0], dtype=np.int64)
    e = np.array([len(payload)], dtype=np.int64)
    try:
        f = walk_fields(buf, s, e)
    except WireError as err:
        raise InputError("attribute list", f"byte {err.offset}", err.rule) from None
    if kind in (AttrKind.STRING_LIST, AttrKind.BYTES_LIST):
        items = [buf[a:b].tobytes() for a, b in zip(f.start[f.field == 1], f.end[f.field == 1], strict=True)]
        if kind == AttrKind.STRING_LIST:
            return [x.decode("utf-8", errors="replace") for x in items]
        return list(items)
    elem = _ELEMENT.get(AttrKind(kind))
    if elem is None:
        raise InputError("attribute list", kind, "not a list kind")
    raw = _raw_elements(buf, f, elem)
    if elem in (AttrKind.UINT64, AttrKind.FIXED64):
        return [int(v) for v in raw]
    vals = scalar_as_float(np.full(raw.shape, int(elem), np.int8), raw)
    if elem == AttrKind.BOOL:
        return [bool(v) for v in vals]
    if elem in (AttrKind.DOUBLE, AttrKind.FLOAT):
        return [float(v) for v in vals]
    return [int(v) for v in vals]


def _raw_elements(buf: NDArray[np.uint8], f: object, elem: AttrKind) -> NDArray[np.uint64]:
    from simcore.traces.chakra._wire import Fields

    assert isinstance(f, Fields)
    sel = f.field == 1
    width = _WIDTH.get(elem)
    chunks: list[NDArray[np.uint64]] = []
    for k in np.flatnonzero(sel):
        if f.wire[k] != 2:
            chunks.append(f.value[k : k + 1])
        elif width is None:
            chunks.append(decode_packed_varints(buf, f.start[k : k + 1], f.end[k : k + 1])[1])
        else:
            raw = buf[ranges(f.start[k : k + 1], f.end[k : k + 1])].tobytes()
            if len(raw) % width:
                raise InputError("attribute list", len(raw), f"packed length not a multiple of {width}")
            dt = "<u8" if width == 8 else "<u4"
            chunks.append(np.frombuffer(raw, dtype=dt).astype(np.uint64))
    return np.concatenate(chunks) if chunks else np.zeros(0, np.uint64)


def numeric_list_column(
    table: AttrTable, n: int, name: str
) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """List attribute ``name`` per node as CSR: values of node i are values[ptr[i]:ptr[i+1]]."""
    rows = table.rows_named(name)
    owner = table.owner()[rows]
    per_node: list[list[float]] = [[] for _ in range(n)]
    for r, o in zip(rows.tolist(), owner.tolist(), strict=True):
        kind = int(table.kind[r])
        if kind in _ELEMENT:
            try:
                got = decode_list(kind, table.payload.item(r))
            except InputError as err:  # re-raised with the byte offset in the file
                raise WireError(int(table.payload.start[r]), r, f"attribute {name}: {err.rule}") from None
            per_node[o] = [float(v) for v in got]  # type: ignore[arg-type]
    counts = np.array([len(v) for v in per_node], dtype=np.int64)
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=ptr[1:])
    flat = [x for v in per_node for x in v]
    return ptr, np.array(flat, dtype=np.float64)


def numeric_list_columns(
    table: AttrTable, n: int
) -> dict[str, tuple[NDArray[np.int64], NDArray[np.float64]]]:
    """Every numeric/bool list attribute of the table, by name (see :func:`numeric_list_column`)."""
    is_list = np.isin(table.kind, tuple(int(k) for k in _ELEMENT))
    codes = distinct(table.name[is_list]).tolist()
    return {table.names[c]: numeric_list_column(table, n, table.names[c]) for c in codes}
