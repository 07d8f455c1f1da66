"""Disk cache of a workload read by templates and patches (:mod:`simcore.traces.chakra.patch`).

One file per workload under :func:`simcore.traces.chakra.cache.cache_dir`, named by a BLAKE2b
hash of every rank file's bytes as read (compressed or not; never paths or mtimes, see
:mod:`simcore.traces.chakra.cache`): the fully decoded traces (templates and files decoded in
full, in the per-trace format of that module) and the patch tables. A second run of the same
files then skips inflating, comparing and decoding. A file that cannot be read or is of another
version is a miss; one that cannot be written is skipped.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import tempfile
from typing import Any

import numpy as np
from numpy.typing import NDArray

from simcore.traces.chakra import cache as et_cache
from simcore.traces.chakra.patch import PatchBatch, RankTraces, Template
from simcore.traces.chakra.trace import EtTrace

__all__ = ["Key", "load", "store"]

_MAGIC = b"SSETP001"  # bump whenever the layout or the meaning of a patch changes


class Key:
    """The content key of a workload's files, fed one file at a time in rank order."""

    def __init__(self) -> None:
        self._h = hashlib.blake2b(_MAGIC, digest_size=20)

    def add(self, raw: bytes) -> None:
        """Add the next file's bytes (as read)."""
        self._h.update(struct.pack("<Q", len(raw)))
        self._h.update(raw)

    def hex(self) -> str:
        """The key so far."""
        return self._h.hexdigest()


def _file(key: str) -> Any:
    folder = et_cache.cache_dir()
    return None if folder is None else folder / f"{key}.etp"


def store(key: str, traces: RankTraces) -> None:
    """Write ``traces`` under ``key``, as just read (before any patched trace is built)."""
    file = _file(key)
    if file is None:
        return
    arrays: list[NDArray[Any]] = []

    def put(arr: NDArray[Any]) -> int:
        arrays.append(np.ascontiguousarray(arr))
        return len(arrays) - 1

    templates: dict[int, int] = {}
    head_templates: list[dict[str, Any]] = []
    head_batches: list[dict[str, Any]] = []
    for batch in traces.batches:
        t = batch.template
        if id(t) not in templates:
            templates[id(t)] = len(head_templates)
            head_templates.append({
                "rank": t.rank,
                "int_owner": {k: put(v) for k, v in t.int_owner.items()},
                "str_owner": {k: put(v) for k, v in t.str_owner.items()},
            })
        head_batches.append({
            "template": templates[id(t)], "ranks": put(batch.ranks),
            "ints": {k: put(v) for k, v in batch.ints.items()},
            "strs": {k: [put(c), put(col)] for k, (c, col) in batch.strs.items()},
            "categories": list(batch.categories),
        })
    decoded = sorted(traces.decoded)  # as just read: the templates and the files decoded in full
    blobs = [et_cache._serialize(traces.decoded[r], "", (0, key)) for r in decoded]
    index, offset = [], 0
    for arr in arrays:
        raw = arr.tobytes()
        index.append([arr.dtype.str, list(arr.shape), offset, len(raw)])
        offset += len(raw) + (-len(raw)) % 8
    header = json.dumps({"key": key, "ranks": len(traces), "templates": head_templates, "batches": head_batches,
                         "decoded": decoded, "blobs": [len(b) for b in blobs], "arrays": index}).encode()
    header += b" " * ((-len(header)) % 8)
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=file.parent, suffix=".tmp")
        with os.fdopen(fd, "wb") as fh:
            fh.write(_MAGIC + struct.pack("<Q", len(header)) + header)
            for arr in arrays:
                raw = arr.tobytes()
                fh.write(raw + bytes((-len(raw)) % 8))
            for blob in blobs:
                fh.write(blob + bytes((-len(blob)) % 8))
        os.replace(tmp, file)
    except OSError:
        return


def load(key: str, paths: list[str]) -> RankTraces | None:
    """The workload stored under ``key`` (its files are ``paths``), or None."""
    file = _file(key)
    if file is None or not file.exists():
        return None
    try:
        data = memoryview(file.read_bytes())
        if bytes(data[:8]) != _MAGIC:
            return None
        (head_len,) = struct.unpack("<Q", data[8:16])
        header = json.loads(bytes(data[16 : 16 + head_len]))
        if header["key"] != key or header["ranks"] != len(paths):
            return None
        at = 16 + head_len
        arrays = [np.frombuffer(data, dtype=np.dtype(dt), count=int(np.prod(shape)), offset=at + off).reshape(shape)
                  for dt, shape, off, _ in header["arrays"]]
        at += sum(n + (-n) % 8 for *_, n in header["arrays"])
        decoded: dict[int, EtTrace] = {}
        for r, size in zip(header["decoded"], header["blobs"], strict=True):
            trace = et_cache._parse(data[at : at + size], "", (0, key), paths[r])
            if trace is None:
                return None
            decoded[r] = trace
            at += size + (-size) % 8
        empty8 = np.zeros(0, dtype=np.uint8)
        empty64 = np.zeros(0, dtype=np.uint64)
        templates = [Template(
            t["rank"], decoded[t["rank"]], empty8, empty8,
            {k: arrays[v] for k, v in t["int_owner"].items()}, {}, {},
            {k: arrays[v] for k, v in t["str_owner"].items()}, {}, {}, {}, empty64, empty64,
        ) for t in header["templates"]]
        batches = [PatchBatch(
            templates[b["template"]], arrays[b["ranks"]], {k: arrays[v] for k, v in b["ints"].items()},
            {k: (arrays[c], arrays[col]) for k, (c, col) in b["strs"].items()}, tuple(b["categories"]),
        ) for b in header["batches"]]
    except (OSError, ValueError, KeyError, TypeError, IndexError, struct.error):
        return None
    return RankTraces(paths, decoded, batches)
