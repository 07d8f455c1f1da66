"""Engine rate of the GPT-3 1,024-GPU hardware sweep per worker, in process (no Ray): the
baseline of ``bench_sweep.py`` (plan, materialize the batch's specs, evaluate), median points/s
over batches, run for this checkout and (``--base DIR``) another in a subprocess, alternated.

Usage: ``python scripts/bench_hw_base.py [--base /tmp/sw-base] [--batches 5] [--rounds 2]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path


def worker(batches: int, batch_size: int) -> float:
    """Median points/s of ``batches`` batches (after one warm-up batch)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_sweep import CASES, _baseline, _plan

    with tempfile.TemporaryDirectory() as tmp:
        plan, _ = _plan(CASES["gpt3"][1], [f"sweep.output_dir={tmp}/probe"])
        return float(_baseline(plan, batch_size, batches))


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
        print(f"{name:<5} points/s per worker (in process): " + ", ".join(f"{x:,.0f}" for x in r))


if __name__ == "__main__":
    main()
