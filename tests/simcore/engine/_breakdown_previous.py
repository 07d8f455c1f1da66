"""The breakdown's previous cover and pieces, kept as the reference of the tests: a cover that
gathers column 0's rows and binary-searches every entry off them, the running end always by
``np.maximum.accumulate``. The current ``simcore.engine.breakdown`` must match it bit for bit.
The sort of the intervals did not change: it is the module's own (imported).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from simcore.engine import breakdown
from simcore.engine.breakdown import _sorted_by_start

__all__ = ["exposed_by_kind", "exposed_on_padded", "exposed_stacked"]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]


class _Cover(breakdown._Cover):
    """The cover's previous lookup (padding and prefix sums as the module's :class:`_Cover`):
    column 0's row for every column, a binary search for every entry where it misses."""

    def rows(self, t: FloatArray) -> tuple[IntArray, IntArray, IntArray]:
        """Padded row of the last interval starting at or before each of the (m, B) times
        ``t`` in its column: ((m,) row shared by the columns where it holds; the entries
        (r, c) where it does not hold, and their own rows), by exact comparisons."""
        col0 = np.ascontiguousarray(self.starts[1:-1, 0])
        k = np.searchsorted(col0, t[:, 0], side="right")  # 0 = none (padded row)
        ok = self.starts.take(k, axis=0) <= t
        ok &= self.starts.take(k + 1, axis=0) > t
        r, c = np.nonzero(~ok)
        if r.size == 0:
            return k, r, r
        # the others: a binary search per entry, over the padded column
        tq = t[r, c]
        lo = np.zeros(r.size, dtype=np.int64)
        hi = np.full(r.size, self.n + 1, dtype=np.int64)
        flat = self.starts.ravel()
        while True:
            open_ = hi - lo > 1
            if not open_.any():
                break
            mid = (lo + hi) // 2
            le = flat.take(mid * self.b + c) <= tq
            lo = np.where(open_ & le, mid, lo)
            hi = np.where(open_ & ~le, mid, hi)
        return k, np.stack([r, c]), lo

    def covered(self, t: FloatArray) -> FloatArray:
        """(m, B) G(t) for (m, B) times ``t``."""
        if self.n == 0:
            return np.zeros_like(t)
        k, rc, own = self.rows(t)
        inside = self.ends.take(k, axis=0)
        g = self.prefix.take(k, axis=0)
        if own.size:
            r, c = rc
            inside[r, c] = self.ends[own, c]
            g[r, c] = self.prefix[own, c]
        inside -= t
        np.maximum(inside, 0.0, out=inside)
        g -= inside
        return g


def exposed_by_kind(
    comp_start: FloatArray,
    comp_end: FloatArray,
    comm: dict[str, tuple[FloatArray, FloatArray]],
) -> tuple[dict[str, FloatArray], FloatArray]:
    """:func:`simcore.engine.breakdown.exposed_by_kind` on the previous cover and pieces."""
    b = comp_start.shape[1]
    present = [k for k, (st, _) in comm.items() if st.shape[0]]
    if not present:
        return {}, np.zeros(b)
    starts = np.vstack([comm[k][0] for k in present])
    ends = np.vstack([comm[k][1] for k in present])
    label = np.repeat(np.arange(len(present)), [comm[k][0].shape[0] for k in present])
    return exposed_stacked(comp_start, comp_end, starts, ends, label, present)


def exposed_stacked(comp_start: FloatArray, comp_end: FloatArray, starts: FloatArray,
                    ends: FloatArray, label: IntArray, names: list[str]
                    ) -> tuple[dict[str, FloatArray], FloatArray]:
    """:func:`simcore.engine.breakdown.exposed_stacked` on the previous cover and pieces."""
    out, lo, hi = _exposed_pieces(_Cover(comp_start, comp_end), starts, ends, label, names)
    return out, np.asarray((hi - lo).sum(axis=0))


def exposed_on_padded(comp_start: FloatArray, comp_end: FloatArray, starts: FloatArray,
                      ends: FloatArray, label: IntArray, names: list[str]
                      ) -> dict[str, FloatArray]:
    """:func:`simcore.engine.breakdown.exposed_on_padded` on the previous cover and pieces."""
    return _exposed_pieces(_Cover.padded(comp_start, comp_end), starts, ends, label, names)[0]


def _exposed_pieces(cover: _Cover, starts: FloatArray, ends: FloatArray, label: IntArray,
                    names: list[str]) -> tuple[dict[str, FloatArray], FloatArray, FloatArray]:
    """(kind -> (B,) exposed seconds, the pieces' (n, B) lo and hi): the union of the
    communication intervals cut into disjoint pieces, each charged to the kind of the
    interval that opened it, less its part on the compute ``cover``."""
    s, e, kinds = _sorted_by_start(starts, ends, label)
    n, b = s.shape
    t = np.empty((2 * n, b))  # the pieces' (lo, hi), queried on the cover at once
    lo, hi = t[:n], t[n:]
    np.maximum.accumulate(e, axis=0, out=hi)  # the running end, before hi is set
    lo[0] = s[0]
    np.maximum(s[1:], hi[:-1], out=lo[1:])
    np.maximum(lo, e, out=hi)
    g = cover.covered(t)
    covered = np.subtract(g[n:], g[:n], out=g[n:])
    outside = np.subtract(hi, lo)
    outside -= covered
    if kinds.ndim == 1 and len(names) == 1:  # one kind: np.where would select every row
        return {names[0]: np.asarray(outside.sum(axis=0))}, lo, hi
    if kinds.ndim == 1:
        kinds = kinds[:, None]
    out = {k: np.where(kinds == i, outside, 0.0).sum(axis=0) for i, k in enumerate(names)}
    return out, lo, hi
