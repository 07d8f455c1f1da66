"""The breakdown's previous implementation, kept as the reference of the tests: a cover that
gathers column 0's rows and binary-searches every entry off them, the running end always by
``np.maximum.accumulate``. The current ``simcore.engine.breakdown`` must match it bit for bit.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

__all__ = ["exposed_by_kind", "exposed_on_padded", "exposed_stacked", "union_measure"]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]


def _union_pieces(starts: FloatArray, ends: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Disjoint pieces (lo, hi), each (n, B), whose union is that of the intervals; a piece
    may be empty (lo == hi). Sort by start, then clip each interval by the running end."""
    order = np.argsort(starts, axis=0, kind="stable")
    s = np.take_along_axis(starts, order, axis=0)
    e = np.take_along_axis(ends, order, axis=0)
    run = np.maximum.accumulate(e, axis=0)
    prev = np.concatenate([s[:1], run[:-1]], axis=0)
    lo = np.maximum(s, prev)
    return lo, np.maximum(lo, e)


def union_measure(starts: FloatArray, ends: FloatArray) -> FloatArray:
    """(B,) total length of the union of intervals ``[starts[i], ends[i]]``, each (n, B)."""
    if starts.shape[0] == 0:
        return np.zeros(starts.shape[1])
    lo, hi = _union_pieces(starts, ends)
    return np.asarray((hi - lo).sum(axis=0))


def _sorted_by_start(starts: FloatArray, ends: FloatArray, label: IntArray
                     ) -> tuple[FloatArray, FloatArray, IntArray]:
    """``starts`` / ``ends`` (n, B) sorted by start in every column (stable: equal starts keep
    their row order) and the label of each sorted row: (n,) when one order sorts every
    column, else (n, B).

    The first column's order is kept for every column where it is *the* stable order
    (each next start greater, or equal with a later row). The other columns, nearly sorted
    in that order (a few swapped neighbours), are re-sorted only over the window of rows
    where some neighbour pair is out of order; each re-sorted column is checked exactly
    over the window and its two boundary pairs (every other pair is unchanged), and a
    column that fails (equal starts out of row order, an entry that must leave the window)
    is sorted from scratch. Every column gets exactly its ``argsort(kind="stable")`` order.
    Rows whose first column is already in order (one in-order stream: the usual case) are
    returned as given, not copied, when every column is in order too.
    """
    if starts.shape[0] < 2:
        return starts, ends, label
    col0 = starts[:, 0]
    if bool((col0[1:] >= col0[:-1]).all()):  # the stable order of column 0: the rows as given
        ref = np.arange(starts.shape[0], dtype=np.int64)
        ahead = starts[1:] >= starts[:-1]  # each next row is later: equal starts are in order
        s, e = starts, ends
    else:
        ref = np.argsort(col0, kind="stable")
        s = starts.take(ref, axis=0)
        e = ends.take(ref, axis=0)
        ahead = _stable_pairs(s, ref[:, None])
    bad = np.flatnonzero(~ahead.all(axis=0))
    if bad.size == 0:
        return s, e, label[ref]
    if s is starts:  # re-sorted below: a copy of the caller's arrays
        s, e = starts.copy(), ends.copy()
    pairs = np.flatnonzero(~ahead[:, bad].all(axis=1))  # pair i: rows (i, i + 1)
    a, z = int(pairs[0]), int(pairs[-1]) + 2  # the window of rows a:z
    ws = s[a:z, bad]
    wo = np.argsort(ws, axis=0, kind="stable")
    order = ref[a:z][wo]  # source row of each window entry
    s[a:z, bad] = np.take_along_axis(ws, wo, axis=0)
    e[a:z, bad] = np.take_along_axis(e[a:z, bad], wo, axis=0)
    kinds = np.repeat(label[ref][:, None], s.shape[1], axis=1)
    kinds[a:z, bad] = label[order]
    lo, hi = max(a - 1, 0), min(z + 1, s.shape[0])  # the window and its boundary pairs
    rows = np.repeat(ref[:, None], bad.size, axis=1)[lo:hi]
    rows[a - lo:z - lo] = order
    fail = bad[~_stable_pairs(s[lo:hi, bad], rows).all(axis=0)]
    if fail.size:  # from scratch
        own = np.argsort(starts[:, fail], axis=0, kind="stable")
        s[:, fail] = np.take_along_axis(starts[:, fail], own, axis=0)
        e[:, fail] = np.take_along_axis(ends[:, fail], own, axis=0)
        kinds[:, fail] = label[own]
    return s, e, kinds


