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
_CHUNK_BYTES = 64 << 20  # decompressed bytes compared per pass
_STRIKES = 2  # templates in a row that matched no other file: no more templates of that length


@dataclass(eq=False)
class Template:
    """A fully decoded file and where its varying values sit in its bytes.

    Attributes:
        rank: the rank whose file it is.
        trace: its decoded trace.
        data: its decompressed bytes.
        forbid: (L,) uint8 mask of the bits that must be equal in a file patched from it.
        int_owner / int_pos / int_kind: per varying integer attribute, the node, byte offset
            and value kind of each of its varint rows, in file order.
        str_owner / str_start / str_end: per varying string attribute, node and byte span of
            each of its string rows, in file order.
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
        str_owner, str_start, str_end = {}, {}, {}
        for name in VARYING_STRS:
            rows = table.rows_named(name)
            rows = rows[table.kind[rows] == AttrKind.STRING]
            start, end = table.payload.start[rows], table.payload.end[rows]
            allow[_spans(start, end)] = 0xFF
            str_owner[name], str_start[name], str_end[name] = owner[rows], start, end
        return Template(rank, trace, buf, ~allow, int_owner, int_pos, int_kind, str_owner, str_start, str_end)


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

    ``ints[name]`` is (m, k) int64 (row i = ``ranks[i]``'s values at the template's rows of
    ``name``); ``strs[name]`` is (m, k) int32 codes into ``categories``.
    """

    template: Template
    ranks: NDArray[np.int64]
    ints: dict[str, NDArray[np.int64]]
    strs: dict[str, NDArray[np.int32]]
    categories: tuple[str, ...]


def _patch(template: Template, ranks: list[int], block: NDArray[np.uint8]) -> PatchBatch:
    """Read the varying values of the files ``block`` (one row each) at the template's offsets."""
    m, length = block.shape
    buf = np.concatenate([block.reshape(-1), np.zeros(PAD_BYTES, np.uint8)])
    base = (np.arange(m, dtype=np.int64) * length)[:, None]
    ints = {}
    for name, pos in template.int_pos.items():
        at = (base + pos[None, :]).reshape(-1)
        raw, _ = read_varints(buf, at, np.repeat(base[:, 0] + length, pos.shape[0]), at)
        kind = np.tile(template.int_kind[name], m)
        ints[name] = scalar_as_int(kind, raw).reshape(m, pos.shape[0])
    names = list(template.str_start)
    starts = [(base + template.str_start[n][None, :]).reshape(-1) for n in names]
    ends = [(base + template.str_end[n][None, :]).reshape(-1) for n in names]
    codes, categories = categorize(buf, np.concatenate(starts or [np.zeros(0, np.int64)]),
                                   np.concatenate(ends or [np.zeros(0, np.int64)]))
    strs, at = {}, 0
    for name, s in zip(names, starts, strict=True):
        strs[name] = codes[at : at + s.shape[0]].reshape(m, -1)
        at += s.shape[0]
    return PatchBatch(template, np.array(ranks, dtype=np.int64), ints, strs, categories)


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
            seen = dict.fromkeys(batch.strs[name][row].tolist())  # first-seen order, as decoding
            remap = np.zeros(len(batch.categories), dtype=np.int32)
            remap[list(seen)] = np.arange(len(seen), dtype=np.int32)
            codes = np.full(n, -1, dtype=np.int32)
            codes[owner] = remap[batch.strs[name][row]]
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
    (:func:`simcore.traces.chakra.et.read_traces`' batched passes and cache).
    """
    from simcore.traces.chakra.et import read_paths, trace_paths

    paths = trace_paths(prefix, num_ranks)
    templates: dict[int, list[Template]] = {}
    strikes: dict[int, int] = {}
    decoded: dict[int, EtTrace] = {}
    batches: list[PatchBatch] = []
    full: list[int] = []
    at = 0
    while at < len(paths):
        datas: dict[int, bytes] = {}
        size = 0
        while at < len(paths) and (size < _CHUNK_BYTES or not datas):
            with open(paths[at], "rb") as fh:
                datas[at] = decompress(fh.read(), paths[at])
            size += len(datas[at])
            at += 1
        by_length: dict[int, list[int]] = {}
        for r, data in datas.items():
            by_length.setdefault(len(data), []).append(r)
        for length, ranks in by_length.items():
            pending = ranks
            block = np.frombuffer(b"".join(datas[r] for r in pending), dtype=np.uint8).reshape(len(pending), length)
            for template in reversed(templates.get(length, [])):
                pending, block = _match(template, pending, block, batches)
                if not pending:
                    break
            while pending:
                if strikes.get(length, 0) >= _STRIKES:
                    full += pending
                    break
                r = pending[0]
                trace = decode_trace(datas[r], paths[r])
                template = Template.of(r, trace)
                templates.setdefault(length, []).append(template)
                decoded[r] = trace
                before = len(pending)
                pending, block = _match(template, pending, block, batches)
                strikes[length] = 0 if before - len(pending) > 1 else strikes.get(length, 0) + 1
        del datas
    if full:
        for r, trace in zip(full, read_paths([paths[r] for r in full], cache=cache), strict=True):
            decoded[r] = trace
    return RankTraces(paths, decoded, batches)


def _match(template: Template, pending: list[int], block: NDArray[np.uint8], batches: list[PatchBatch]
           ) -> tuple[list[int], NDArray[np.uint8]]:
    """Patch the rows of ``block`` (files of ``pending``) that match ``template``; the rest."""
    ok = np.logical_not(np.bitwise_and(np.bitwise_xor(block, template.data), template.forbid).any(axis=1))
    if not ok.any():
        return pending, block
    hit = np.flatnonzero(ok)
    batches.append(_patch(template, [pending[i] for i in hit.tolist()], block[hit]))
    return [pending[i] for i in np.flatnonzero(~ok).tolist()], block[~ok]
