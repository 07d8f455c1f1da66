"""Benchmark of random sweeps over continuous hardware axes: planning and evaluation rate.

A random sweep over ``interval(...)`` axes gives every point its own hardware values, so the
per-value work (each value checked before any work in ``make_plan``, each value's SystemSpec
field built and checked in ``materialize_systems``) runs once per point, not once per grid
value. GPT-3 175B, Megatron TP=8 x PP=8, 1,024 A100s, ``--points`` random points over
- ``grid values``: scale-out bandwidth choice(25,...,400) x HBM bandwidth choice(1500,...,3500)
  (16 x 21 distinct values: per-value work is cached after the first batch);
- ``interval``: the same bounds as ``interval(25,400)`` x ``interval(1500,3500)``.
Reports the planning time, the process's max RSS after planning (its high-water mark, so
after the first case it includes the earlier ones: ``--case`` runs one alone) and the
evaluation rate in this process (one BLAS thread, the worker's heap setting), median over
batches of 2,048 after the first (which compiles).

The script uses only ``make_plan``, ``iter_batches`` and ``evaluate_batch``, so an older commit
can be measured with this same file: ``PYTHONPATH=<worktree of the commit> python
scripts/bench_continuous.py``.
Usage: ``python scripts/bench_continuous.py [--points N] [--batches B] [--case grid|interval|all]``
(planning at scale: ``--points 2000000 --batches 2 --case interval``).
"""

from __future__ import annotations

import argparse
import os
import resource

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before numpy: one BLAS thread, as in Ray workers
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
from _bench_util import load_average, print_table

CONF = Path(__file__).resolve().parents[1] / "conf"
BASE = ["workload=gpt3_175b", "parallel=megatron_tp8_pp8", "system=dgx_a100_80g",
        "system.num_gpus=1024", "sweep.mode=random"]
CASES = {
    "grid values": ["system.scaleout.bandwidth_GBps=choice(" + ",".join(
        str(v) for v in range(25, 401, 25)) + ")",
                    "system.accelerator.hbm_bandwidth_GBps=choice(" + ",".join(
        str(v) for v in range(1500, 3501, 100)) + ")"],
    "interval": ["system.scaleout.bandwidth_GBps=interval(25,400)",
                 "system.accelerator.hbm_bandwidth_GBps=interval(1500,3500)"],
}


def main() -> None:
    """Run the benchmark and print its table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=20000, help="random points per sweep")
    ap.add_argument("--batches", type=int, default=6, help="timed batches of 2,048 points")
    ap.add_argument("--case", choices=[*CASES, "all"], default="all",
                    help="one case alone: its max RSS is then its own planning's")
    args = ap.parse_args()
    from search.config.compose import compose_session
    from search.run.batch import evaluate_batch
    from search.run.workers import keep_heap
    from search.sweep.driver import iter_batches
    from search.sweep.plan import make_plan

    keep_heap()
    out = tempfile.mkdtemp(prefix="bench_continuous_")
    compose, options = compose_session(CONF)
    make_plan(compose, options, [f"sweep.output_dir={out}"])  # imports, first composition
    load0 = load_average()
    rows = []
    for label, axes in CASES.items():
        if args.case not in ("all", label):
            continue
        t0 = time.perf_counter()
        plan = make_plan(compose, options, [*BASE, f"sweep.num_points={args.points}", *axes,
                                            f"sweep.output_dir={out}"])
        plan_s = time.perf_counter() - t0
        rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
        batches = iter_batches(plan, 2048, np.zeros(0, dtype=np.int64))
        evaluate_batch(next(batches))  # compiles the structure
        rates, cpu = [], []
        for _, batch in zip(range(args.batches), batches, strict=False):
            t0, c0 = time.perf_counter(), time.process_time()
            evaluate_batch(batch)
            rates.append(batch.size / (time.perf_counter() - t0))
            cpu.append(batch.size / (time.process_time() - c0))
        rows.append((label, f"{plan.num_points:,}", f"{plan_s:.2f}",
                     f"{plan.num_points / plan_s:,.0f}", f"{rss_mib:,.0f}",
                     f"{statistics.median(rates):,.0f}", f"{statistics.median(cpu):,.0f}"))
    print_table(("axes", "points", "make_plan s", "points planned/s",
                 "max RSS MiB after planning", "evaluated points/s", "per CPU second"), rows,
                load0)
    import shutil

    shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()
