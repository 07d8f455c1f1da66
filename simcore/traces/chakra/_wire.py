"""Vectorized protobuf wire-format decoding over a byte array.

Model: a protobuf message is a sequence of fields ``tag value`` where ``tag = field << 3 | wire``
and the value is a varint (wire 0), 8 bytes (wire 1), a varint length followed by that many
bytes (wire 2) or 4 bytes (wire 5); wire types 3 and 4 (groups) are obsolete and rejected here
(protobuf encoding guide, developers.google.com/protocol-buffers/docs/encoding).

Instead of walking one message at a time, :func:`walk_fields` advances one cursor per message,
all cursors at once with numpy: iteration ``k`` decodes the ``k``-th field of every message that
still has bytes left. The cost is (max fields per message) x (a few numpy passes over the
messages), independent of the Python interpreter's per-field cost. Packed repeated varints are
decoded without any loop (:func:`decode_packed_varints`): a varint ends at every byte whose high
bit is clear. Every malformed input raises :class:`WireError` with the byte offset.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "Fields", "WireError", "decode_packed_varints", "pad", "ranges", "read_varints", "u64_view",
    "walk_fields",
]

PAD_BYTES = 16


class WireError(Exception):
    """Malformed wire data at byte ``offset`` of message ``owner`` (index into the spans)."""

    def __init__(self, offset: int, owner: int, rule: str) -> None:
        self.offset = int(offset)
        self.owner = int(owner)
        self.rule = rule
        super().__init__(f"byte {self.offset}: {rule}")


@dataclass(frozen=True)
class Fields:
    """All fields of a set of messages, grouped by message and in wire order.

    Attributes:
        owner: (F,) int64 index of the message (span) each field belongs to; non-decreasing.
        field: (F,) int64 field number.
        wire: (F,) int8 wire type.
        value: (F,) uint64 varint value, or the raw little-endian bits for wire 1 / 5.
        start: (F,) int64 first byte of a length-delimited value (wire 2), else of the value.
        end: (F,) int64 one past the last byte of the value.
    """

    owner: NDArray[np.int64]
    field: NDArray[np.int64]
    wire: NDArray[np.int8]
    value: NDArray[np.uint64]
    start: NDArray[np.int64]
    end: NDArray[np.int64]


def pad(data: bytes) -> NDArray[np.uint8]:
    """Return ``data`` as a uint8 array with :data:`PAD_BYTES` zero bytes appended.

    The padding lets 8-byte unaligned loads run past the end of the real data safely.
    """
    arr = np.zeros(len(data) + PAD_BYTES, dtype=np.uint8)
    arr[: len(data)] = np.frombuffer(data, dtype=np.uint8)
    return arr


def u64_view(buf: NDArray[np.uint8]) -> NDArray[np.uint64]:
    """Unaligned little-endian uint64 load at every byte position (a strided view, no copy)."""
    n = buf.shape[0] - 7
    return np.ndarray(shape=(n,), dtype="<u8", buffer=buf.data, offset=0, strides=(1,))


def read_varints(
    buf: NDArray[np.uint8], pos: NDArray[np.int64], limit: NDArray[np.int64], owner: NDArray[np.int64]
) -> tuple[NDArray[np.uint64], NDArray[np.int64]]:
    """Decode one varint at each position; return (values, positions after them).

    Raises:
        WireError: a varint runs past ``limit`` or is longer than 10 bytes.
    """
    first = buf[pos]
    value = (first & 0x7F).astype(np.uint64)
    length = np.ones(pos.shape[0], dtype=np.int64)
    live = np.flatnonzero(first & 0x80)
    shift = 7
    while live.size:
        if shift >= 70:
            raise WireError(pos[live[0]], owner[live[0]], "varint longer than 10 bytes")
        at = pos[live] + length[live]
        over = at >= limit[live]
        if over.any():
            k = live[np.argmax(over)]
            raise WireError(pos[k], owner[k], "varint runs past the end of its message")
        byte = buf[at]
        value[live] |= (byte & 0x7F).astype(np.uint64) << np.uint64(shift)
        length[live] += 1
        live = live[(byte & 0x80) != 0]
        shift += 7
    return value, pos + length


def walk_fields(
    buf: NDArray[np.uint8], start: NDArray[np.int64], end: NDArray[np.int64]
) -> Fields:
    """Decode the top-level fields of every message ``buf[start[i]:end[i]]``.

    Args:
        buf: padded byte array (see :func:`pad`).
        start: (M,) first byte of each message.
        end: (M,) one past the last byte of each message.

    Raises:
        WireError: a bad tag, wire type, varint, or a value running past its message.
    """
    u64 = u64_view(buf)
    idx = np.flatnonzero(start < end)
    pos = start[idx].astype(np.int64)
    lim = end[idx].astype(np.int64)
    parts: list[tuple[NDArray, ...]] = []
    while idx.size:
        fieldno, wire, value, vstart, nxt = _next_field(buf, u64, idx, pos, lim)
        parts.append((idx, fieldno, wire, value, vstart, nxt))
        keep = nxt < lim
        if keep.all():
            pos = nxt
        else:
            idx, pos, lim = idx[keep], nxt[keep], lim[keep]
    if not parts:
        e = np.zeros(0, dtype=np.int64)
        return Fields(e, e, np.zeros(0, np.int8), np.zeros(0, np.uint64), e, e)
    # the k-th part holds field k of each message still active: scatter without sorting
    owners = np.concatenate([p[0] for p in parts])
    counts = np.bincount(owners, minlength=start.shape[0])
    offsets = np.zeros(start.shape[0], dtype=np.int64)
    np.cumsum(counts[:-1], out=offsets[1:])
    total = owners.shape[0]
    out = [np.empty(total, dtype=c.dtype) for c in parts[0]]
    for k, part in enumerate(parts):
        at = offsets[part[0]] + k
        for dst, src in zip(out, part, strict=True):
            dst[at] = src
    return Fields(out[0], out[1], out[2], out[3], out[4], out[5])


_WIRE_OK = np.array([True, True, True, False, False, True, False, False])


def _next_field(
    buf: NDArray[np.uint8], u64: NDArray[np.uint64], idx: NDArray[np.int64],
    pos: NDArray[np.int64], lim: NDArray[np.int64],
) -> tuple[NDArray[np.int64], NDArray[np.int8], NDArray[np.uint64], NDArray[np.int64], NDArray[np.int64]]:
    """Decode the field at ``pos`` of each message: (field, wire, value, value start, next)."""
    first = buf[pos]
    if first.max() < 0x80:  # one-byte tags (field numbers < 16): the common case
        tag = first.astype(np.int64)
        pos = pos + 1
    else:
        utag, pos = read_varints(buf, pos, lim, idx)
        if (utag > np.uint64(2**32)).any():
            k = int(np.argmax(utag > np.uint64(2**32)))
            raise WireError(pos[k] - 1, idx[k], f"invalid field tag {int(utag[k])}")
        tag = utag.astype(np.int64)
    wire = (tag & 7).astype(np.int8)
    fieldno = tag >> 3
    bad = ~_WIRE_OK[wire] | (fieldno == 0)
    if bad.any():
        k = int(np.argmax(bad))
        raise WireError(pos[k] - 1, idx[k], f"invalid field tag {int(tag[k])}")
    is_len = wire == 2
    fixed = (wire == 1) | (wire == 5)
    if not fixed.any():  # varints and lengths only: one varint read at pos for all
        value, after = read_varints(buf, pos, lim, idx)
        vstart = np.where(is_len, after, pos)
    else:
        value = np.zeros(idx.shape[0], dtype=np.uint64)
        after = pos.copy()
        var = np.flatnonzero(~fixed)
        value[var], after[var] = read_varints(buf, pos[var], lim[var], idx[var])
        fx = np.flatnonzero(fixed)
        raw = u64[np.minimum(pos[fx], u64.shape[0] - 1)]
        eight = wire[fx] == 1
        value[fx] = np.where(eight, raw, raw & np.uint64(0xFFFFFFFF))
        after[fx] = pos[fx] + np.where(eight, 8, 4)
        vstart = np.where(is_len, after, pos)
    nxt = after
    if is_len.any():
        too_long = is_len & (value > np.uint64(2**31))
        if too_long.any():
            k = int(np.argmax(too_long))
            raise WireError(pos[k], idx[k], "length-delimited value longer than 2 GiB")
        nxt = np.where(is_len, after + value.astype(np.int64), after)
    over = nxt > lim
    if over.any():
        k = int(np.argmax(over))
        raise WireError(pos[k], idx[k], "field value runs past the end of its message")
    return fieldno, wire, value, vstart, nxt


def ranges(start: NDArray[np.int64], end: NDArray[np.int64]) -> NDArray[np.int64]:
    """Concatenation of ``arange(start[i], end[i])`` for all i, without a Python loop."""
    lengths = end - start
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    nonempty = lengths > 0
    s, ln = start[nonempty], lengths[nonempty]
    steps = np.ones(total, dtype=np.int64)
    heads = np.zeros(ln.shape[0], dtype=np.int64)
    np.cumsum(ln[:-1], out=heads[1:])
    steps[heads[0]] = s[0]
    steps[heads[1:]] = s[1:] - (s[:-1] + ln[:-1] - 1)
    return np.cumsum(steps)


def decode_packed_varints(
    buf: NDArray[np.uint8], start: NDArray[np.int64], end: NDArray[np.int64]
) -> tuple[NDArray[np.int64], NDArray[np.uint64]]:
    """Decode packed repeated varints in each span; return (count per span, values).

    Raises:
        WireError: a span ends inside a varint, or a varint is longer than 10 bytes.
    """
    at = ranges(start, end)
    counts = np.zeros(start.shape[0], dtype=np.int64)
    if at.size == 0:
        return counts, np.zeros(0, dtype=np.uint64)
    byte = buf[at]
    term = byte < 0x80
    last = end[end > start] - 1
    unterminated = buf[last] >= 0x80
    if unterminated.any():
        k = int(np.argmax(unterminated))
        raise WireError(last[k], int(np.flatnonzero(end > start)[k]), "packed varint is truncated")
    ends = np.flatnonzero(term)
    begins = np.empty_like(ends)
    begins[0] = 0
    begins[1:] = ends[:-1] + 1
    if (ends - begins).max() >= 10:
        k = int(np.argmax(ends - begins))
        raise WireError(at[begins[k]], -1, "varint longer than 10 bytes")
    # byte k of a varint contributes (b & 0x7f) << 7k
    within = np.arange(at.shape[0], dtype=np.int64) - np.repeat(begins, ends - begins + 1)
    parts = (byte & 0x7F).astype(np.uint64) << (within * 7).astype(np.uint64)
    values = np.bitwise_or.reduceat(parts, begins)
    lengths = end - start
    nonempty = np.flatnonzero(lengths > 0)
    heads = np.concatenate(([0], np.cumsum(lengths[nonempty])[:-1]))
    counts[nonempty] = np.add.reduceat(term.astype(np.int64), heads)
    return counts, values
