"""Chrome-trace (Perfetto) timeline of the representative ranks of one design point.

The Trace Event Format (``{"traceEvents": [...]}`` with complete events ``ph = "X"``, times in
microseconds) opens in ui.perfetto.dev and chrome://tracing. One process per pipeline stage
(the representative GPU of that stage), one thread per stream (compute, tp, cp, dp, a merged
communication stream, and the outgoing pipeline links; :mod:`simcore.ir.streams`). The schedule
is the one the fidelity evaluated: its graph (``cw``), its template durations and its overlap
slowdown, so the last event ends at the iteration time.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from simcore.engine.evaluate import CompiledWorkload, node_durations
from simcore.engine.schedule import run_schedule

__all__ = ["chrome_trace"]


def chrome_trace(cw: CompiledWorkload, tdur: NDArray[np.float64],
                 overlap_slowdown: NDArray[np.float64] | float | None = None) -> dict[str, Any]:
    """Trace events of one design point with template durations ``tdur`` (U,) or (U, 1), s,
    and the fractional compute slowdown beside communication (None: none)."""
    graph = cw.workload.graph
    tmpl = graph.attr("template").astype(np.int64)
    slow = None if overlap_slowdown is None else np.asarray(overlap_slowdown, dtype=np.float64)
    node_dur = node_durations(cw, np.asarray(tdur, dtype=np.float64), slow)
    times = run_schedule(cw.plan, node_dur)
    start_us = times.start[:, 0] * 1e6
    dur_us = node_dur * 1e6
    stage = graph.attr("stage").astype(np.int64)
    res = graph.res_idx[graph.res_ptr[:-1]]
    events: list[dict[str, Any]] = []
    for s in range(cw.workload.num_stages):
        events.append({"ph": "M", "name": "process_name", "pid": s, "tid": 0,
                       "args": {"name": f"stage {s} (representative GPU)"}})
    for tid, name in enumerate(graph.resource_names):
        pid = int(graph.stream_stage[tid])  # a link: its sender
        events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                       "args": {"name": name}})
    template_names = cw.ops.template_names
    for i in np.flatnonzero(dur_us > 0):
        events.append({
            "ph": "X", "name": template_names[int(tmpl[i])], "pid": int(stage[i]),
            "tid": int(res[i]), "ts": float(start_us[i]), "dur": float(dur_us[i]),
        })
    return {"traceEvents": events, "displayTimeUnit": "ms"}
