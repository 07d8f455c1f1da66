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
over the batch axis.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

__all__ = ["union_measure"]

FloatArray = NDArray[np.float64]


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


class _Cover:
    """G(t) = |C n [0, t]| for C the union of disjoint intervals sorted by start (the same
    order in every column: an in-order stream), evaluated for (m, B) queries with one
    ``searchsorted`` over all columns (each column shifted by its own offset)."""

    def __init__(self, starts: FloatArray, ends: FloatArray) -> None:
        n, b = starts.shape
        self.n, self.b = n, b
        span = float(max(np.abs(ends).max(), np.abs(starts).max())) if n else 0.0
        self.offset = np.arange(b, dtype=np.float64)[:, None] * (2.0 * span + 1.0)
        self.flat = (starts.T + self.offset).ravel()
        self.ends = np.ascontiguousarray(ends.T)
        self.prefix = np.cumsum(self.ends - starts.T, axis=1)

    def covered(self, t: FloatArray) -> FloatArray:
        """(m, B) G(t) for (m, B) times ``t``."""
        if self.n == 0:
            return np.zeros_like(t)
        m = t.shape[0]
        tt = np.ascontiguousarray(t.T)  # (B, m): one row of queries per column
        q = tt + self.offset
        j = np.searchsorted(self.flat, q.ravel(), side="right")  # flat index + 1
        base = (np.arange(self.b) * self.n).repeat(m)  # first flat index of each column
        has = j > base
        j -= 1
        np.maximum(j, base, out=j)  # flat index of the last interval starting at or before t
        inside = self.ends.ravel().take(j)
        inside -= tt.ravel()
        np.maximum(inside, 0.0, out=inside)
        g = self.prefix.ravel().take(j)
        g -= inside
        np.putmask(g, ~has, 0.0)
        return np.asarray(g.reshape(self.b, m).T)


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
    order = np.argsort(starts, axis=0, kind="stable")
    s = np.take_along_axis(starts, order, axis=0)
    e = np.take_along_axis(ends, order, axis=0)
    run = np.maximum.accumulate(e, axis=0)
    lo = np.maximum(s, np.concatenate([s[:1], run[:-1]], axis=0))
    hi = np.maximum(lo, e)
    g = _Cover(comp_start, comp_end).covered(np.vstack([lo, hi]))
    n = lo.shape[0]
    outside = (hi - lo) - (g[n:] - g[:n])
    kinds = label[order]
    out = {k: np.where(kinds == i, outside, 0.0).sum(axis=0) for i, k in enumerate(present)}
    return out, np.asarray((hi - lo).sum(axis=0))
