"""Decode the bytes of a Chakra ET file into an :class:`EtTrace`.

Encoding (reference/astra-sim-and-chakra.md §4.2, protolib.py): a stream of varint32-length-
prefixed protobuf messages, one ``GlobalMetadata`` then ``Node``\\ s; a length of 0 ends the
stream; the file may be gzip-compressed (detected by content, as ``openFileRd`` does). The
framing is a short sequential scan (one step per message); everything inside the messages is
decoded for all nodes at once by :mod:`simcore.traces._wire`. Any malformed input raises
:class:`InputError` naming the file and the node / byte offset.
"""

from __future__ import annotations

import zlib

import numpy as np
from numpy.typing import NDArray

from simcore.errors import InputError
from simcore.traces._wire import (
    Fields,
    WireError,
    categorize,
    decode_packed_varints,
    pad,
    ranges,
    read_varints,
    walk_fields,
)
from simcore.traces.et_lists import numeric_list_columns
from simcore.traces.et_schema import WIRE_OF_KIND, NodeType
from simcore.traces.et_trace import AttrTable, EtBulk, EtTrace, Ragged, int_columns, str_columns

__all__ = ["decode_trace", "decompress"]

_MAX_TYPE = max(int(t) for t in NodeType)
_NODE_WIRE = {1: (0,), 2: (2,), 3: (0,), 4: (0, 2), 5: (0, 2), 6: (0,), 7: (0,), 8: (2,),
              9: (2,), 10: (2,)}


def decompress(raw: bytes, path: str) -> bytes:
    """Return the ET byte stream, gunzipping it if it starts with the gzip magic number."""
    if raw[:2] != b"\x1f\x8b":
        return raw
    out: list[bytes] = []
    data = raw
    try:
        while data[:2] == b"\x1f\x8b":  # concatenated gzip members, like gzip.open
            d = zlib.decompressobj(47)
            out.append(d.decompress(data))
            if not d.eof:
                raise InputError(path, f"{len(raw)} bytes", "gzip stream is truncated")
            data = d.unused_data
    except zlib.error as err:
        raise InputError(path, f"{len(raw)} bytes", f"corrupt gzip stream ({err})") from None
    return b"".join(out)


