"""Per-node attribute columns derived from the long-form attribute table.

Scalar values are stored as their raw wire value (a varint, or the bits of a fixed-width type;
reference/astra-sim-and-chakra.md §4.1 lists the value kinds); here they are interpreted per kind
(int32 / sfixed32 sign-extended from 32 bits, sint zigzag-decoded, bool as 0/1, double / float
from their bits) and scattered into (N,) columns with presence masks. String values become
categories. Any integer kind is accepted for any attribute, as ASTRA-sim's feeder_v3 does.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from simcore.traces.chakra._keys import categorize, distinct
from simcore.traces.chakra.schema import AttrKind
from simcore.traces.chakra.trace import AttrTable, StrColumn

__all__ = ["int_columns", "scalar_as_float", "scalar_as_int", "str_columns"]

_I32 = np.uint64(0xFFFFFFFF)


def scalar_as_int(kind: NDArray[np.int8], raw: NDArray[np.uint64]) -> NDArray[np.int64]:
    """Interpret raw scalar wire values of integer/bool kinds as signed 64-bit integers."""
    out = raw.view(np.int64).copy()
    low = (raw & _I32).astype(np.uint32)
    signed32 = np.isin(kind, (AttrKind.INT32, AttrKind.SFIXED32))
    out[signed32] = low[signed32].view(np.int32)
    zz = np.isin(kind, (AttrKind.SINT32, AttrKind.SINT64))
    if zz.any():
        v = raw[zz]
        out[zz] = (v >> np.uint64(1)).view(np.int64) ^ -(v & np.uint64(1)).view(np.int64)
    unsigned32 = np.isin(kind, (AttrKind.UINT32, AttrKind.FIXED32))
    out[unsigned32] = low[unsigned32]
    out[kind == AttrKind.BOOL] = raw[kind == AttrKind.BOOL] != 0
    return out


def scalar_as_float(kind: NDArray[np.int8], raw: NDArray[np.uint64]) -> NDArray[np.float64]:
    """Interpret raw scalar wire values of any numeric kind as float64."""
    out = scalar_as_int(kind, raw).astype(np.float64)
    dbl = kind == AttrKind.DOUBLE
    out[dbl] = raw[dbl].view(np.float64)
    flt = kind == AttrKind.FLOAT
    out[flt] = (raw[flt] & _I32).astype(np.uint32).view(np.float32)
    return out


def int_columns(table: AttrTable, n: int) -> dict[str, tuple[NDArray[np.int64], NDArray[np.bool_]]]:
    """Every scalar numeric attribute as ((n,) int64 values (0 if absent), (n,) presence).

    Any integer kind is accepted (as ASTRA-sim's feeder_v3 does); double/float are truncated.
    """
    out: dict[str, tuple[NDArray[np.int64], NDArray[np.bool_]]] = {}
    kind_all = table.kind
    scalar = (kind_all % 2 == 1) & (kind_all != AttrKind.STRING) & (kind_all != AttrKind.BYTES)
    sel = np.flatnonzero(scalar)
    if sel.size == 0:
        return out
    kind, raw = kind_all[sel], table.value[sel]
    vals = scalar_as_int(kind, raw)
    isflt = (kind == AttrKind.DOUBLE) | (kind == AttrKind.FLOAT)
    if isflt.any():
        vals[isflt] = scalar_as_float(kind[isflt], raw[isflt]).astype(np.int64)
    owner = table.owner()[sel]
    codes = table.name[sel]
    # group rows by name: a stable sort of small integers is a radix sort in numpy
    order = np.argsort(codes.astype(np.int16 if len(table.names) < 2**15 else np.int32), kind="stable")
    counts = np.bincount(codes, minlength=len(table.names))
    bounds = np.concatenate(([0], np.cumsum(counts)))
    for code in np.flatnonzero(counts).tolist():
        rows = order[bounds[code] : bounds[code + 1]]
        values = np.zeros(n, dtype=np.int64)
        present = np.zeros(n, dtype=bool)
        values[owner[rows]] = vals[rows]
        present[owner[rows]] = True
        out[table.names[code]] = (values, present)
    return out


def str_columns(table: AttrTable, n: int) -> dict[str, StrColumn]:
    """Every ``string_val`` attribute (e.g. ``pg_name``) as per-node categories."""
    out: dict[str, StrColumn] = {}
    is_str = table.kind == AttrKind.STRING
    if not is_str.any():
        return out
    owner = table.owner()
    for code in distinct(table.name[is_str]):
        rows = np.flatnonzero(is_str & (table.name == code))
        p = table.payload
        cat, cats = categorize(p.buf, p.start[rows], p.end[rows])
        codes = np.full(n, -1, dtype=np.int32)
        codes[owner[rows]] = cat
        out[table.names[int(code)]] = StrColumn(codes, cats)
    return out