def _stable_pairs(s: FloatArray, rows: IntArray) -> NDArray[np.bool_]:
    """(n - 1, B) whether each neighbour pair of ``s`` (n, B), the starts of rows ``rows``
    ((n, 1) or (n, B)) in that order, is in stable-sort order: the next start greater, or
    equal with a later row."""
    ahead = s[1:] > s[:-1]
    ahead |= (s[1:] == s[:-1]) & (rows[1:] > rows[:-1])
    return ahead


class _Cover:
    """G(t) = |C n [0, t]| for C the union of disjoint intervals sorted by start (the same
    order in every column: an in-order stream), evaluated for (m, B) queries.

    Rows are padded with a first row (start -inf, end -inf, prefix 0) so "no interval at or
    before t" is row 0 and needs no mask, and a last row (start +inf) bounding the search.
    """

    def __init__(self, starts: FloatArray, ends: FloatArray) -> None:
        n, b = starts.shape
        padded_starts = np.empty((n + 2, b))
        padded_starts[1:-1] = starts
        padded_ends = np.empty((n + 1, b))
        padded_ends[1:] = ends
        self._set(padded_starts, padded_ends)

    @classmethod
    def padded(cls, starts: FloatArray, ends: FloatArray) -> _Cover:
        """The cover of the intervals in rows ``1:n+1`` of ``starts`` (n + 2, B) and rows
        ``1:`` of ``ends`` (n + 1, B), arrays it takes over (their padding rows are set here):
        no copy of the intervals."""
        cover = cls.__new__(cls)
        cover._set(starts, ends)
        return cover

    def _set(self, starts: FloatArray, ends: FloatArray) -> None:
        """Pad ``starts`` (n + 2, B) and ``ends`` (n + 1, B), the intervals in their inner
        rows, and sum the prefix lengths."""
        n, b = ends.shape[0] - 1, ends.shape[1]
        self.n, self.b = n, b
        starts[0] = -np.inf
        starts[-1] = np.inf
        ends[0] = -np.inf
        self.starts, self.ends = starts, ends
        self.prefix = np.zeros((n + 1, b))
        np.subtract(ends[1:], starts[1:-1], out=self.prefix[1:])
        np.cumsum(self.prefix[1:], axis=0, out=self.prefix[1:])

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
    """Exposed time of each comm kind against the compute-stream intervals.

    The union of all communication intervals is cut into disjoint pieces, each inside the
    interval that opened it (sorted by start); a piece's part outside the compute stream is
    charged to that interval's kind, so the kinds sum exactly to the exposed union.

    Args:
        comp_start, comp_end: (n, B) intervals of one in-order compute stream, in issue order.
        comm: kind -> (starts, ends), each (n_k, B), in any order.

    Returns:
        (kind -> (B,) exposed seconds; (B,) length of the union of all communication).
    """
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
    """:func:`exposed_by_kind` with the communication intervals already stacked: ``starts`` /
    ``ends`` (n >= 1, B), row ``i`` of kind ``names[label[i]]`` (every name present)."""
    out, lo, hi = _exposed_pieces(_Cover(comp_start, comp_end), starts, ends, label, names)
    return out, np.asarray((hi - lo).sum(axis=0))


def exposed_on_padded(comp_start: FloatArray, comp_end: FloatArray, starts: FloatArray,
                      ends: FloatArray, label: IntArray, names: list[str]
                      ) -> dict[str, FloatArray]:
    """The exposed seconds per kind of :func:`exposed_stacked` on compute intervals given in
    rows ``1:n+1`` of ``comp_start`` (n + 2, B) and rows ``1:`` of ``comp_end`` (n + 1, B):
    arrays it takes over, their padding rows overwritten (:meth:`_Cover.padded`; no copy)."""
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
