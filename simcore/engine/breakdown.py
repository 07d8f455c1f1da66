"""Where one GPU's iteration time goes: compute, exposed communication per kind, bubble.

For the representative GPU of a pipeline stage, with T the iteration time:

- ``compute`` = busy time of its compute stream with compute kernels;
- blocking collectives on the compute stream (TP without overlap, EP all-to-all) are
  exposed by construction: their durations count as exposed communication of their kind;
- communication on the other streams (DP, chunked TP, CP, pipeline sends into and out of the
  stage) is exposed where it is not covered by the compute stream: with C the union of the
  compute-stream intervals and U the union of the communication intervals, the exposed time
  is ``|U| - |U n C|``, charged to kinds piece by piece (each disjoint piece of U belongs to
  the interval that opened it);
- ``bubble`` = T - compute - exposed: the GPU idle with nothing of its own in flight, waiting
  for other pipeline stages (the pipeline bubble, as it comes out of the schedule).

Interval unions are measured per design point with a sort and a running maximum, vectorized
over the batch axis. The design points of a batch are hardware variants of one structure,
which mostly issue their intervals in the same order: one column's sort order and one
column's positions of the pieces among the compute intervals are checked on every column
(exact comparisons) and only the columns / entries where they do not hold are sorted (over
the window of rows out of order) or searched on their own: a column that misses often by one
sorted search of the column, a few entries from the neighbouring row, then by binary search.
The compute intervals of a stage's stream are sorted and disjoint in every column (the
stream runs in order), which the cover's search and prefix sums rely on; an in-order
communication stream's running end is its ends, not accumulated.
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

    #: a column where more than one query in this many misses the shared row is searched on
    #: its own (one ``searchsorted`` of its sorted queries)
    OWN_SEARCH_SHARE = 4

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

    def covered(self, t: FloatArray) -> FloatArray:
        """(m, B) G(t) for (m, B) times ``t``: with k the padded row of the last interval
        starting at or before t in its column, ``prefix[k] - max(end[k] - t, 0)``.

        Column 0's row (one ``searchsorted``) is gathered for every column and checked on
        every entry by exact comparisons (its start at or before t, the next start after t).
        A column that misses it often gets every row from a search of its own; the other
        misses try the neighbouring row on the side the check failed, then a binary search
        over the rest of their column. Every entry gets the row a search of its column finds.
        """
        if self.n == 0:
            return np.zeros_like(t)
        col0 = np.ascontiguousarray(self.starts[1:-1, 0])
        k = np.searchsorted(col0, t[:, 0], side="right")  # 0 = none (padded row)
        before = np.greater(self.starts.take(k, axis=0), t)  # row k starts after t
        miss = np.less_equal(self.starts.take(k + 1, axis=0), t)  # so does the next one
        miss |= before
        inside = self.ends.take(k, axis=0)
        g = self.prefix.take(k, axis=0)
        if miss.any():
            self._fix_misses(t, k, before, miss, inside, g)
        inside -= t
        np.maximum(inside, 0.0, out=inside)
        g -= inside
        return g

    def _fix_misses(self, t: FloatArray, k: IntArray, before: NDArray[np.bool_],
                    miss: NDArray[np.bool_], inside: FloatArray, g: FloatArray) -> None:
        """Set ``inside`` (end) and ``g`` (prefix) of the entries ``miss`` of (m, B) times
        ``t`` whose row is not the shared ``k`` (``before``: it lies below k) to their own
        row's. Only the columns with a miss are scanned for them."""
        cols = np.flatnonzero(miss.any(axis=0))
        sub = miss if cols.size == self.b else miss[:, cols]
        heavy = np.count_nonzero(sub, axis=0) * self.OWN_SEARCH_SHARE > t.shape[0]
        if heavy.any():
            alone = cols[heavy]
            flat = self._search_columns(t, alone) * self.b + alone
            inside[:, alone] = self.ends.ravel().take(flat)
            g[:, alone] = self.prefix.ravel().take(flat)
            if heavy.all():
                return
            cols, sub = cols[~heavy], sub[:, ~heavy]
        r, j = np.nonzero(sub)
        c = cols[j]
        own = self._search_near(t[r, c], c, k[r], before[r, c])
        inside[r, c] = self.ends[own, c]
        g[r, c] = self.prefix[own, c]

    def _search_columns(self, t: FloatArray, cols: IntArray) -> IntArray:
        """(m, len(cols)) padded rows of every time of ``t`` (m, B) in the columns ``cols``:
        one ``searchsorted`` of a column's sorted starts per column."""
        starts = np.ascontiguousarray(self.starts[1:-1, cols].T)
        times = np.ascontiguousarray(t[:, cols].T)
        out = np.empty((cols.size, t.shape[0]), dtype=np.int64)
        for j in range(cols.size):
            out[j] = np.searchsorted(starts[j], times[j], side="right")
        return out.T

    def _search_near(self, tq: FloatArray, c: IntArray, k: IntArray, before: NDArray[np.bool_]
                     ) -> IntArray:
        """Padded rows of the times ``tq`` in columns ``c``, whose row is not ``k``: below it
        where ``before`` (row k starts after t), else above. The neighbouring row first, then
        a binary search between it and the column's end on that side."""
        flat = self.starts.ravel()
        b = self.b
        near = np.where(before, k - 1, k + 1)
        hit = flat.take(near * b + c) <= tq
        hit &= flat.take((near + 1) * b + c) > tq
        far = np.flatnonzero(~hit)
        if far.size == 0:
            return near
        below = before[far]
        # the neighbour is on the wrong side: the rest of the column beyond it
        lo = np.where(below, 0, near[far] + 1)
        hi = np.where(below, near[far], self.n + 1)
        near[far] = self._bisect(tq[far], c[far], lo, hi)
        return near

    def _bisect(self, tq: FloatArray, c: IntArray, lo: IntArray, hi: IntArray) -> IntArray:
        """Padded rows of the times ``tq`` in columns ``c`` by binary search, given padded rows
        ``lo`` / ``hi`` with starts[lo] <= t < starts[hi]."""
        flat = self.starts.ravel()
        while True:
            open_ = hi - lo > 1
            if not open_.any():
                return lo
            mid = (lo + hi) // 2
            le = flat.take(mid * self.b + c) <= tq
            lo = np.where(open_ & le, mid, lo)
            hi = np.where(open_ & ~le, mid, hi)


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


