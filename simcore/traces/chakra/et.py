"""Chakra execution traces: read and write ET files (public API).

``read_trace(path) -> EtTrace`` decodes one rank's file (plain or gzip, detected by content);
``read_traces(prefix, num_ranks=None)`` reads ``<prefix>.<rank>.et`` for all ranks, in parallel
threads (zlib and numpy release the GIL); ``write_trace(path, trace, compress=False)`` writes a
trace back in the canonical protobuf encoding (a file written by protobuf's own serializer reads
back and writes out byte-identical). Decoded traces are cached per file: in memory, and on disk
under ``$SIMSWEEP_CACHE_DIR`` (default ``~/.cache/simsweep/et``) keyed by path, size and mtime,
so a second run of the same inputs skips decompression and decoding.

Format: reference/astra-sim-and-chakra.md §4.1-4.2. No dependency on the official ``chakra``
package: the wire decoding is written here (:mod:`simcore.traces.chakra._wire`).
"""

from __future__ import annotations

import os
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from simcore.errors import InputError
from simcore.traces.chakra.decode import decode_many, decode_trace, decompress
from simcore.traces.chakra.schema import AttrKind, CommType, NodeType
from simcore.traces.chakra.trace import AttrTable, EtTrace, Ragged, StrColumn

__all__ = [
    "AttrKind",
    "AttrTable",
    "CommType",
    "EtTrace",
    "NodeType",
    "Ragged",
    "StrColumn",
    "read_trace",
    "read_traces",
    "trace_paths",
    "write_trace",
]


def read_trace(path: str | os.PathLike[str], *, cache: bool = True) -> EtTrace:
    """Read one Chakra ET file.

    Args:
        path: the file (plain or gzip-compressed).
        cache: reuse / store the decoded trace in the per-file cache.

    Raises:
        InputError: the file is malformed (names the file and the node id or byte offset).
        FileNotFoundError: no such file.
    """
    from simcore.traces.chakra import cache as et_cache

    p = str(path)
    if cache:
        hit = et_cache.load(p)
        if hit is not None:
            return hit
    with open(p, "rb") as fh:
        raw = fh.read()
    trace = decode_trace(decompress(raw, p), p)
    if cache:
        et_cache.store(p, trace)
    return trace


def trace_paths(prefix: str | os.PathLike[str], num_ranks: int | None = None) -> list[str]:
    """The files ``<prefix>.<rank>.et`` for ranks 0..num_ranks-1 (all present ones if None).

    Raises:
        InputError: no file matches, or the ranks found are not 0..R-1.
    """
    pre = Path(prefix)
    if num_ranks is not None:
        paths = [f"{pre}.{r}.et" for r in range(num_ranks)]
        missing = [p for p in paths if not os.path.exists(p)]
        if missing:
            raise InputError("workload", str(prefix), f"missing trace file {missing[0]}")
        return paths
    folder = pre.parent if str(pre.parent) else Path(".")
    pattern = re.compile(re.escape(pre.name) + r"\.(\d+)\.et$")
    ranks = sorted(
        int(m.group(1)) for name in os.listdir(folder) if (m := pattern.match(name))
    ) if folder.is_dir() else []
    if not ranks:
        raise InputError("workload", str(prefix), "no files named <prefix>.<rank>.et")
    if ranks != list(range(len(ranks))):
        raise InputError("workload", str(prefix), f"ranks are not 0..{len(ranks) - 1}: {ranks[:8]}")
    return [f"{pre}.{r}.et" for r in ranks]


_FILES_PER_PASS = 4


def _read_bytes(path: str) -> bytes:
    with open(path, "rb") as fh:
        return decompress(fh.read(), path)


def read_traces(
    prefix: str | os.PathLike[str], num_ranks: int | None = None, *, cache: bool = True,
    threads: int | None = None,
) -> list[EtTrace]:
    """Read the per-rank files ``<prefix>.<rank>.et``; element r is rank r's trace.

    Cached files are loaded from the cache; the others are decompressed and decoded a few
    files per vectorized pass, passes spread over ``threads`` threads (default: one per CPU,
    at most 4; zlib and numpy release the GIL).
    """
    from simcore.traces.chakra import cache as et_cache

    paths = trace_paths(prefix, num_ranks)
    out: list[EtTrace | None] = [et_cache.load(p) if cache else None for p in paths]
    miss = [i for i, t in enumerate(out) if t is None]
    if miss:
        workers = max(1, min(threads or min(os.cpu_count() or 1, 4), len(miss)))
        # a few files per vectorized pass: amortizes numpy's per-call cost while the arrays
        # stay small enough to be recycled by the allocator (no page faults)
        chunks = [miss[k : k + _FILES_PER_PASS] for k in range(0, len(miss), _FILES_PER_PASS)]

        def decode(chunk: list[int]) -> list[EtTrace]:
            datas = [_read_bytes(paths[i]) for i in chunk]
            return decode_many(datas, [paths[i] for i in chunk])

        if workers == 1:
            decoded = [decode(c) for c in chunks]
        else:
            with ThreadPoolExecutor(workers) as pool:
                decoded = list(pool.map(decode, chunks))
        for chunk, traces in zip(chunks, decoded, strict=True):
            for i, t in zip(chunk, traces, strict=True):
                out[i] = t
                if cache:
                    et_cache.store(paths[i], t)
    return [t for t in out if t is not None]


def write_trace(path: str | os.PathLike[str], trace: EtTrace, compress: bool = False) -> None:
    """Write ``trace`` as a Chakra ET file (gzip-compressed if ``compress``)."""
    from simcore.traces.chakra.encode import encode_trace

    data = encode_trace(trace)
    if compress:
        import gzip

        data = gzip.compress(data, compresslevel=6, mtime=0)
    Path(path).write_bytes(data)