def _frame(data: bytes, path: str) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Offsets (start, end) of each length-prefixed message, stopping at a zero length.

    The loop only hops from one length prefix to the next (the one sequential step of the
    format); the lengths are then decoded for all messages at once.
    """
    n = len(data)
    pos = 0
    heads: list[int] = []
    push = heads.append
    while pos < n:
        b = data[pos]
        if b < 0x80:
            if b == 0:
                break
            push(pos)
            pos += 1 + b
            continue
        push(pos)
        if pos + 1 < n and data[pos + 1] < 0x80 and data[pos + 1]:
            pos += 2 + (b & 0x7F) + (data[pos + 1] << 7)
            continue
        length, shift, at = 0, 0, pos
        while True:
            if pos >= n:
                raise InputError(path, f"byte {at}", "stream ends inside a message length")
            b = data[pos]
            length |= (b & 0x7F) << shift
            pos += 1
            if b < 0x80:
                break
            shift += 7
            if shift > 28:
                raise InputError(path, f"byte {at}", "message length is not a varint32")
        if length == 0:
            heads.pop()
            break
        pos += length
    buf = np.frombuffer(data + bytes(16), dtype=np.uint8)
    head = np.array(heads, dtype=np.int64)
    lengths, starts = read_varints(buf, head, np.full(head.shape, n + 16), head)
    ends = starts + lengths.astype(np.int64)
    over = ends > n
    if over.any():
        k = int(np.argmax(over))
        raise InputError(
            path, f"byte {int(head[k])}",
            f"message of {int(lengths[k])} bytes runs past the end ({n} bytes)",
        )
    return starts, ends


def _select(f: Fields, number: int, wires: tuple[int, ...], what: str, path: str) -> NDArray[np.int64]:
    sel = np.flatnonzero(f.field == number)
    bad = ~np.isin(f.wire[sel], wires)
    if bad.any():
        k = sel[np.argmax(bad)]
        raise InputError(
            path, f"{what} #{int(f.owner[k])} byte {int(f.start[k])}",
            f"field {number} has wire type {int(f.wire[k])}, expected {wires}",
        )
    return sel


def _repeated_varints(
    buf: NDArray[np.uint8], f: Fields, sel: NDArray[np.int64], n: int
) -> tuple[NDArray[np.int64], NDArray[np.uint64]]:
    """CSR (ptr, values) of a repeated varint field, packed or not, in wire order."""
    packed = f.wire[sel] == 2
    counts = np.ones(sel.shape[0], dtype=np.int64)
    pk = sel[packed]
    pcounts, pvalues = decode_packed_varints(buf, f.start[pk], f.end[pk])
    counts[packed] = pcounts
    offsets = np.zeros(sel.shape[0] + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    values = np.zeros(int(offsets[-1]), dtype=np.uint64)
    values[offsets[:-1][~packed]] = f.value[sel[~packed]]
    values[ranges(offsets[:-1][packed], offsets[1:][packed])] = pvalues
    per_node = np.bincount(f.owner[sel], weights=counts, minlength=n).astype(np.int64)
    ptr = np.zeros(n + 1, dtype=np.int64)
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


def decode_attrs(
    buf: NDArray[np.uint8], start: NDArray[np.int64], end: NDArray[np.int64],
    owner: NDArray[np.int64], num_owners: int, path: str,
) -> AttrTable:
    """Decode ``AttributeProto`` messages at spans (start, end) owned by ``owner`` (sorted)."""
    a = start.shape[0]
    g = walk_fields(buf, start, end)
    name_sel = _select(g, 1, (2,), "attribute", path)
    nstart = np.zeros(a, dtype=np.int64)
    nend = np.zeros(a, dtype=np.int64)
    nstart[g.owner[name_sel]] = g.start[name_sel]
    nend[g.owner[name_sel]] = g.end[name_sel]
    codes, names = categorize(buf, nstart, nend)
    vsel = np.flatnonzero((g.field >= 3) & (g.field <= 32))
    expected = np.array([WIRE_OF_KIND.get(k, -1) for k in range(33)], dtype=np.int8)
    bad = expected[g.field[vsel]] != g.wire[vsel]
    if bad.any():
        k = vsel[np.argmax(bad)]
        raise InputError(
            path, f"attribute #{int(g.owner[k])} byte {int(g.start[k])}",
            f"value field {int(g.field[k])} has wire type {int(g.wire[k])}",
        )
    kind = np.zeros(a, dtype=np.int8)
    value = np.zeros(a, dtype=np.uint64)
    pstart = np.zeros(a, dtype=np.int64)
    pend = np.zeros(a, dtype=np.int64)
    rows = g.owner[vsel]
    kind[rows] = g.field[vsel]
    value[rows] = g.value[vsel]
    pstart[rows] = g.start[vsel]
    pend[rows] = np.where(g.wire[vsel] == 2, g.end[vsel], g.start[vsel])
    doc = {int(g.owner[k]): buf[g.start[k] : g.end[k]].tobytes() for k in np.flatnonzero(g.field == 2)}
    counts = np.bincount(owner, minlength=num_owners)
    ptr = np.zeros(num_owners + 1, dtype=np.int64)
    np.cumsum(counts, out=ptr[1:])
    return AttrTable(ptr, codes, names, kind, value, Ragged(buf, pstart, pend), doc)


def check_nodes(trace: EtTrace, path: str) -> None:
    bad = (trace.types < 0) | (trace.types > _MAX_TYPE)
    if bad.any():
        k = int(np.argmax(bad))
        raise InputError(
            path, f"node id {int(trace.ids[k])}", f"unknown node type value {int(trace.types[k])}"
        )
    for label, ptr, deps in (("data", trace.data_ptr, trace.data_deps),
                             ("ctrl", trace.ctrl_ptr, trace.ctrl_deps)):
        idx = trace.index_of(deps)
        if (idx < 0).any():
            e = int(np.argmax(idx < 0))
            node = int(np.searchsorted(ptr, e, side="right") - 1)
            raise InputError(
                path, f"node id {int(trace.ids[node])}",
                f"{label} dependency on id {int(deps[e])}, which no node in this file has",
            )


def decode_trace(data: bytes, path: str, check_deps: bool = True) -> EtTrace:
    """Decode an (uncompressed) ET byte stream.

    Raises:
        InputError: malformed framing, wire data, node type or a dangling dependency.
    """
    starts, ends = _frame(data, path)
    if starts.size == 0:
        raise InputError(path, f"{len(data)} bytes", "empty trace: no GlobalMetadata message")
    buf = pad(data)
    try:
        trace = _decode_messages(buf, starts, ends, path)
    except WireError as err:
        raise InputError(path, f"byte {err.offset}", err.rule) from None
    if check_deps:
        check_nodes(trace, path)
    return trace


def _decode_messages(
    buf: NDArray[np.uint8], starts: NDArray[np.int64], ends: NDArray[np.int64], path: str
) -> EtTrace:
    meta = walk_fields(buf, starts[:1], ends[:1])
    vsel = _select(meta, 1, (2,), "GlobalMetadata", path)
    version = buf[meta.start[vsel[-1]] : meta.end[vsel[-1]]].tobytes() if vsel.size else b""
    msel = _select(meta, 2, (2,), "GlobalMetadata", path)
    metadata = decode_attrs(buf, meta.start[msel], meta.end[msel], np.zeros(msel.size, np.int64), 1, path)
    n = starts.shape[0] - 1
    f = walk_fields(buf, starts[1:], ends[1:])
    sel = {k: _select(f, k, w, "node", path) for k, w in _NODE_WIRE.items()}
    scalars = {}
    for k in (1, 3, 6, 7):
        col = np.zeros(n, dtype=np.uint64)
        col[f.owner[sel[k]]] = f.value[sel[k]]
        scalars[k] = col
    types = np.where(scalars[3] > np.uint64(127), np.uint64(127), scalars[3]).astype(np.int8)
    names, _ = _ragged_field(buf, f, sel[2], n)
    ctrl_ptr, ctrl = _repeated_varints(buf, f, sel[4], n)
    data_ptr, data = _repeated_varints(buf, f, sel[5], n)
    inputs, in_present = _ragged_field(buf, f, sel[8], n)
    outputs, out_present = _ragged_field(buf, f, sel[9], n)
    a = sel[10]
    attrs = decode_attrs(buf, f.start[a], f.end[a], f.owner[a], n, path)
    bulk = EtBulk(metadata, names, inputs, in_present, outputs, out_present, attrs)
    return EtTrace(
        path=path, version=version.decode("utf-8", errors="replace"), ids=scalars[1],
        types=types, start_time_micros=scalars[6], duration_micros=scalars[7],
        data_ptr=data_ptr, data_deps=data, ctrl_ptr=ctrl_ptr, ctrl_deps=ctrl,
        ints=int_columns(attrs, n), strs=str_columns(attrs, n),
        lists=numeric_list_columns(attrs, n), _bulk=bulk,
    )
