"""Decode the fields of many Chakra ``Node`` / ``AttributeProto`` messages at once.

Field numbers and value kinds: reference/astra-sim-and-chakra.md §4.1. The messages may come
from several files laid end to end in one buffer; every result is indexed by a global node
(or attribute row) number, and the caller splits it per file. Wire errors are
:class:`~simcore.traces.chakra._wire.WireError` with the global byte offset.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from simcore.traces.chakra._keys import categorize
from simcore.traces.chakra._wire import (
    Fields,
    WireError,
    decode_packed_varints,
    ranges,
    read_varints,
    walk_fields,
)
from simcore.traces.chakra.schema import WIRE_OF_KIND
from simcore.traces.chakra.trace import AttrTable, Ragged

__all__ = ["NodeColumns", "decode_attrs", "decode_nodes"]

_NODE_WIRE = {1: (0,), 2: (2,), 3: (0,), 4: (0, 2), 5: (0, 2), 6: (0,), 7: (0,), 8: (2,),
              9: (2,), 10: (2,)}
_EXPECTED_WIRE = np.array([WIRE_OF_KIND.get(k, -1) for k in range(33)], dtype=np.int8)


@dataclass(frozen=True, eq=False)
class NodeColumns:
    """All nodes' fields (N nodes), in the layout of :class:`EtTrace`."""

    ids: NDArray[np.uint64]
    types: NDArray[np.int8]
    names: Ragged
    start_time_micros: NDArray[np.uint64]
    duration_micros: NDArray[np.uint64]
    data_ptr: NDArray[np.int64]
    data_deps: NDArray[np.uint64]
    ctrl_ptr: NDArray[np.int64]
    ctrl_deps: NDArray[np.uint64]
    inputs: Ragged
    inputs_present: NDArray[np.bool_]
    outputs: Ragged
    outputs_present: NDArray[np.bool_]
    attrs: AttrTable


def select(f: Fields, number: int, wires: tuple[int, ...]) -> NDArray[np.int64]:
    """Rows of field ``number``; a wire type not in ``wires`` is a WireError."""
    sel = np.flatnonzero(f.field == number)
    bad = ~np.isin(f.wire[sel], wires)
    if bad.any():
        k = sel[np.argmax(bad)]
        raise WireError(
            f.start[k], f.owner[k], f"field {number} has wire type {int(f.wire[k])}, expected {wires}"
        )
    return sel


