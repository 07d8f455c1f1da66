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
    "check_prefix",
    "read_paths",
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


def check_prefix(prefix: str | os.PathLike[str], key: str = "prefix") -> str:
    """``prefix`` as a string, or an InputError naming ``key`` if its file-name part is empty.

    Files are ``<prefix>.<rank>.et``: a prefix ending in a path separator (``runs/``) or naming
    ``.`` / ``..`` would make hidden files (``runs/.0.et``) that a reader taking the prefix as a
    path (``runs/`` = ``runs``) looks for elsewhere; writers and readers refuse it alike.
    """
    text = os.fspath(prefix)
    if not text or text.endswith(("/", os.sep)) or os.path.basename(text) in ("", ".", ".."):
        raise InputError(key, text, "needs a file name after the last '/': the files are <prefix>.<rank>.et "
                                    "(e.g. runs/w -> runs/w.0.et)")
    return text


def trace_paths(prefix: str | os.PathLike[str], num_ranks: int | None = None) -> list[str]:
    """The files ``<prefix>.<rank>.et`` for ranks 0..num_ranks-1 (all present ones if None).

    Raises:
        InputError: no file matches, the ranks found are not 0..R-1, or the prefix has no file
            name (:func:`check_prefix`).
    """
    pre = Path(check_prefix(prefix, "workload"))
    if num_ranks is not None:
        paths = [f"{pre}.{r}.et" for r in range(num_ranks)]
        folder = pre.parent if str(pre.parent) else Path(".")
        try:  # one directory listing instead of a stat per rank
            names = set(os.listdir(folder))
        except OSError:
            names = set()
        missing = [p for p in paths if os.path.basename(p) not in names and not os.path.isfile(p)]
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


# Files decoded per vectorized pass: enough that numpy's per-call cost is amortized, few enough
# that the pass's temporaries (several int64 per byte) stay small and are recycled by the
# allocator. Measured (CPU, one thread): 256 exported GPT-3 traces of ~70 KB take 0.96 s at 4
# files per pass, 0.55-0.60 s at 16-24 and 0.8 s at 64; the 64 generator traces of ~2.3 MB are
# insensitive between 1 and 4 files per pass.
_PASS_BYTES = 8 << 20
_MAX_FILES_PER_PASS = 24


def _files_per_pass(file_bytes: int) -> int:
    """Files per decoding pass for files of about ``file_bytes`` decompressed bytes each."""
    return max(1, min(_MAX_FILES_PER_PASS, -(-_PASS_BYTES // max(file_bytes, 1))))


def _read_bytes(path: str) -> bytes:
    with open(path, "rb") as fh:
        return decompress(fh.read(), path)


def read_traces(
    prefix: str | os.PathLike[str], num_ranks: int | None = None, *, cache: bool = True,
    threads: int | None = None,
) -> list[EtTrace]:
    """Read the per-rank files ``<prefix>.<rank>.et``; element r is rank r's trace.

    Traces cached in this process are reused; if any is missing, the whole set is loaded from
    the disk cache in one file (written by the previous read of the same files, see
    :func:`simcore.traces.chakra.cache.store_many`), else file by file. Otherwise the missing files are decompressed
    and decoded several files per vectorized pass, passes spread over ``threads`` threads
    (default: one per CPU, at most 4; zlib and numpy release the GIL), and the set is cached.
    """
    return read_paths(trace_paths(prefix, num_ranks), cache=cache, threads=threads)


def read_paths(paths: list[str], *, cache: bool = True, threads: int | None = None) -> list[EtTrace]:
    """Read the ET files ``paths`` (see :func:`read_traces`); element i is ``paths[i]``'s trace."""
    from simcore.traces.chakra import cache as et_cache

    out: list[EtTrace | None] = [et_cache.load_memory(p) if cache else None for p in paths]
    if cache and any(t is None for t in out):
        together = et_cache.load_many(paths)
        if together is not None:
            return together
        out = [t if t is not None else et_cache.load(p) for t, p in zip(out, paths, strict=True)]
    miss = [i for i, t in enumerate(out) if t is None]
    if miss:
        workers = max(1, min(threads or min(os.cpu_count() or 1, 4), len(miss)))
        per_pass = _files_per_pass(len(_read_bytes(paths[miss[0]])))
        chunks = [miss[k : k + per_pass] for k in range(0, len(miss), per_pass)]

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
            et_cache.store_many(paths, [t for t in out if t is not None])
    return [t for t in out if t is not None]


def write_trace(path: str | os.PathLike[str], trace: EtTrace, compress: bool = False) -> None:
    """Write ``trace`` as a Chakra ET file (gzip-compressed if ``compress``)."""
    from simcore.traces.chakra.encode import encode_trace

    data = encode_trace(trace)
    if compress:
        import gzip

        data = gzip.compress(data, compresslevel=6, mtime=0)
    Path(path).write_bytes(data)
