"""Benchmark of the sweep pipeline on a GPT-3-scale hardware sweep (>= 100,000 design points).

Sweep: GPT-3 175B (``workload=gpt3_175b``), Megatron TP=8 x PP=8 (``parallel=megatron_tp8_pp8``,
global batch 1536), 1,024 A100s (``system=dgx_a100_80g system.num_gpus=1024``); hardware-only
axes (one graph structure, so every batch reuses one compiled graph):
scale-out bandwidth range(25,401,25) x scale-up bandwidth range(150,901,50) x HBM bandwidth
range(1500,3501,100) x bf16 peak range(300,1001,35) = 16 x 16 x 21 x 21 = 112,896 points.

Reports, in one table:
- baseline: the same batches evaluated in this process without Ray (``evaluate_batch``), median
  over ``--baseline-batches`` batches: the engine's own rate, the ceiling per worker;
- ``run_sweep`` end to end with 1 and 2 Ray workers (local Ray, 2 CPUs, MLflow SQLite store,
  parquet table, summary, plots, best child runs): points/s end to end (planning, Ray actor
  start-up, evaluation, parquet, MLflow), points/s of the evaluation loop alone (first batch
  submitted to last result received), scaling efficiency (end-to-end rate with 2 workers /
  (2 x rate with 1)), and the share of wall time spent logging (MLflow calls + parquet writes).
Usage: ``python scripts/bench_sweep.py [--points N] [--batch-size B]`` (``--points`` draws N
random points over the same axes instead of the full grid, for a quick run).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from search.driver import compose_session, iter_batches, run_sweep
from search.plan import make_plan
from search.tracking import Tracker
from search.workers import evaluate_batch

CONF = Path(__file__).resolve().parents[1] / "conf"
AXES = [
    "workload=gpt3_175b", "parallel=megatron_tp8_pp8", "system=dgx_a100_80g",
    "system.num_gpus=1024",
    "system.scaleout.bandwidth_GBps=range(25,401,25)",
    "system.scaleup.bandwidth_GBps=range(150,901,50)",
    "system.accelerator.hbm_bandwidth_GBps=range(1500,3501,100)",
    "system.accelerator.peak_tflops_bf16=range(300,1001,35)",
]


def _plan(extra: list[str]) -> tuple[object, float]:
    t0 = time.perf_counter()
    compose, options = compose_session(CONF)
    plan = make_plan(compose, options, [*AXES, *extra])
    return plan, time.perf_counter() - t0


def _baseline(plan: object, batch_size: int, batches: int) -> float:
    it = iter_batches(plan, batch_size, np.zeros(0, dtype=np.int64))  # type: ignore[arg-type]
    first = next(it)
    evaluate_batch(first)  # compile the graph once (the workers keep it cached too)
    rates = []
    for _, batch in zip(range(batches), it, strict=False):
        t0 = time.perf_counter()
        evaluate_batch(batch)
        rates.append(batch.size / (time.perf_counter() - t0))
    return statistics.median(rates)


def main() -> None:
    """Run the benchmark and print its table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=0, help="random points instead of the grid")
    ap.add_argument("--batch-size", type=int, default=2048)
    ap.add_argument("--baseline-batches", type=int, default=3)
    args = ap.parse_args()
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    import ray

    work = Path(tempfile.mkdtemp(prefix="bench_sweep_"))
    mode = ["sweep.mode=random", f"sweep.num_points={args.points}"] if args.points else []
    common = [*mode, f"sweep.batch_size={args.batch_size}", "sweep.progress=false",
              f"tracking.uri=sqlite:///{work / 'mlflow.db'}"]
    plan, plan_s = _plan([*common, f"sweep.output_dir={work / 'probe'}"])
    n = plan.num_points  # type: ignore[attr-defined]
    print(f"GPT-3 175B hardware sweep: {n:,} points, planned in {plan_s:.1f} s "
          f"({n / plan_s:,.0f} points/s); batch size {args.batch_size}")
    base = _baseline(plan, args.batch_size, args.baseline_batches)
    rows = [("in-process baseline (no Ray)", "-", "-", f"{base:,.0f}", f"{base:,.0f}", "-", "-")]
    _ = Tracker(f"sqlite:///{work / 'mlflow.db'}", "warm-up").experiment_id  # create the store
    ray.init(num_cpus=2, _temp_dir=f"/tmp/rs_bench{os.getpid()}", include_dashboard=False,
             log_to_driver=False, configure_logging=False)
    rates: dict[int, float] = {}
    try:
        for workers in (1, 2):
            plan, plan_s = _plan([*common, f"ray.num_workers={workers}",
                                  f"sweep.name=bench{workers}",
                                  f"sweep.output_dir={work / f'w{workers}'}"])
            out = run_sweep(plan, plan.base_cfg)  # type: ignore[attr-defined]
            total = plan_s + out.wall_s
            rates[workers] = out.computed / total
            logging = (out.log_s + out.write_s) / out.wall_s
            eff = f"{rates[2] / (2 * rates[1]):.0%}" if workers == 2 else "-"
            loop = out.computed / out.eval_s
            rows.append((f"run_sweep, {workers} worker(s)", f"{total:.1f}",
                         f"{rates[workers]:,.0f}", f"{loop:,.0f}", f"{loop / workers:,.0f}", eff,
                         f"{logging:.1%}"))
            assert out.computed == n, (out.computed, n)
    finally:
        ray.shutdown()
        shutil.rmtree(work, ignore_errors=True)
    head = ("configuration", "wall s", "points/s end to end", "points/s eval loop",
            "per worker", "scaling eff.", "logging share")
    widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]
    for row in [head, *rows]:
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)))
    print(f"target >= 10,000 points/s per worker; the engine alone reaches {base:,.0f} points/s "
          f"on one core for this workload")


if __name__ == "__main__":
    main()
