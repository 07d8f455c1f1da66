"""Read the per-rank ET files of one workload, decoding one file per distinct layout.

Model: the files of a multi-rank workload (simsweep's exports, ASTRA-sim's generator traces) are
mostly the same program: two ranks of one pipeline stage differ only in their send/receive
peers (``comm_src`` / ``comm_dst``) and communicator names (``pg_name``). Two files of equal
length whose bytes are equal everywhere except
- in the low 7 bits of the bytes of a ``comm_src`` / ``comm_dst`` varint value (so every varint
  keeps its length: the continuation bits are equal), and
- in the bytes of a ``pg_name`` string value (its length prefix is equal),
- in the same way in the values of the file's ``GlobalMetadata`` attributes (e.g. its rank),
parse to the same protobuf structure field by field (reference/astra-sim-and-chakra.md §4.2: a
field's extent depends only on its tag, varint continuation bits and length prefixes). Their
decoded traces are then equal except in those values (metadata is not a column: a trace's
bulk is decoded from its own file when asked for). So one file of each such layout (a
*template*) is decoded in full (:mod:`simcore.traces.chakra.decode`) and every other file is
checked against it with one masked
byte comparison and *patched*: its peer and communicator values are read at the template's byte
positions. The check is exact (no hash): a file that differs anywhere else gets a template of
its own, or, when templates stop matching other files, is decoded in full with the rest.

A patched rank's :class:`EtTrace` is built only when asked for (the symmetry folding reads the
patches directly, :func:`simcore.emulator.symmetry.representatives`), and is equal column for
column to decoding its file (tests/simcore/traces/test_patch.py).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import overload

import numpy as np
from numpy.typing import NDArray

from simcore.errors import InputError
from simcore.traces.chakra._keys import categorize
from simcore.traces.chakra._wire import PAD_BYTES, read_varints
from simcore.traces.chakra.columns import scalar_as_int
from simcore.traces.chakra.decode import decode_trace, decompress
from simcore.traces.chakra.schema import AttrKind
from simcore.traces.chakra.trace import EtBulk, EtTrace, StrColumn

__all__ = ["PatchBatch", "RankTraces", "Template", "read_rank_traces"]

VARYING_INTS = ("comm_src", "comm_dst")  # send/recv peers
VARYING_STRS = ("pg_name",)  # communicator names
_VARINT_KINDS = (AttrKind.INT32, AttrKind.INT64, AttrKind.UINT32, AttrKind.UINT64, AttrKind.SINT32,
                 AttrKind.SINT64, AttrKind.BOOL)
_CHUNK_BYTES = 64 << 20  # decompressed bytes read per pass
_HOLD_BYTES = 256 << 20  # files' bytes kept from hashing to reading (else read again)
_COMPARE_BYTES = 1 << 20  # bytes of files compared with a template per numpy call
_STRIKES = 2  # templates in a row that matched no other file: no more templates of that length


@dataclass(eq=False)
class Template:
    """A fully decoded file and where its varying values sit in its bytes.

    Attributes:
        rank: the rank whose file it is.
        trace: its decoded trace.
        data: its decompressed bytes.
        forbid: (L,) uint8 mask of the bits that must be equal in a file patched from it.
        words / forbid_words: the same zero-padded to whole 8-byte words, as uint64 (compared
            a word at a time).
        int_owner / int_pos / int_kind: per varying integer attribute, the node, byte offset
            and value kind of each of its varint rows, in file order.
        str_owner / str_start / str_end: per varying string attribute, node and byte span of
            each of its string rows, in file order.
        str_class: per varying string attribute, (k,) class of each row: rows whose strings
            are equal in the template (a rank's collectives mostly name a few groups).
    """

    rank: int
    trace: EtTrace
    data: NDArray[np.uint8]
    forbid: NDArray[np.uint8]
    int_owner: dict[str, NDArray[np.int64]]
    int_pos: dict[str, NDArray[np.int64]]
    int_kind: dict[str, NDArray[np.int8]]
    str_owner: dict[str, NDArray[np.int64]]
    str_start: dict[str, NDArray[np.int64]]
    str_end: dict[str, NDArray[np.int64]]
    str_class: dict[str, NDArray[np.int32]]
    words: NDArray[np.uint64]
    forbid_words: NDArray[np.uint64]

    @staticmethod
    def of(rank: int, trace: EtTrace) -> Template:
        """The template of ``trace``, just decoded (its attribute offsets are into its file's bytes)."""
        bulk = trace.bulk
        buf = bulk.attrs.payload.buf[: bulk.attrs.payload.buf.shape[0] - PAD_BYTES]
        table = bulk.attrs
        owner = table.owner()
        allow = np.zeros(buf.shape[0], dtype=np.uint8)
        int_owner, int_pos, int_kind = {}, {}, {}
        padded = np.concatenate([buf, np.zeros(PAD_BYTES, np.uint8)])
        for name in VARYING_INTS:
            rows = table.rows_named(name)
            rows = rows[np.isin(table.kind[rows], _VARINT_KINDS)]
            pos = table.payload.start[rows]
            _, after = read_varints(padded, pos, np.full(pos.shape, buf.shape[0]), rows)
            span = _spans(pos, after)
            allow[span] = 0x7F
            int_owner[name], int_pos[name], int_kind[name] = owner[rows], pos, table.kind[rows]
        meta = bulk.metadata  # per-file metadata (e.g. the rank): not in the columns, free to differ
        rows = np.flatnonzero(np.isin(meta.kind, _VARINT_KINDS))
        pos = meta.payload.start[rows]
        _, after = read_varints(padded, pos, np.full(pos.shape, buf.shape[0]), rows)
        allow[_spans(pos, after)] = 0x7F
        rows = np.flatnonzero(meta.kind == AttrKind.STRING)
        allow[_spans(meta.payload.start[rows], meta.payload.end[rows])] = 0xFF
        str_owner, str_start, str_end, str_class = {}, {}, {}, {}
        for name in VARYING_STRS:
            rows = table.rows_named(name)
            rows = rows[table.kind[rows] == AttrKind.STRING]
            start, end = table.payload.start[rows], table.payload.end[rows]
            allow[_spans(start, end)] = 0xFF
            str_owner[name], str_start[name], str_end[name] = owner[rows], start, end
            str_class[name] = categorize(padded, start, end)[0]
        forbid = ~allow
        width = _row_width(buf.shape[0])
        words, forbid_words = np.zeros(width, np.uint8), np.zeros(width, np.uint8)
        words[: buf.shape[0]], forbid_words[: buf.shape[0]] = buf, forbid
        return Template(rank, trace, buf, forbid, int_owner, int_pos, int_kind, str_owner, str_start, str_end,
                        str_class, words.view(np.uint64), forbid_words.view(np.uint64))


def _row_width(length: int) -> int:
    """Bytes per row of a file of ``length`` bytes in a block: whole 8-byte words."""
    return -(-length // 8) * 8


def _spans(start: NDArray[np.int64], end: NDArray[np.int64]) -> NDArray[np.int64]:
    """All byte offsets of the spans [start, end)."""
    lengths = end - start
    if lengths.size == 0:
        return np.zeros(0, dtype=np.int64)
    first = np.repeat(start - np.concatenate(([0], np.cumsum(lengths)[:-1])), lengths)
    return first + np.arange(int(lengths.sum()), dtype=np.int64)


@dataclass(eq=False)
class PatchBatch:
    """Files patched from one template: ``ranks`` and, per varying attribute, their values.

    ``ints[name]`` is (m, k) int64: row i holds ``ranks[i]``'s values at the template's rows of
    ``name``. ``strs[name]`` is ((m, u) int32 codes into ``categories``, (k,) column of each row):
    rank i's string at row j is ``categories[codes[i, column[j]]]``.
    """

    template: Template
    ranks: NDArray[np.int64]
    ints: dict[str, NDArray[np.int64]]
    strs: dict[str, tuple[NDArray[np.int32], NDArray[np.int64]]]
    categories: tuple[str, ...]

    def str_codes(self, name: str, row: int) -> NDArray[np.int32]:
        """(k,) codes into ``categories`` of file ``row``'s strings of ``name``."""
        codes, column = self.strs[name]
        return codes[row][column]


def _patch(template: Template, ranks: list[int], block: NDArray[np.uint8], length: int,
           hit: NDArray[np.int64]) -> PatchBatch:
    """Read the varying values of the files at rows ``hit`` of ``block`` (one file of ``length``
    bytes per row, zero-padded; zero rows last) at the template's offsets."""
    m = hit.shape[0]
    flat = block.reshape(-1)
    base = (hit * block.shape[1])[:, None]
    ints = {}
    for name, pos in template.int_pos.items():
        at = (base + pos[None, :]).reshape(-1)
        raw, _ = read_varints(flat, at, np.repeat(base[:, 0] + length, pos.shape[0]), at)
        kind = np.tile(template.int_kind[name], m)
        ints[name] = scalar_as_int(kind, raw).reshape(m, pos.shape[0])
    spans: list[tuple[str, NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]] = []
    for name, start in template.str_start.items():
        end, column = template.str_end[name], template.str_class[name].astype(np.int64)
        if column.size and _same_within_classes(block, hit, start, end, column):
            order = np.argsort(column, kind="stable")  # classes are 0..u-1: the first row of each
            first = order[np.flatnonzero(np.concatenate(([True], np.diff(column[order]) != 0)))]
            spans.append((name, start[first], end[first], column))
        else:
            spans.append((name, start, end, np.arange(start.shape[0], dtype=np.int64)))
    starts = np.concatenate([(base + s[None, :]).reshape(-1) for _, s, _, _ in spans] or [np.zeros(0, np.int64)])
    ends = np.concatenate([(base + e[None, :]).reshape(-1) for _, _, e, _ in spans] or [np.zeros(0, np.int64)])
    codes, categories = categorize(flat, starts, ends)
    strs, at = {}, 0
    for name, s, _, column in spans:
        strs[name] = (codes[at : at + m * s.shape[0]].reshape(m, -1), column)
        at += m * s.shape[0]
    return PatchBatch(template, np.array(ranks, dtype=np.int64), ints, strs, categories)


def _same_within_classes(block: NDArray[np.uint8], hit: NDArray[np.int64], start: NDArray[np.int64],
                         end: NDArray[np.int64], column: NDArray[np.int64]) -> bool:
    """Whether in every file of ``hit`` the strings of rows of one class are equal (as in the template)."""
    order = np.argsort(column, kind="stable")
    bounds = np.flatnonzero(np.diff(column[order])) + 1
    for rows in np.split(order, bounds):
        if rows.shape[0] < 2:
            continue
        width = int(end[rows[0]] - start[rows[0]])  # equal strings in the template: equal lengths
        if width == 0:
            continue
        cols = (start[rows][:, None] + np.arange(width)).reshape(-1)
        got = block[np.ix_(hit, cols)].reshape(hit.shape[0], rows.shape[0], width)
        if not (got == got[:, :1, :]).all():
            return False
    return True


class RankTraces(Sequence[EtTrace]):
    """The traces of ranks 0..R-1: templates and fully decoded files as they are, patched files
    built on first access (then kept)."""

    def __init__(self, paths: list[str], decoded: dict[int, EtTrace], batches: list[PatchBatch]) -> None:
        self.paths = paths
        self.decoded = decoded
        self.batches = batches
        self._slot: dict[int, tuple[PatchBatch, int]] = {}
        for batch in batches:
            for row, r in enumerate(batch.ranks.tolist()):
                self._slot[r] = (batch, row)

    def __len__(self) -> int:
        return len(self.paths)

    @overload
    def __getitem__(self, index: int) -> EtTrace: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[EtTrace]: ...

    def __getitem__(self, index: int | slice) -> EtTrace | Sequence[EtTrace]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        r = index + len(self) if index < 0 else index
        trace = self.decoded.get(r)
        if trace is None:
            if not 0 <= r < len(self):
                raise IndexError(index)
            batch, row = self._slot[r]
            trace = self.decoded[r] = _materialize(batch, row, self.paths[r])
        return trace

    def __iter__(self) -> Iterator[EtTrace]:
        return (self[i] for i in range(len(self)))


def _materialize(batch: PatchBatch, row: int, path: str) -> EtTrace:
    """The trace of the file at ``row`` of ``batch``: its template's with the patched columns."""
    t = batch.template
    base = t.trace
    n = base.num_nodes
    ints = dict(base.ints)
    for name, owner in t.int_owner.items():
        if owner.size:
            values, present = base.ints[name]
            values = values.copy()
            values[owner] = batch.ints[name][row]
            ints[name] = (values, present)
    strs = dict(base.strs)
    for name, owner in t.str_owner.items():
        if owner.size:
            got = batch.str_codes(name, row)
            seen = dict.fromkeys(got.tolist())  # first-seen order, as decoding
            remap = np.zeros(len(batch.categories), dtype=np.int32)
            remap[list(seen)] = np.arange(len(seen), dtype=np.int32)
            codes = np.full(n, -1, dtype=np.int32)
            codes[owner] = remap[got]
            strs[name] = StrColumn(codes, tuple(batch.categories[c] for c in seen))

    def load_bulk() -> EtBulk:
        with open(path, "rb") as fh:
            return decode_trace(decompress(fh.read(), path), path, check_deps=False).bulk

    return EtTrace(
        path=path, version=base.version, ids=base.ids, types=base.types,
        start_time_micros=base.start_time_micros, duration_micros=base.duration_micros,
        data_ptr=base.data_ptr, data_deps=base.data_deps, ctrl_ptr=base.ctrl_ptr, ctrl_deps=base.ctrl_deps,
        ints=ints, strs=strs, lists=base.lists, _bulk=load_bulk,
    )


def read_rank_traces(prefix: str | os.PathLike[str], num_ranks: int | None = None, *,
                     cache: bool = True) -> RankTraces:
    """Read ``<prefix>.<rank>.et`` for every rank, decoding one file per distinct layout.

    Files are read in passes of about 64 MB (decompressed); in each pass, the files of one
    length are compared with that length's templates at once (a (files, length) byte matrix).
    A file that matches none becomes a new template, unless the last two templates of its
    length matched no other file: then it and the rest of that length are decoded in full
    (:func:`simcore.traces.chakra.et.read_traces`' batched passes and cache). With ``cache``,
    the result is stored under a hash of all the files' bytes and a second read of the same
    files loads it (:mod:`simcore.traces.chakra.patch_cache`).
    """
    from simcore.traces.chakra import patch_cache
    from simcore.traces.chakra.et import read_paths, trace_paths

    paths = trace_paths(prefix, num_ranks)
    raws: list[bytes | None] = [None] * len(paths)
    key = ""
    if cache:  # the content key needs every file's bytes: keep them for the pass below if small
        held, digest = 0, patch_cache.Key()
        for r, path in enumerate(paths):
            raw = _read_file(path)
            digest.add(raw)
            held += len(raw)
            raws[r] = raw if held <= _HOLD_BYTES else None
        key = digest.hex()
        hit = patch_cache.load(key, paths)
        if hit is not None:
            return hit
    reader = _Reader(paths)
    at = 0
    while at < len(paths):
        datas: dict[int, bytes] = {}
        size = 0
        while at < len(paths) and (size < _CHUNK_BYTES or not datas):
            got = raws[at]
            raws[at] = None
            datas[at] = decompress(got if got is not None else _read_file(paths[at]), paths[at])
            size += len(datas[at])
            at += 1
        by_length: dict[int, list[int]] = {}
        for r, data in datas.items():
            by_length.setdefault(len(data), []).append(r)
        for length, ranks in by_length.items():
            reader.add(length, ranks, datas)
        del datas
    if reader.full:
        for r, trace in zip(reader.full, read_paths([paths[r] for r in reader.full], cache=cache), strict=True):
            reader.decoded[r] = trace
    out = RankTraces(paths, reader.decoded, reader.batches)
    if cache:
        patch_cache.store(key, out)
    return out


class _Reader:
    """Templates by file length, the patch batches and the files left to decode in full."""

    def __init__(self, paths: list[str]) -> None:
        self.paths = paths
        self.templates: dict[int, list[Template]] = {}
        self.strikes: dict[int, int] = {}
        self.decoded: dict[int, EtTrace] = {}
        self.batches: list[PatchBatch] = []
        self.full: list[int] = []

    def add(self, length: int, ranks: list[int], datas: dict[int, bytes]) -> None:
        """Patch or decode the files of ``ranks``, all ``length`` bytes long."""
        if length == 0:  # as the decoder says of an empty stream (and a block of width 0 cannot be built)
            raise InputError(self.paths[ranks[0]], "0 bytes", "empty trace: no GlobalMetadata message")
        width = _row_width(length)  # zero rows after the files: padding for 8-byte loads
        block = np.zeros((len(ranks) + -(-PAD_BYTES // width), width), dtype=np.uint8)
        for i, r in enumerate(ranks):
            block[i, :length] = np.frombuffer(datas[r], dtype=np.uint8)
        rows = np.arange(len(ranks), dtype=np.int64)
        for template in reversed(self.templates.get(length, [])):
            rows = _match(template, ranks, rows, block, length, self.batches)
            if not rows.size:
                return
        while rows.size:
            if self.strikes.get(length, 0) >= _STRIKES:
                self.full += [ranks[i] for i in rows.tolist()]
                return
            r = ranks[int(rows[0])]
            trace = decode_trace(datas[r], self.paths[r])
            template = Template.of(r, trace)
            self.templates.setdefault(length, []).append(template)
            self.decoded[r] = trace
            before = rows.size
            rows = _match(template, ranks, rows, block, length, self.batches)
            self.strikes[length] = 0 if before - rows.size > 1 else self.strikes.get(length, 0) + 1


def _read_file(path: str) -> bytes:
    """The bytes of ``path``: one read system call for a regular file of its ``fstat`` size."""
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        parts = [os.read(fd, size)] if size else []
        if not parts or len(parts[0]) < size:  # not a regular file, or it shrank: read to the end
            while chunk := os.read(fd, 1 << 20):
                parts.append(chunk)
        return parts[0] if len(parts) == 1 else b"".join(parts)
    except OSError as err:  # os.read's error (a directory opens, then fails to read) names no file
        raise type(err)(err.errno, err.strerror, path) from None
    finally:
        os.close(fd)


def _match(template: Template, ranks: list[int], rows: NDArray[np.int64], block: NDArray[np.uint8], length: int,
           batches: list[PatchBatch]) -> NDArray[np.int64]:
    """Patch the files at ``rows`` of ``block`` (files of ``ranks``, one per row) that match
    ``template``; returns the rows that do not."""
    words = block.view(np.uint64)
    step = max(1, _COMPARE_BYTES // block.shape[1])  # rows per pass: the temporary stays small
    bad = np.empty(rows.shape[0], dtype=bool)
    diff = np.empty((min(step, rows.shape[0]), words.shape[1]), dtype=np.uint64)
    every = rows.shape[0] == len(ranks)
    for lo in range(0, rows.shape[0], step):
        hi = min(lo + step, rows.shape[0])
        out = diff[: hi - lo]
        np.bitwise_xor(words[lo:hi] if every else words[rows[lo:hi]], template.words, out=out)
        np.bitwise_and(out, template.forbid_words, out=out)
        out.any(axis=1, out=bad[lo:hi])
    hit = rows[~bad]
    if hit.size:
        batches.append(_patch(template, [ranks[i] for i in hit.tolist()], block, length, hit))
    return rows[bad]
