"""Benchmark of the vectorized engine on a synthetic 1,024-rank workload.

Workload: 1,024 ranks x ``STEPS`` steps; every step each rank computes, then its TP group of 8
all-reduces (a rendezvous node on the 8 members' comm streams); every other step a DP group of
128 ranks (stride 8) reduces gradients on a separate stream. ~10k nodes, no symmetry reduction
(every rank is simulated), random durations per design point.

Reports, for B = 1, 64, 1,024 design points per batch: median wall time of ``run_schedule``
(per-node times, (N, B)) and of ``run_chains`` (chain-level times only), time per design point,
the speed-up per point over B = 1 and the peak traced memory. A pure-Python event loop over the
same graph (one point at a time) is the baseline. Usage: ``python scripts/bench_engine.py``.
"""

from __future__ import annotations

import time
import tracemalloc
from collections.abc import Callable
from functools import partial

import numpy as np
from _bench_util import median_s

from simcore import GraphBuilder, NodeKind, compile_plan, run_schedule
from simcore.engine.schedule import SchedulePlan, run_chains
from simcore.ir.graph import Graph

RANKS, TP, STEPS, MICRO = 1024, 8, 8, 4


def synthetic_graph() -> Graph:
    """The 1,024-rank workload described in the module docstring."""
    b = GraphBuilder("bench")
    last: list[int | None] = [None] * RANKS
    for step in range(STEPS):
        comp = [b.add(NodeKind.COMPUTE, resources=[f"r{r}.compute"],
                      deps=[d for d in (last[r],) if d is not None], rank=r) for r in range(RANKS)]
        for g in range(RANKS // TP):
            members = range(g * TP, (g + 1) * TP)
            node = b.add(NodeKind.COLLECTIVE, resources=[f"r{r}.tp" for r in members],
                         deps=[comp[r] for r in members])
            for r in members:
                last[r] = node
        if step % 2 == 1:
            for lane in range(TP):
                members = range(lane, RANKS, TP)
                b.add(NodeKind.COLLECTIVE, resources=[f"r{r}.dp" for r in members],
                      deps=[comp[r] for r in members])
    return b.build()


def pipeline_graph() -> Graph:
    """A deep workload: 1,024 ranks as a pipeline, ``MICRO`` micro-batches forward then
    backward, sends on per-link streams (depth ~ 4 x 1,024 levels, a few nodes wide)."""
    b = GraphBuilder("bench-pipeline")
    fwd: dict[tuple[int, int], int] = {}
    for r in range(RANKS):
        for m in range(MICRO):
            deps = [fwd[(r - 1, m)]] if r else []
            c = b.add(NodeKind.COMPUTE, resources=[f"r{r}.compute"], deps=deps, rank=r)
            fwd[(r, m)] = b.add(NodeKind.SEND, resources=[f"r{r}>{r + 1}"], deps=[c], rank=r)
    bwd: dict[tuple[int, int], int] = {}
    for r in reversed(range(RANKS)):
        for m in range(MICRO):
            deps = [bwd[(r + 1, m)]] if r < RANKS - 1 else [fwd[(r, m)]]
            c = b.add(NodeKind.COMPUTE, resources=[f"r{r}.compute"], deps=deps, rank=r)
            bwd[(r, m)] = b.add(NodeKind.SEND, resources=[f"r{r}<{r - 1}"], deps=[c], rank=r)
    return b.build()


def python_event_loop(graph: Graph, dur: np.ndarray) -> float:
    """Reference: the same in-order list scheduling, one design point, plain Python."""
    free: dict[int, float] = {}
    finish = [0.0] * graph.num_nodes
    for i in range(graph.num_nodes):  # insertion order is topological here
        s = max([finish[int(d)] for d in graph.deps_of(i)] +
                [free.get(int(r), 0.0) for r in graph.resources_of(i)], default=0.0)
        finish[i] = s + float(dur[i])
        for r in graph.resources_of(i):
            free[int(r)] = finish[i]
    return max(finish)



def _peak_mib(fn: object) -> float:
    tracemalloc.start()
    fn()  # type: ignore[operator]
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak / 2**20


def bench(title: str, graph: Graph) -> None:
    """Compile and time ``graph``; print one table."""
    t0 = time.perf_counter()
    plan: SchedulePlan = compile_plan(graph)
    t_compile = time.perf_counter() - t0
    print(f"\n{title}: {graph.num_nodes} nodes, {graph.num_resources} streams -> "
          f"{plan.num_chains} chains, {plan.num_levels} levels (compile {t_compile:.2f} s, "
          f"once per structure)")
    rng = np.random.default_rng(0)
    dur1 = rng.uniform(1.0, 2.0, size=graph.num_nodes)
    t_py = median_s(lambda: python_event_loop(graph, dur1), 3)
    want = python_event_loop(graph, dur1)
    got = float(run_schedule(plan, dur1).makespan[0])
    assert abs(got - want) < 1e-9 * want, (got, want)
    header = (f"{'engine':<24}{'B':>6}{'median s':>12}{'s/point':>12}"
              f"{'speed-up/pt':>13}{'peak MiB':>10}")
    print(header)
    print("-" * len(header))
    print(f"{'python event loop':<24}{1:>6}{t_py:>12.4f}{t_py:>12.2e}{'(baseline)':>13}")
    base: dict[str, float] = {}
    last: dict[str, float] = {}
    for name, kind in (("run_schedule (nodes)", "nodes"), ("run_chains (chains)", "chains")):
        for b in (1, 64, 1024):
            dur = rng.uniform(1.0, 2.0, size=(graph.num_nodes, b))
            seg = np.add.reduceat(dur[plan.order], plan.seg_ptr[:-1], axis=0)
            fn: Callable[[], object] = (partial(run_schedule, plan, dur) if kind == "nodes"
                                        else partial(run_chains, plan, seg))
            t = median_s(fn, 5 if b < 1024 else 3)
            per = t / b
            base.setdefault(kind, per)
            last[kind] = per
            mem = _peak_mib(fn)
            print(f"{name:<24}{b:>6}{t:>12.4f}{per:>12.2e}{base[kind] / per:>12.1f}x"
                  f"{mem:>10.1f}")
    print(f"per point vs the python event loop: engine B=1 {t_py / base['nodes']:.1f}x, "
          f"B=1024 {t_py / last['nodes']:.1f}x (nodes) / {t_py / last['chains']:.1f}x (chains)")


def main() -> None:
    """Time both synthetic workloads."""
    bench("wide: 1,024 ranks, TP-8 all-reduces + DP-128 reductions", synthetic_graph())
    bench("deep: 1,024-stage pipeline, 4 micro-batches", pipeline_graph())


if __name__ == "__main__":
    main()
