"""Benchmark of the sweep pipeline on hardware sweeps of >= 100,000 design points.

Hardware-only axes (one graph structure, so every batch reuses one compiled graph): scale-out
bandwidth range(25,401,25) x scale-up bandwidth range(150,901,50) x HBM bandwidth
range(1500,3501,100) x bf16 peak range(300,1001,35) = 16 x 16 x 21 x 21 = 112,896 points, on
- ``gpt3``: GPT-3 175B (``workload=gpt3_175b``), Megatron TP=8 x PP=8
  (``parallel=megatron_tp8_pp8``, global batch 1536), 1,024 A100s: the GPT-3-scale sweep;
- ``gpt3_overlap``: the same with Megatron's TP communication overlap, each run of overlapped
  steps one closed-form block (``parallel.overlap_blocks``; as pieces a point costs ~500x
  more);
- ``tiny``: ``workload=gpt_tiny`` on one 8-GPU node, where the engine is cheap, so the rate shows
  the ceiling of the orchestration itself (plan, materialize specs, Ray, parquet, MLflow).

Reports, in one table:
- baseline: the same batches evaluated in this process without Ray (``evaluate_batch``), median
  over ``--baseline-batches`` batches, per wall second and per CPU second (``process_time``:
  what an idle core would do): the engine's own rate, the ceiling per worker;
- the machine's ceiling: the same batches in two forked processes at once against one process
  alone (no Ray, no driver): the best 2-process efficiency this machine gives at that moment
  (cores shared with other tenants or with each other's caches cap it);
- ``run_sweep`` with 1 and 2 Ray workers, interleaved ``--repeats`` times after one untimed
  warm-up sweep of 4,096 points (the process's first sweep pays one-time plotting and MLflow
  costs that would otherwise fall on the first 1-worker round) (local Ray, 2 CPUs,
  MLflow SQLite store, parquet table, summary, plots, best child runs), medians: points/s end
  to end (planning, Ray actor start-up, evaluation, parquet, MLflow), points/s of the evaluation
  loop alone (first batch submitted to last result received), the workers' own CPU rate (points
  per CPU second of the worker processes, ``BatchOutput.cpu_s``), the seconds of planning,
  start-up (output folder, actors ready, first structure) and finish (table, summary, plots,
  MLflow record); scaling efficiency (rate with 2 workers / (2 x rate with 1), per interleaved
  pair: median and range) end to end and of the evaluation loop; and the bound that the fixed
  costs alone put on the end-to-end efficiency (Amdahl: the 2-worker run's planning, start-up
  and finish as measured, its loop exactly half the 1-worker loop);
- the driver's ingest: points per CPU second of the driver process (all its threads) in the
  2-worker loops, and the workers one driver core keeps fed at the workers' CPU rate (what a
  sweep on a cluster with one driver can use; one-time work on the driver's threads during the
  loop is counted, so it is a lower bound).
BLAS runs one thread per process (``OMP_NUM_THREADS=1`` unless set), as Ray sets it for its
workers: on a 2-core machine OpenBLAS's second thread made the (24 x 23) @ (23 x 2,048)
template product ~15 ms instead of ~0.1 ms, only in the in-process baseline.
Batches: ``--batch-size`` (``sweep.batch_size``), by default ``auto`` as in the default sweep
(guided sizes from 8,192 points down to 64, ``search.sweep.driver.guided_batch_size``); the
baseline and the ceiling then time the first guided batches (8,192 points on the grids here).
Usage: ``python scripts/bench_sweep.py [--case gpt3|gpt3_overlap|tiny|all] [--points N] [--batch-size B]
[--repeats R]``
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
from _bench_util import load_average, print_table

from search.config.compose import compose_session
from search.run.batch import BatchOutput, evaluate_batch
from search.sweep.driver import batch_size_of, iter_batches, run_sweep
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
    "gpt3_overlap": ("GPT-3 175B, TP8 PP8, TP overlap as blocks", [
        "workload=gpt3_175b", "parallel=megatron_tp8_pp8", "system=dgx_a100_80g",
        "system.num_gpus=1024", "parallel.tp_comm_overlap=true",
        "parallel.overlap_blocks=true", *HARDWARE]),
    "tiny": ("tiny GPT, 8 A100s (pipeline ceiling)", [
        "workload=gpt_tiny", "system=dgx_a100_80g", *HARDWARE]),
}


def _plan(axes: list[str], extra: list[str]) -> tuple[object, float]:
    t0 = time.perf_counter()
    compose, options = compose_session(CONF)
    plan = make_plan(compose, options, [*axes, *extra])
    return plan, time.perf_counter() - t0


def _baseline(plan: object, batch_size: int | None, batches: int) -> tuple[float, float]:
    """Median points per wall second and per CPU second (``time.process_time``: what an
    idle core would do; the machine may be shared). The process keeps its malloc heap as a
    pool worker does (:func:`search.run.workers.keep_heap`), so the rate is a worker's."""
    from search.run.workers import keep_heap

    keep_heap()
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