def _repeated_varints(
    buf: NDArray[np.uint8], f: Fields, sel: NDArray[np.int64], n: int
) -> tuple[NDArray[np.int64], NDArray[np.uint64]]:
    """CSR (ptr, values) of a repeated varint field, packed or not, in wire order."""
    packed = f.wire[sel] == 2
    ptr = np.zeros(n + 1, dtype=np.int64)
    if sel.size == 0:
        return ptr, np.zeros(0, dtype=np.uint64)
    counts = np.ones(sel.shape[0], dtype=np.int64)
    pk = sel[packed]
    pcounts, pvalues = decode_packed_varints(buf, f.start[pk], f.end[pk])
    if packed.all():
        values = pvalues
        counts = pcounts
    else:
        counts[packed] = pcounts
        offsets = np.zeros(sel.shape[0] + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        values = np.zeros(int(offsets[-1]), dtype=np.uint64)
        values[offsets[:-1][~packed]] = f.value[sel[~packed]]
        values[ranges(offsets[:-1][packed], offsets[1:][packed])] = pvalues
    per_node = np.bincount(f.owner[sel], weights=counts, minlength=n).astype(np.int64)
    np.cumsum(per_node, out=ptr[1:])
    return ptr, values


def _ragged_field(
    buf: NDArray[np.uint8], f: Fields, sel: NDArray[np.int64], n: int
) -> tuple[Ragged, NDArray[np.bool_]]:
    start = np.zeros(n, dtype=np.int64)
    end = np.zeros(n, dtype=np.int64)
    present = np.zeros(n, dtype=bool)
    start[f.owner[sel]] = f.start[sel]
    end[f.owner[sel]] = f.end[sel]
    present[f.owner[sel]] = True
    return Ragged(buf, start, end), present


@dataclass
class _AttrCols:
    """Per-row name span, value kind, raw value and payload span of attribute messages."""

    nstart: NDArray[np.int64]
    nend: NDArray[np.int64]
    kind: NDArray[np.int8]
    value: NDArray[np.uint64]
    pstart: NDArray[np.int64]
    pend: NDArray[np.int64]

    @staticmethod
    def empty(a: int) -> _AttrCols:
        z = np.zeros(a, dtype=np.int64)
        return _AttrCols(z, z.copy(), np.zeros(a, np.int8), np.zeros(a, np.uint64), z.copy(), z.copy())


def _canonical(buf: NDArray[np.uint8], start: NDArray[np.int64], end: NDArray[np.int64],
               cols: _AttrCols) -> NDArray[np.bool_]:
    """Fast path for the canonical layout ``0a len name [tag value]``: fills ``cols`` for the
    rows it decodes and returns their mask (the rest go through the generic walker)."""
    length = buf[start + 1].astype(np.int64)
    nend = start + 2 + length
    ok = (buf[start] == 0x0A) & (length < 0x80) & (nend <= end)
    tpos = np.where(ok, nend, start)
    t1 = buf[tpos].astype(np.int64)
    t2 = buf[tpos + 1].astype(np.int64)
    two = t1 >= 0x80
    tag = np.where(two, (t1 & 0x7F) | (t2 << 7), t1)
    field = tag >> 3
    wire = tag & 7
    novalue = tpos == end
    known = (field >= 3) & (field <= 32) & (~two | (t2 < 0x80))
    ok &= novalue | (known & (_EXPECTED_WIRE[np.clip(field, 0, 32)] == wire) & (wire != 1) & (wire != 5))
    rows = np.flatnonzero(ok & ~novalue)
    vpos = tpos[rows] + 1 + two[rows]
    lim = end[rows]
    good = vpos < lim
    rows, vpos, lim = rows[good], vpos[good], lim[good]
    try:
        value, after = read_varints(buf, vpos, lim, rows)
    except WireError:
        return np.zeros(start.shape[0], dtype=bool)  # let the generic path report it
    is_len = wire[rows] == 2
    stop = np.where(is_len, after + value.astype(np.int64), after)
    exact = stop == lim
    rows, value, after, is_len, stop = rows[exact], value[exact], after[exact], is_len[exact], stop[exact]
    done = ok & novalue
    done[rows] = True
    fast = np.flatnonzero(done)
    cols.nstart[fast] = start[fast] + 2
    cols.nend[fast] = nend[fast]
    cols.kind[rows] = field[rows]
    cols.value[rows] = value
    cols.pstart[rows] = np.where(is_len, after, vpos[exact])
    cols.pend[rows] = np.where(is_len, stop, vpos[exact])
    return done


def _generic(buf: NDArray[np.uint8], start: NDArray[np.int64], end: NDArray[np.int64],
             rows: NDArray[np.int64], cols: _AttrCols, doc: dict[int, bytes]) -> None:
    g = walk_fields(buf, start[rows], end[rows])
    name_sel = select(g, 1, (2,))
    cols.nstart[rows[g.owner[name_sel]]] = g.start[name_sel]
    cols.nend[rows[g.owner[name_sel]]] = g.end[name_sel]
    vsel = np.flatnonzero((g.field >= 3) & (g.field <= 32))
    bad = _EXPECTED_WIRE[g.field[vsel]] != g.wire[vsel]
    if bad.any():
        k = vsel[np.argmax(bad)]
        raise WireError(
            g.start[k], g.owner[k], f"attribute value field {int(g.field[k])} has wire type {int(g.wire[k])}"
        )
    at = rows[g.owner[vsel]]
    cols.kind[at] = g.field[vsel]
    cols.value[at] = g.value[vsel]
    cols.pstart[at] = g.start[vsel]
    cols.pend[at] = np.where(g.wire[vsel] == 2, g.end[vsel], g.start[vsel])
    for k in select(g, 2, (2,)).tolist():
        doc[int(rows[g.owner[k]])] = buf[g.start[k] : g.end[k]].tobytes()


def decode_attrs(
    buf: NDArray[np.uint8], start: NDArray[np.int64], end: NDArray[np.int64],
    owner: NDArray[np.int64], num_owners: int,
) -> AttrTable:
    """Decode ``AttributeProto`` messages at spans (start, end) owned by ``owner`` (sorted)."""
    a = start.shape[0]
    cols = _AttrCols.empty(a)
    doc: dict[int, bytes] = {}
    fast = _canonical(buf, start, end, cols) if a else np.zeros(0, dtype=bool)
    rest = np.flatnonzero(~fast)
    if rest.size:
        _generic(buf, start, end, rest, cols, doc)
    codes, names = categorize(buf, cols.nstart, cols.nend)
    counts = np.bincount(owner, minlength=num_owners)
    ptr = np.zeros(num_owners + 1, dtype=np.int64)
    np.cumsum(counts, out=ptr[1:])
    return AttrTable(ptr, codes, names, cols.kind, cols.value, Ragged(buf, cols.pstart, cols.pend), doc)


def decode_nodes(
    buf: NDArray[np.uint8], starts: NDArray[np.int64], ends: NDArray[np.int64]
) -> NodeColumns:
    """Decode the ``Node`` messages at (starts, ends)."""
    n = starts.shape[0]
    f = walk_fields(buf, starts, ends)
    sel = {k: select(f, k, w) for k, w in _NODE_WIRE.items()}
    scalars = {}
    for k in (1, 3, 6, 7):
        col = np.zeros(n, dtype=np.uint64)
        col[f.owner[sel[k]]] = f.value[sel[k]]
        scalars[k] = col
    types = np.minimum(scalars[3], np.uint64(127)).astype(np.int8)
    names, _ = _ragged_field(buf, f, sel[2], n)
    ctrl_ptr, ctrl = _repeated_varints(buf, f, sel[4], n)
    data_ptr, data = _repeated_varints(buf, f, sel[5], n)
    inputs, in_present = _ragged_field(buf, f, sel[8], n)
    outputs, out_present = _ragged_field(buf, f, sel[9], n)
    a = sel[10]
    attrs = decode_attrs(buf, f.start[a], f.end[a], f.owner[a], n)
    return NodeColumns(
        scalars[1], types, names, scalars[6], scalars[7], data_ptr, data, ctrl_ptr, ctrl,
        inputs, in_present, outputs, out_present, attrs,
    )
