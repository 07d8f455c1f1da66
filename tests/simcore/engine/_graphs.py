"""Shared inputs of the engine tests: random DAGs, the straightforward level loop they are
checked against, and a small transformer with plans covering the schedule's shapes."""

from __future__ import annotations

import numpy as np

from simcore import GraphBuilder, NodeKind, compile_plan
from simcore.engine.schedule import SchedulePlan, _segment_ends
from simcore.specs.parallel import ParallelSpec
from simcore.workloads.transformer.spec import ModelSpec

MODEL = ModelSpec(name="m", num_layers=12, hidden_size=1024, num_heads=16, seq_len=1024,
                  vocab_size=8192)
PLANS = [ParallelSpec(tp=2, pp=4, global_batch=32, zero_stage=1),
         ParallelSpec(tp=2, pp=4, vp=3, global_batch=32, recompute="full"),
         ParallelSpec(tp=2, pp=2, global_batch=16, zero_stage=3, dp_overlap=False),
         ParallelSpec(tp=2, cp=2, pp=2, global_batch=16, sequence_parallel=True)]


def reference_starts(plan: SchedulePlan, seg_dur: np.ndarray) -> np.ndarray:
    """Chain starts by the straightforward level loop (gather + maximum.reduceat over
    ``plan.levels``)."""
    seg_end = _segment_ends(plan, seg_dur)
    start = np.zeros((plan.num_chains, seg_dur.shape[1]))
    for level in plan.levels:
        if level.pred_segs.size:
            t = start[level.pred_chains] + seg_end[level.pred_segs]
            start[level.chains] = np.maximum.reduceat(t, level.seg, axis=0)
    return start


def random_graph(seed: int, n: int, streams: int, max_deps: int) -> GraphBuilder:
    """``n`` compute nodes on 1-2 of ``streams`` streams, each waiting on up to ``max_deps``
    earlier nodes."""
    rng = np.random.default_rng(seed)
    b = GraphBuilder()
    ids: list[int] = []
    for _ in range(n):
        k = int(rng.integers(0, max_deps + 1)) if ids else 0
        deps = [int(d) for d in rng.choice(ids, size=min(k, len(ids)), replace=False)] if k else []
        res = [f"s{int(r)}" for r in rng.choice(streams, size=int(rng.integers(1, 3)),
                                                 replace=False)]
        ids.append(b.add(NodeKind.COMPUTE, resources=res, deps=deps))
    return b


def random_plan(seed: int, n: int, streams: int, max_deps: int) -> SchedulePlan:
    """The compiled plan of :func:`random_graph`."""
    return compile_plan(random_graph(seed, n, streams, max_deps).build())