def _running_end(e: FloatArray, out: FloatArray) -> FloatArray:
    """The running maximum of the ends ``e`` (n, B) down the rows: ``e`` itself where the
    ends never decrease (an in-order stream) and the first is positive, so that no end is a
    zero whose sign the maximum could pick; else ``np.maximum.accumulate`` into ``out``."""
    if bool((e[0] > 0.0).all()) and _ascending(e[:, 0]) and _ascending(e):
        return e
    return np.maximum.accumulate(e, axis=0, out=out)


def _ascending(x: FloatArray) -> bool:
    """Whether ``x`` never decreases down its rows (in every column); False with a NaN."""
    return bool((x[1:] >= x[:-1]).all())


def _exposed_pieces(cover: _Cover, starts: FloatArray, ends: FloatArray, label: IntArray,
                    names: list[str]) -> tuple[dict[str, FloatArray], FloatArray, FloatArray]:
    """(kind -> (B,) exposed seconds, the pieces' (n, B) lo and hi): the union of the
    communication intervals cut into disjoint pieces, each charged to the kind of the
    interval that opened it, less its part on the compute ``cover``."""
    s, e, kinds = _sorted_by_start(starts, ends, label)
    n, b = s.shape
    t = np.empty((2 * n, b))  # the pieces' (lo, hi), queried on the cover at once
    lo, hi = t[:n], t[n:]
    run = _running_end(e, out=hi)  # before hi is set
    lo[0] = s[0]
    np.maximum(s[1:], run[:-1], out=lo[1:])
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
