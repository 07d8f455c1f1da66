"""Where one GPU's iteration time goes: compute, exposed communication per kind, bubble.

For the representative GPU of a pipeline stage, with T the iteration time:

- ``compute`` = busy time of its compute stream with compute kernels;
- blocking collectives on the compute stream (TP without overlap, EP all-to-all) are
  exposed by construction: their durations count as exposed communication of their kind;
- communication on the other streams (DP, chunked TP, CP, pipeline sends into and out of the
  stage) is exposed where it is not covered by the compute stream: with C the union of the
  compute-stream intervals and U_k the union of kind k's intervals,
  ``exposed_k = |C u U_k| - |C|``; the kinds are scaled to sum to ``|C u U_all| - |C|``;
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


def union_measure(starts: FloatArray, ends: FloatArray) -> FloatArray:
    """(B,) total length of the union of intervals ``[starts[i], ends[i]]``, each (n, B)."""
    if starts.shape[0] == 0:
        return np.zeros(starts.shape[1])
    order = np.argsort(starts, axis=0, kind="stable")
    s = np.take_along_axis(starts, order, axis=0)
    e = np.take_along_axis(ends, order, axis=0)
    run = np.maximum.accumulate(e, axis=0)
    prev = np.concatenate([s[:1], run[:-1]], axis=0)
    covered = np.maximum(0.0, e - np.maximum(s, prev))
    return np.asarray(covered.sum(axis=0))


def exposed_by_kind(
    comp_start: FloatArray,
    comp_end: FloatArray,
    comm: dict[str, tuple[FloatArray, FloatArray]],
) -> dict[str, FloatArray]:
    """Exposed time of each comm kind against the compute-stream intervals (all (n, B))."""
    b = comp_start.shape[1]
    base = union_measure(comp_start, comp_end)
    raw: dict[str, FloatArray] = {}
    for kind, (s, e) in comm.items():
        if s.shape[0]:
            raw[kind] = union_measure(np.vstack([comp_start, s]), np.vstack([comp_end, e])) - base
    if not raw:
        return {}
    all_s = np.vstack([comp_start] + [comm[k][0] for k in raw])
    all_e = np.vstack([comp_end] + [comm[k][1] for k in raw])
    total = union_measure(all_s, all_e) - base
    summed = np.zeros(b)
    for v in raw.values():
        summed += v
    scale = np.divide(total, summed, out=np.zeros(b), where=summed > 0)
    return {k: v * scale for k, v in raw.items()}
