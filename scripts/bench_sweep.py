"""Benchmark of the sweep pipeline on hardware sweeps of >= 100,000 design points.

Hardware-only axes (one graph structure, so every batch reuses one compiled graph): scale-out
bandwidth range(25,401,25) x scale-up bandwidth range(150,901,50) x HBM bandwidth
range(1500,3501,100) x bf16 peak range(300,1001,35) = 16 x 16 x 21 x 21 = 112,896 points, on
- ``gpt3``: GPT-3 175B (``workload=gpt3_175b``), Megatron TP=8 x PP=8
  (``parallel=megatron_tp8_pp8``, global batch 1536), 1,024 A100s: the GPT-3-scale sweep;
- ``tiny``: ``workload=gpt_tiny`` on one 8-GPU node, where the engine is cheap, so the rate shows
  the ceiling of the orchestration itself (plan, materialize specs, Ray, parquet, MLflow).

Reports, in one table:
- baseline: the same batches evaluated in this process without Ray (``evaluate_batch``), median
  over ``--baseline-batches`` batches, per wall second and per CPU second (``process_time``:
  what an idle core would do): the engine's own rate, the ceiling per worker;
- ``run_sweep`` end to end with 1 and 2 Ray workers (local Ray, 2 CPUs, MLflow SQLite store,
  parquet table, summary, plots, best child runs): points/s end to end (planning, Ray actor
  start-up, evaluation, parquet, MLflow), points/s of the evaluation loop alone (first batch
  submitted to last result received), the workers' own CPU rate (points per CPU second of the
  worker processes, ``BatchOutput.cpu_s``: what a core costs when other jobs share the machine),
  scaling efficiency (rate with 2 workers / (2 x rate with 1)) end to end and of the evaluation
  loop, and the share of wall time spent logging (MLflow calls + parquet writes).
BLAS runs one thread per process (``OMP_NUM_THREADS=1`` unless set), as Ray sets it for its
workers: on a 2-core machine OpenBLAS's second thread made the (24 x 23) @ (23 x 2,048)
template product ~15 ms instead of ~0.1 ms, only in the in-process baseline.
Usage: ``python scripts/bench_sweep.py [--case gpt3|tiny|all] [--points N] [--batch-size B]``
(``--points`` draws N random points over the same axes instead of the full grid: a quick run).
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before numpy: one BLAS thread, as in Ray workers
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from search.config.compose import compose_session
from search.run.batch import BatchOutput, evaluate_batch
from search.sweep.driver import iter_batches, run_sweep
from search.sweep.plan import make_plan
from search.tracking.client import Tracker

CONF = Path(__file__).resolve().parents[1] / "conf"
HARDWARE = [
    "system.scaleout.bandwidth_GBps=range(25,401,25)",
    "system.scaleup.bandwidth_GBps=range(150,901,50)",
    "system.accelerator.hbm_bandwidth_GBps=range(1500,3501,100)",
    "system.accelerator.peak_tflops_bf16=range(300,1001,35)",
]
CASES = {
    "gpt3": ("GPT-3 175B, 1,024 A100s, TP8 PP8", [
        "workload=gpt3_175b", "parallel=megatron_tp8_pp8", "system=dgx_a100_80g",
        "system.num_gpus=1024", *HARDWARE]),
    "tiny": ("tiny GPT, 8 A100s (pipeline ceiling)", [
        "workload=gpt_tiny", "system=dgx_a100_80g", *HARDWARE]),
}


def _plan(axes: list[str], extra: list[str]) -> tuple[object, float]:
    t0 = time.perf_counter()
    compose, options = compose_session(CONF)
    plan = make_plan(compose, options, [*axes, *extra])
    return plan, time.perf_counter() - t0


def _baseline(plan: object, batch_size: int, batches: int) -> tuple[float, float]:
    """Median points per wall second and per CPU second (``time.process_time``: what an
    idle core would do; the machine may be shared)."""
    it = iter_batches(plan, batch_size, np.zeros(0, dtype=np.int64))  # type: ignore[arg-type]
    first = next(it)
    evaluate_batch(first)  # compile the graph once (the workers keep it cached too)
    rates, cpu = [], []
    for _, batch in zip(range(batches), it, strict=False):
        t0, c0 = time.perf_counter(), time.process_time()
        evaluate_batch(batch)
        rates.append(batch.size / (time.perf_counter() - t0))
        cpu.append(batch.size / (time.process_time() - c0))
    return statistics.median(rates), statistics.median(cpu)


def _case(label: str, axes: list[str], common: list[str], work: Path, args: argparse.Namespace
          ) -> list[tuple[str, ...]]:
    plan, plan_s = _plan(axes, [*common, f"sweep.output_dir={work / 'probe'}"])
    n = plan.num_points  # type: ignore[attr-defined]
    print(f"{label}: {n:,} points, planned in {plan_s:.1f} s ({n / plan_s:,.0f} points/s)",
          flush=True)
    base, base_cpu = _baseline(plan, args.batch_size, args.baseline_batches)
    rows: list[tuple[str, ...]] = [
        (label, "in-process baseline (no Ray)", "-", "-", f"{base:,.0f}", f"{base:,.0f}", "-",
         "-", "-"),
        (label, "in-process baseline, per CPU second", "-", "-", f"{base_cpu:,.0f}",
         f"{base_cpu:,.0f}", f"{base_cpu:,.0f}", "-", "-")]
    rates: dict[int, float] = {}
    loops: dict[int, float] = {}
    for workers in (1, 2):
        name = f"{work.name}-{label.split(',')[0].replace(' ', '')}-{workers}"
        plan, plan_s = _plan(axes, [*common, f"ray.num_workers={workers}", f"sweep.name={name}",
                                    f"sweep.output_dir={work / name}"])
        cpu = [0.0, 0.0]

        def on_batch(res: BatchOutput, cpu: list[float] = cpu) -> None:
            cpu[0] += getattr(res, "cpu_s", 0.0)
            cpu[1] += res.point_ids.shape[0]

        out = run_sweep(plan, plan.base_cfg, on_batch)  # type: ignore[attr-defined, arg-type]
        assert out.computed == n, (out.computed, n)
        total = plan_s + out.wall_s
        rates[workers] = out.computed / total
        loops[workers] = loop = out.computed / out.eval_s
        eff = (f"{rates[2] / (2 * rates[1]):.0%} / {loops[2] / (2 * loops[1]):.0%}"
               if workers == 2 else "-")
        rows.append((label, f"run_sweep, {workers} worker(s)", f"{total:.1f}",
                     f"{rates[workers]:,.0f}", f"{loop:,.0f}", f"{loop / workers:,.0f}",
                     f"{cpu[1] / cpu[0]:,.0f}" if cpu[0] > 0 else "-", eff,
                     f"{(out.log_s + out.write_s) / out.wall_s:.1%}"))
    return rows


def main() -> None:
    """Run the benchmark and print its table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", choices=[*CASES, "all"], default="all")
    ap.add_argument("--points", type=int, default=0, help="random points instead of the grid")
    ap.add_argument("--batch-size", type=int, default=2048)
    ap.add_argument("--baseline-batches", type=int, default=3)
    args = ap.parse_args()
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    import ray

    load0 = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    work = Path(tempfile.mkdtemp(prefix="bench_sweep_"))
    mode = ["sweep.mode=random", f"sweep.num_points={args.points}"] if args.points else []
    common = [*mode, f"sweep.batch_size={args.batch_size}", "sweep.progress=false",
              f"tracking.uri=sqlite:///{work / 'mlflow.db'}"]
    _ = Tracker(f"sqlite:///{work / 'mlflow.db'}", "warm-up").experiment_id  # create the store
    from search.run.workers import init_ray

    ray_tmp = tempfile.mkdtemp(prefix="rs_bench", dir="/tmp")
    init_ray(None, 2, ray_tmp)  # loopback only, in a private (0700) temp dir
    rows: list[tuple[str, ...]] = []
    try:
        for key in CASES if args.case == "all" else [args.case]:
            rows += _case(*CASES[key], common, work, args)
    finally:
        ray.shutdown()
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(ray_tmp, ignore_errors=True)
    head = ("sweep", "configuration", "wall s", "points/s end to end", "points/s eval loop",
            "per worker", "worker CPU points/s", "scaling eff. end to end / eval loop",
            "logging share")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for row in rows:
        print("| " + " | ".join(row) + " |")
    load1 = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"load average (1, 5, 15 min) before: {load0}; after: {load1} ({os.cpu_count()} CPUs)")
    print("target: >= 20,000 points/s per worker on hardware-only axes, >= 90% scaling at 2")


if __name__ == "__main__":
    main()