def _ceiling(plan: object, batch_size: int | None, batches: int, repeats: int) -> list[float]:
    """The machine's own 2-process efficiency: the same ``batches`` evaluated by one forked
    process alone, then by two at once (no Ray, no driver work; each process warms up, waits at
    a barrier, then times its batches); per repeat, time alone / the slower time of the pair.
    What any 2-worker pool can reach here at best."""
    import multiprocessing as mp

    it = iter_batches(plan, batch_size, np.zeros(0, dtype=np.int64))  # type: ignore[arg-type]
    work = [b for _, b in zip(range(batches + 1), it, strict=False)]
    ctx = mp.get_context("fork")

    def timed(count: int) -> float:
        start, times = ctx.Barrier(count), ctx.Queue()

        def run() -> None:
            evaluate_batch(work[0])  # compile in the process, as a worker's warm-up does
            start.wait()
            t0 = time.perf_counter()
            for batch in work[1:]:
                evaluate_batch(batch)
            times.put(time.perf_counter() - t0)

        procs = [ctx.Process(target=run) for _ in range(count)]
        for proc in procs:
            proc.start()
        got = [times.get() for _ in procs]
        for proc in procs:
            proc.join()
        return max(got)

    return [timed(1) / timed(2) for _ in range(repeats)]


def _fmt_eff(values: list[float]) -> str:
    return (f"{statistics.median(values):.0%} ({min(values):.0%}-{max(values):.0%})"
            if len(values) > 1 else f"{values[0]:.0%}")


def _probe(label: str, axes: list[str], common: list[str], work: Path, args: argparse.Namespace
           ) -> tuple[int, list[tuple[str, ...]]]:
    """Planning, the in-process baseline and the machine's ceiling (before Ray starts: the
    ceiling forks this process)."""
    plan, plan_s = _plan(axes, [*common, f"sweep.output_dir={work / 'probe'}"])
    n = plan.num_points  # type: ignore[attr-defined]
    print(f"{label}: {n:,} points, planned in {plan_s:.1f} s ({n / plan_s:,.0f} points/s)",
          flush=True)
    size = batch_size_of({"batch_size": args.batch_size})  # auto (None): 8,192 at first
    base, base_cpu = _baseline(plan, size, args.baseline_batches)
    ceiling = _ceiling(plan, size, args.ceiling_batches, args.repeats)
    blank = ("-",) * 4
    return n, [
        (label, "in-process baseline (no Ray)", "-", "-", f"{base:,.0f}", f"{base:,.0f}", "-",
         *blank),
        (label, "in-process baseline, per CPU second", "-", "-", f"{base_cpu:,.0f}",
         f"{base_cpu:,.0f}", f"{base_cpu:,.0f}", *blank),
        (label, "machine ceiling: 2 processes at once vs 1 alone (no Ray)", *("-",) * 8,
         f"- / {_fmt_eff(ceiling)}")]


def _warm_up(axes: list[str], common: list[str], work: Path) -> None:
    """One untimed 1-worker sweep of 4,096 random points over the same axes: the process's
    first sweep pays one-time costs (matplotlib's first draw and font set-up, the MLflow
    experiment's first runs: ~1 s more in its final step), which would otherwise fall on the
    first 1-worker round and raise the first round's scaling figures."""
    name = f"{work.name}-warm-up"
    plan, _ = _plan(axes, [*common, "sweep.mode=random", "sweep.num_points=4096",
                           "ray.num_workers=1", f"sweep.name={name}",
                           f"sweep.output_dir={work / name}"])
    run_sweep(plan, plan.base_cfg)  # type: ignore[attr-defined, arg-type]


