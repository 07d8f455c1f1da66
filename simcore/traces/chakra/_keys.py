"""Codes of many short byte strings (attribute names, string values) without a Python loop.

Strings of up to 16 bytes are keyed exactly by two unaligned 8-byte loads masked to their
length; the keys are grouped by peeling off one distinct key at a time (few distinct values,
the case of attribute names and communicator names) or, past a limit, by ``np.unique``.
Longer strings get a key of their own and are merged by value afterwards.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from simcore.ir.intsets import unique_sorted
from simcore.traces.chakra._wire import u64_view

__all__ = ["categorize", "distinct"]


def distinct(values: NDArray[np.integer]) -> NDArray[np.integer]:
    """The sorted distinct values, like ``np.unique(values)``.

    ``np.unique`` without index outputs imports ``numpy.ma`` on its first call (numpy 2.x checks
    for masked arrays), ~40 ms of a fresh process that reads traces.
    """
    return unique_sorted(np.ravel(values))


def categorize(
    buf: NDArray[np.uint8], start: NDArray[np.int64], end: NDArray[np.int64]
) -> tuple[NDArray[np.int32], tuple[str, ...]]:
    """Codes of the byte strings ``buf[start:end]`` into their distinct values (first-seen order).

    Strings of up to 16 bytes are keyed exactly by two unaligned 8-byte loads; longer ones
    (rare attribute names) are looked up one by one.
    """
    n = start.shape[0]
    codes = np.zeros(n, dtype=np.int32)
    if n == 0:
        return codes, ()
    u64 = u64_view(buf)
    length = end - start
    short = length <= 16
    ln = np.minimum(length, 16).astype(np.uint64)
    lo_bits = np.minimum(ln, np.uint64(8)) * np.uint64(8)
    hi_bits = (ln - np.minimum(ln, np.uint64(8))) * np.uint64(8)
    full = np.uint64(0xFFFFFFFFFFFFFFFF)
    lo_mask = np.where(lo_bits == 64, full, (np.uint64(1) << (lo_bits & np.uint64(63))) - np.uint64(1))
    hi_mask = np.where(hi_bits == 64, full, (np.uint64(1) << (hi_bits & np.uint64(63))) - np.uint64(1))
    k1 = u64[start] & lo_mask
    k2 = u64[np.minimum(start + 8, u64.shape[0] - 1)] & hi_mask
    key = np.stack([k1, k2, length.astype(np.uint64)], axis=1)
    key[~short, 2] = np.uint64(1 << 62) + np.arange(int((~short).sum()), dtype=np.uint64)
    mix = k1 ^ (k2 * np.uint64(0x9E3779B97F4A7C15)) ^ (key[:, 2] * np.uint64(0xC2B2AE3D27D4EB4F))
    first = _peel_distinct(mix, codes)
    if first is None or not (key == key[first[codes]]).all():
        _, first, inverse = np.unique(key, axis=0, return_index=True, return_inverse=True)
        codes[:] = inverse.reshape(-1)
    values: list[bytes] = [buf[start[i] : end[i]].tobytes() for i in first]
    # merge long strings that are equal, and order categories by first appearance
    distinct: dict[bytes, int] = {}
    remap = np.empty(len(values), dtype=np.int32)
    for order in np.argsort(first, kind="stable"):
        remap[order] = distinct.setdefault(values[order], len(distinct))
    codes[:] = remap[codes]
    names = tuple(v.decode("utf-8", errors="replace") for v in distinct)
    return codes, names


def _peel_distinct(
    key: NDArray[np.uint64], codes: NDArray[np.int32], limit: int = 48
) -> NDArray[np.int64] | None:
    """Assign codes by peeling off one distinct key at a time (fast when there are few).

    Returns the first row of each code, or None if there are more than ``limit`` distinct keys.
    """
    rest = np.arange(key.shape[0], dtype=np.int64)
    firsts: list[int] = []
    while rest.size:
        if len(firsts) == limit:
            return None
        same = key[rest] == key[rest[0]]
        codes[rest[same]] = len(firsts)
        firsts.append(int(rest[0]))
        rest = rest[~same]
    return np.array(firsts, dtype=np.int64)
