"""Per-file cache of decoded Chakra ET traces (in memory and on disk).

A decoded :class:`EtTrace` is stored under ``$SIMSWEEP_CACHE_DIR`` (default
``~/.cache/simsweep/et``; ``SIMSWEEP_CACHE_DIR=off`` disables the disk cache) as one file:
a JSON header, then the *core* arrays (ids, types, times, dependencies, attribute columns),
each in the smallest integer type that holds it. The *bulk* (names, IOInfo, attributes in long
form, metadata) is not cached: when first asked for, it is decoded again from the trace file.
The key is the size and a BLAKE2b-128 hash of the file's bytes (never its path or mtime: ``cp -p``,
``rsync -t`` or ``tar`` can replace a file keeping both), and the header repeats it, so a changed
file is a miss. A cache file that cannot be read is a miss; one that cannot be written
is skipped silently. The traces of a whole workload (``read_traces``) are stored together in one
*bundle* file keyed by all their content keys: creating a file costs ~1 ms on this
machine's disk, more than decoding a small trace, so 256 per-rank files were 0.3 s of a cold run.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from simcore.traces.chakra.trace import EtBulk, EtTrace, StrColumn

__all__ = ["cache_dir", "clear_memory", "content_key", "load", "load_many", "load_memory", "store", "store_many"]

_MAGIC = b"SSETC004"  # bump whenever the decoded content or layout changes
_BUNDLE_MAGIC = b"SSETB002"  # many traces in one file: count, offsets, then one blob per trace
_MEMORY: dict[str, tuple[tuple[int, str], EtTrace, int]] = {}
_MEMORY_MAX_BYTES = 1 << 30  # traces kept in this process, oldest dropped first
_memory_bytes = [0]


def cache_dir() -> Path | None:
    """The disk cache folder (None if disabled)."""
    env = os.environ.get("SIMSWEEP_CACHE_DIR")
    if env is not None:
        return None if env.lower() in {"", "0", "off", "none"} else Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "simsweep" / "et"


def clear_memory() -> None:
    """Forget the traces cached in this process."""
    _MEMORY.clear()
    _memory_bytes[0] = 0


def content_key(path: str | os.PathLike[str]) -> tuple[int, str]:
    """(size, BLAKE2b-128 hex digest) of the bytes of ``path``: the key of its content."""
    h = hashlib.blake2b(digest_size=16)
    size = 0
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 22):
            h.update(chunk)
            size += len(chunk)
    return size, h.hexdigest()


def _stamp(path: str) -> tuple[str, tuple[int, str]]:
    """The real path and the content key (:func:`content_key`) of ``path``."""
    return os.path.realpath(path), content_key(path)


def _cache_file(real: str, stamp: tuple[int, str]) -> Path | None:
    folder = cache_dir()
    if folder is None:
        return None
    return folder / f"{stamp[1]}-{stamp[0]}.etc"


def load_memory(path: str) -> EtTrace | None:
    """The trace of ``path`` cached in this process if it is still current, else None."""
    real, stamp = _stamp(path)
    hit = _MEMORY.get(real)
    return hit[1] if hit is not None and hit[0] == stamp else None


def load(path: str) -> EtTrace | None:
    """The cached trace of ``path`` if it is still current, else None."""
    real, stamp = _stamp(path)
    hit = _MEMORY.get(real)
    if hit is not None and hit[0] == stamp:
        return hit[1]
    file = _cache_file(real, stamp)
    if file is None or not file.exists():
        return None
    try:
        trace = _read(file, real, stamp, path)
    except (OSError, ValueError, KeyError, TypeError, struct.error):
        return None
    if trace is not None:
        _remember(real, stamp, trace)
    return trace


def store(path: str, trace: EtTrace) -> None:
    """Cache ``trace`` as the decoded content of ``path``."""
    real, stamp = _stamp(path)
    _remember(real, stamp, trace)
    file = _cache_file(real, stamp)
    if file is None:
        return
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
        blob = _serialize(trace, real, stamp)
        fd, tmp = tempfile.mkstemp(dir=file.parent, suffix=".tmp")
        with os.fdopen(fd, "wb") as fh:
            fh.write(blob)
        os.replace(tmp, file)
    except OSError:
        return


def _bundle_file(keys: list[tuple[str, tuple[int, str]]]) -> Path | None:
    folder = cache_dir()
    if folder is None:
        return None
    text = "\n".join(f"{size}\0{digest}" for _, (size, digest) in keys)
    return folder / f"{hashlib.sha1(text.encode()).hexdigest()[:24]}.etb"


def load_many(paths: list[str]) -> list[EtTrace] | None:
    """The cached traces of all ``paths``, stored together by :func:`store_many`, or None.

    One file read instead of one per trace (a workload of thousands of small per-rank traces
    is read by a fresh process in one system call). Each trace is also remembered in memory.
    """
    keys = [_stamp(p) for p in paths]
    file = _bundle_file(keys)
    if file is None or not file.exists():
        return None
    try:
        data = memoryview(file.read_bytes())
        if bytes(data[:8]) != _BUNDLE_MAGIC:
            return None
        (count,) = struct.unpack("<Q", data[8:16])
        if count != len(paths):
            return None
        bounds = struct.unpack(f"<{count + 1}Q", data[16 : 16 + 8 * (count + 1)])
        out: list[EtTrace] = []
        for k, (p, (real, stamp)) in enumerate(zip(paths, keys, strict=True)):
            trace = _parse(data[bounds[k] : bounds[k + 1]], real, stamp, p)
            if trace is None:
                return None
            out.append(trace)
    except (OSError, ValueError, KeyError, TypeError, struct.error):
        return None
    for (real, stamp), trace in zip(keys, out, strict=True):
        _remember(real, stamp, trace)
    return out


def store_many(paths: list[str], traces: list[EtTrace]) -> None:
    """Cache ``traces`` (the decoded contents of ``paths``) in memory and together in one file."""
    keys = [_stamp(p) for p in paths]
    for (real, stamp), trace in zip(keys, traces, strict=True):
        _remember(real, stamp, trace)
    file = _bundle_file(keys)
    if file is None:
        return
    head = 16 + 8 * (len(traces) + 1)
    bounds = [head]
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=file.parent, suffix=".tmp")
        with os.fdopen(fd, "wb") as fh:  # blobs streamed (one in memory at a time), offsets last
            fh.write(bytes(head))
            for trace, (real, stamp) in zip(traces, keys, strict=True):
                blob = _serialize(trace, real, stamp)
                fh.write(blob)
                bounds.append(bounds[-1] + len(blob))
            fh.seek(0)
            fh.write(_BUNDLE_MAGIC + struct.pack(f"<{len(bounds) + 1}Q", len(traces), *bounds))
        os.replace(tmp, file)
    except OSError:
        return


def _remember(real: str, stamp: tuple[int, str], trace: EtTrace) -> None:
    size = _footprint(trace)
    old = _MEMORY.pop(real, None)
    if old is not None:
        _memory_bytes[0] -= old[2]
    while _MEMORY and _memory_bytes[0] + size > _MEMORY_MAX_BYTES:
        _memory_bytes[0] -= _MEMORY.pop(next(iter(_MEMORY)))[2]
    _MEMORY[real] = (stamp, trace, size)
    _memory_bytes[0] += size


def _footprint(trace: EtTrace) -> int:
    """Bytes a trace holds: its arrays, and its part of the decoded buffer if it keeps one.

    Traces decoded in one pass share the buffer of all its files; each is charged the span
    its own nodes cover (about its file's size), so the pass's buffer is counted about once.
    """
    arrays: list[NDArray[Any]] = [trace.ids, trace.types, trace.start_time_micros,
                                  trace.duration_micros, trace.data_ptr, trace.data_deps,
                                  trace.ctrl_ptr, trace.ctrl_deps]
    for values, present in trace.ints.values():
        arrays += [values, present]
    size = sum(int(a.nbytes) for a in arrays)
    bulk = trace._bulk
    if isinstance(bulk, EtBulk):
        names = bulk.names
        if names.start.size:
            size += int(names.end.max()) - int(names.start.min())
    return size


def _serialize(trace: EtTrace, real: str, stamp: tuple[int, str]) -> bytes:
    core: dict[str, NDArray[Any]] = {
        "ids": trace.ids, "types": trace.types, "start": trace.start_time_micros,
        "dur": trace.duration_micros, "data_ptr": trace.data_ptr, "data": trace.data_deps,
        "ctrl_ptr": trace.ctrl_ptr, "ctrl": trace.ctrl_deps,
    }
    for name, (values, present) in trace.ints.items():
        core[f"int.{name}.v"] = values
        core[f"int.{name}.p"] = present
    for name, col in trace.strs.items():
        core[f"str.{name}"] = col.codes
    for name, (lptr, lvalues) in trace.lists.items():
        core[f"list.{name}.ptr"] = lptr
        core[f"list.{name}.v"] = lvalues
    header: dict[str, Any] = {
        "real": real, "stamp": list(stamp), "path": trace.path, "version": trace.version,
        "ints": list(trace.ints), "strs": {k: list(c.categories) for k, c in trace.strs.items()},
        "lists": list(trace.lists),
    }
    chunks: list[bytes] = []
    offset = 0
    entries = []
    for key, arr in core.items():
        small = _narrow(arr)
        raw = np.ascontiguousarray(small).tobytes()
        entries.append([key, small.dtype.str, arr.dtype.str, offset, len(raw)])
        pad = (-len(raw)) % 8
        chunks.append(raw + bytes(pad))
        offset += len(raw) + pad
    header["core"] = entries
    header["core_end"] = offset
    head = json.dumps(header).encode()
    head += b" " * ((-len(head)) % 8)
    return _MAGIC + struct.pack("<Q", len(head)) + head + b"".join(chunks)


_NARROW = [(np.dtype(dt), int(np.iinfo(dt).min), int(np.iinfo(dt).max))
           for dt in (np.int8, np.int16, np.int32, np.uint32)]


def _narrow(arr: NDArray[Any]) -> NDArray[Any]:
    """The same integers in the smallest of int8/int16/int32/uint32 that holds them."""
    if arr.dtype.kind not in "iu" or arr.size == 0 or arr.dtype.itemsize <= 1:
        return arr
    lo, hi = int(arr.min()), int(arr.max())
    for dt, dt_min, dt_max in _NARROW:
        if dt_min <= lo and hi <= dt_max and dt.itemsize < arr.dtype.itemsize:
            return arr.astype(dt)
    return arr


def _arrays(data: bytes | memoryview, entries: list[list[Any]]) -> dict[str, NDArray[Any]]:
    out: dict[str, NDArray[Any]] = {}
    for key, stored, dt, off, nbytes in entries:
        size = np.dtype(stored).itemsize
        arr = np.frombuffer(data, dtype=np.dtype(stored), count=nbytes // size, offset=off)
        out[key] = arr if stored == dt else arr.astype(dt)
    return out


def _read(file: Path, real: str, stamp: tuple[int, str], path: str) -> EtTrace | None:
    with open(file, "rb") as fh:
        if fh.read(8) != _MAGIC:
            return None
        (head_len,) = struct.unpack("<Q", fh.read(8))
        header = json.loads(fh.read(head_len))
        if tuple(header["stamp"]) != stamp:
            return None
        core = _arrays(fh.read(header["core_end"]), header["core"])
    return _trace(header, core, path)


def _parse(blob: memoryview, real: str, stamp: tuple[int, str], path: str) -> EtTrace | None:
    """The trace serialized in ``blob`` (one :func:`_serialize` output), if it is ``real``'s."""
    if bytes(blob[:8]) != _MAGIC:
        return None
    (head_len,) = struct.unpack("<Q", blob[8:16])
    header = json.loads(bytes(blob[16 : 16 + head_len]))
    if tuple(header["stamp"]) != stamp:
        return None
    return _trace(header, _arrays(blob[16 + head_len :], header["core"]), path)


def _trace(header: dict[str, Any], core: dict[str, NDArray[Any]], path: str) -> EtTrace:

    def load_bulk() -> EtBulk:
        from simcore.traces.chakra.decode import decode_trace, decompress

        with open(path, "rb") as fh:
            return decode_trace(decompress(fh.read(), path), path, check_deps=False).bulk

    ints = {k: (core[f"int.{k}.v"], core[f"int.{k}.p"]) for k in header["ints"]}
    strs = {k: StrColumn(core[f"str.{k}"], tuple(c)) for k, c in header["strs"].items()}
    lists = {k: (core[f"list.{k}.ptr"], core[f"list.{k}.v"]) for k in header["lists"]}
    return EtTrace(
        path=path, version=header["version"], ids=core["ids"], types=core["types"],
        start_time_micros=core["start"], duration_micros=core["dur"],
        data_ptr=core["data_ptr"], data_deps=core["data"], ctrl_ptr=core["ctrl_ptr"],
        ctrl_deps=core["ctrl"], ints=ints, strs=strs, lists=lists, _bulk=load_bulk,
    )