def _sweeps(label: str, n: int, axes: list[str], common: list[str], work: Path,
            args: argparse.Namespace) -> list[tuple[str, ...]]:
    """``run_sweep`` with 1 and 2 workers, interleaved ``args.repeats`` times; medians."""
    runs: dict[int, list[dict[str, float]]] = {1: [], 2: []}
    for rep in range(args.repeats):
        for workers in (1, 2):
            name = (f"{work.name}-{label.split(',')[0].replace(' ', '')}-{workers}-{rep}")
            plan, plan_s = _plan(axes, [*common, f"ray.num_workers={workers}",
                                        f"sweep.name={name}", f"sweep.output_dir={work / name}"])
            cpu = [0.0, 0.0]

            def on_batch(res: BatchOutput, cpu: list[float] = cpu) -> None:
                cpu[0] += getattr(res, "cpu_s", 0.0)
                cpu[1] += res.point_ids.shape[0]

            out = run_sweep(plan, plan.base_cfg, on_batch)  # type: ignore[attr-defined, arg-type]
            assert out.computed == n, (out.computed, n)
            runs[workers].append({
                "total": plan_s + out.wall_s, "plan": plan_s, "eval": out.eval_s,
                "start": out.startup_s, "finish": out.finish_s,
                "cpu_rate": cpu[1] / cpu[0] if cpu[0] > 0 else 0.0,
                "driver_cpu": out.driver_cpu_s,
                "log": (out.log_s + out.write_s) / out.wall_s})
            print(f"  {workers} worker(s), run {rep + 1}: {plan_s + out.wall_s:.1f} s end to "
                  f"end, evaluation {out.eval_s:.1f} s", flush=True)
    ends = [one["total"] / (2 * two["total"]) for one, two in zip(runs[1], runs[2], strict=True)]
    loops = [one["eval"] / (2 * two["eval"]) for one, two in zip(runs[1], runs[2], strict=True)]
    # Amdahl: the 2-worker run with its fixed costs as measured and a loop of exactly half the
    # 1-worker loop; what no loop improvement can pass at this sweep size
    bounds = [one["total"] / (2 * (two["total"] - two["eval"] + one["eval"] / 2))
              for one, two in zip(runs[1], runs[2], strict=True)]
    rows: list[tuple[str, ...]] = []
    for workers in (1, 2):
        def med(key: str, w: int = workers) -> float:
            return statistics.median(r[key] for r in runs[w])

        loop = n / med("eval")
        rows.append((label, f"run_sweep, {workers} worker(s)", f"{med('total'):.1f}",
                     f"{n / med('total'):,.0f}", f"{loop:,.0f}", f"{loop / workers:,.0f}",
                     f"{med('cpu_rate'):,.0f}", f"{med('plan'):.2f}", f"{med('start'):.2f}",
                     f"{med('finish'):.2f}", "-" if workers == 1 else
                     f"{_fmt_eff(ends)} / {_fmt_eff(loops)}"))
    rows.append((label, "bound: 2 workers, fixed costs as measured, loop exactly 2x", *("-",) * 8,
                 f"{_fmt_eff(bounds)} / 100%"))
    # the driver's CPU (all its threads: Ray's submit/wait/get, frames, parquet, the tracking
    # thread) over the 2-worker loops: how many workers at the measured worker rate one driver
    # core could keep fed, the limit of a sweep on a cluster with one driver
    ingest = statistics.median(n / r["driver_cpu"] for r in runs[2] if r["driver_cpu"] > 0)
    worker = statistics.median(r["cpu_rate"] for r in runs[2])
    rows.append((label, "driver: points per driver CPU second in the 2-worker loop / workers "
                 "one driver core keeps fed at the worker CPU rate", "-", "-", f"{ingest:,.0f}",
                 f"{ingest / worker:.1f} workers", *("-",) * 5))
    return rows


def _batch_size(text: str) -> str:
    """``--batch-size``: ``auto`` or a whole number of points, checked as the sweep checks it."""
    from search.config.schema import check_batch_size
    from simcore.errors import InputError

    try:
        check_batch_size(text if text == "auto" else float(text), "--batch-size")
    except (InputError, ValueError) as err:
        raise argparse.ArgumentTypeError(f"{text!r}: must be auto or an integer in [1, 1000000]"
                                         ) from err
    return text if text == "auto" else str(int(float(text)))


def main() -> None:
    """Run the benchmark and print its table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", choices=[*CASES, "all"], default="all")
    ap.add_argument("--points", type=int, default=0, help="random points instead of the grid")
    ap.add_argument("--batch-size", default="auto", type=_batch_size,
                    help="sweep.batch_size of the sweeps: auto (the default sweep's) or points")
    ap.add_argument("--baseline-batches", type=int, default=3)
    ap.add_argument("--ceiling-batches", type=int, default=6,
                    help="batches per process for the machine's 2-process ceiling")
    ap.add_argument("--repeats", type=int, default=3,
                    help="interleaved 1- and 2-worker sweeps (medians are reported)")
    args = ap.parse_args()
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    import ray

    load0 = load_average()
    work = Path(tempfile.mkdtemp(prefix="bench_sweep_"))
    mode = ["sweep.mode=random", f"sweep.num_points={args.points}"] if args.points else []
    how = [f"sweep.batch_size={args.batch_size}", "sweep.progress=false",
           f"tracking.uri=sqlite:///{work / 'mlflow.db'}"]  # the warm-up's too
    common = [*mode, *how]
    keys = list(CASES) if args.case == "all" else [args.case]
    ray_tmp = tempfile.mkdtemp(prefix="rs_bench", dir="/tmp")
    rows: list[tuple[str, ...]] = []
    try:
        probes = {key: _probe(*CASES[key], common, work, args) for key in keys}
        _ = Tracker(f"sqlite:///{work / 'mlflow.db'}", "warm-up").experiment_id  # the store
        from search.run.workers import init_ray

        init_ray(None, 2, ray_tmp)  # loopback only, in a private (0700) temp dir
        for key in keys:
            n, probe_rows = probes[key]
            _warm_up(CASES[key][1], how, work)
            rows += probe_rows + _sweeps(CASES[key][0], n, CASES[key][1], common, work, args)
    finally:
        ray.shutdown()
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(ray_tmp, ignore_errors=True)
    head = ("sweep", "configuration", "wall s", "points/s end to end", "points/s eval loop",
            "per worker", "worker CPU points/s", "plan s", "start-up s", "finish s",
            "scaling eff. end to end / eval loop")
    print(f"medians of {args.repeats} interleaved runs; efficiencies: median (min-max)")
    print_table(head, rows, load0)
    print("target: >= 20,000 points/s per worker on hardware-only axes, >= 90% scaling at 2")


if __name__ == "__main__":
    main()
