"""Engine rate of the GPT-3 1,024-GPU hardware sweep per worker, in process (no Ray): the
baseline of ``bench_sweep.py`` (materialize the batch's specs, evaluate), median points per
CPU second over batches, run for this checkout and (``--base DIR``) another in a subprocess, alternated.

Usage: ``python scripts/bench_hw_base.py [--base /tmp/sw-base] [--batches 5] [--rounds 2]``.
BLAS runs one thread per process (``OMP_NUM_THREADS=1`` unless set, also for the base's
subprocess), as in the Ray workers.
"""

from __future__ import annotations

import argparse
import json
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before numpy: one BLAS thread, as in Ray workers
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def worker(batches: int, batch_size: int) -> float:
    """Median points per CPU second (``time.process_time``: steadier than wall time on a
    shared machine) of ``batches`` batches, after one warm-up batch that compiles the graph."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import numpy as np
    from bench_sweep import CASES, _plan

    from search.run.batch import evaluate_batch
    from search.sweep.driver import iter_batches

    with tempfile.TemporaryDirectory() as tmp:
        plan, _ = _plan(CASES["gpt3"][1], [f"sweep.output_dir={tmp}/probe"])
        it = iter_batches(plan, batch_size, np.zeros(0, dtype=np.int64))  # type: ignore[arg-type]
        evaluate_batch(next(it))
        rates = []
        for _, batch in zip(range(batches), it, strict=False):
            t0 = time.process_time()
            evaluate_batch(batch)
            rates.append(batch.size / (time.process_time() - t0))
        return float(statistics.median(rates))


def main() -> None:
    """Alternate this checkout and the base, print the median rates."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", type=Path, default=None)
    ap.add_argument("--batches", type=int, default=5)
    ap.add_argument("--batch-size", type=int, default=2048)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(args.batches, args.batch_size)))
        return
    here = Path(__file__).resolve()
    roots = {"new": here.parents[1]}
    if args.base is not None:
        roots["base"] = args.base
    rates: dict[str, list[float]] = {k: [] for k in roots}
    for _ in range(args.rounds):
        for name, root in roots.items():
            cmd = [sys.executable, str(here), "--worker", "--batches", str(args.batches),
                   "--batch-size", str(args.batch_size)]
            out = subprocess.run(cmd, cwd=root, env={**os.environ, "PYTHONPATH": str(root)},
                                 check=True, capture_output=True, text=True).stdout
            rates[name].append(float(out.strip().splitlines()[-1]))
    for name, r in rates.items():
        print(f"{name:<5} points per CPU second, one worker (in process): " + ", ".join(f"{x:,.0f}" for x in r))


if __name__ == "__main__":
    main()
