"""Engine rate of hardware sweeps per worker, in process (no Ray): the baseline of
``bench_sweep.py`` (materialize the batch's specs, evaluate), median points per CPU second over
batches of the ``bench_sweep.py`` hardware grid, run for this checkout and (``--base DIR``)
another in a subprocess, alternated; with ``--base`` every case also checks that both
checkouts give the same result columns to the last bit (a digest of every column of every
timed batch).

Cases (``--case``, several allowed; ``all``): ``gpt3`` is the GPT-3 1,024-GPU sweep of
``bench_sweep.py`` (TP8 PP8, ZeRO-1); the ZeRO cases evaluate plans whose per-layer,
per-micro-batch collectives make the graph much larger:

- ``llama70b_zero1`` / ``_zero2`` / ``_zero3``: Llama 3 70B on 512 H100s, TP8 x DP64 (no
  pipeline), global batch 1,024 (16 micro-batches per replica), sequence parallel, selective
  recompute: the data-parallel-heavy plan ZeRO-2 / ZeRO-3 (FSDP-style) runs are made of;
  ZeRO-1 is the same plan for comparison;
- ``gpt3_zero2`` / ``gpt3_zero3``: the ``gpt3`` plan (TP8 PP8 DP16) with ZeRO-2 / ZeRO-3:
  per-layer collectives interleaved with a pipeline schedule.

The table reports per case and checkout the median points per CPU second (the median over
rounds of each round's median over batches), this checkout's rate over the base's, and the
rate over the ZeRO-1 case of the same plan (``llama70b_zero1``, ``gpt3``) when it ran too.

Usage: ``python scripts/bench_hw_base.py [--case gpt3 ...] [--base /tmp/sw-base] [--batches 5]
[--rounds 2]``. BLAS runs one thread per process (``OMP_NUM_THREADS=1`` unless set, also for
the base's subprocess), as in the Ray workers.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before numpy: one BLAS thread, as in Ray workers
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GPT3 = ["workload=gpt3_175b", "parallel=megatron_tp8_pp8", "system=dgx_a100_80g",
        "system.num_gpus=1024"]
LLAMA70B = ["workload=llama3_70b", "parallel=megatron_tp8_pp8", "system=dgx_h100_80g",
            "system.num_gpus=512", "parallel.pp=1", "parallel.global_batch=1024"]
#: case -> (label, overrides before the hardware axes, the ZeRO-1 case of the same plan)
CASES = {
    "gpt3": ("GPT-3 175B, 1,024 A100s, TP8 PP8, ZeRO-1", GPT3, None),
    "gpt3_zero2": ("GPT-3 175B, TP8 PP8, ZeRO-2", [*GPT3, "parallel.zero_stage=2"], "gpt3"),
    "gpt3_zero3": ("GPT-3 175B, TP8 PP8, ZeRO-3", [*GPT3, "parallel.zero_stage=3"], "gpt3"),
    "llama70b_zero1": ("Llama 3 70B, 512 H100s, TP8 DP64, ZeRO-1",
                       [*LLAMA70B, "parallel.zero_stage=1"], None),
    "llama70b_zero2": ("Llama 3 70B, TP8 DP64, ZeRO-2", [*LLAMA70B, "parallel.zero_stage=2"],
                       "llama70b_zero1"),
    "llama70b_zero3": ("Llama 3 70B, TP8 DP64, ZeRO-3", [*LLAMA70B, "parallel.zero_stage=3"],
                       "llama70b_zero1"),
}


def worker(case: str, batches: int, batch_size: int) -> tuple[float, str]:
    """Median points per CPU second (``time.process_time``: steadier than wall time on a
    shared machine) of ``batches`` batches of ``case``, after one warm-up batch that compiles
    the graph, and a digest of every result column of the timed batches."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import numpy as np
    from bench_sweep import HARDWARE, _plan

    from search.run.batch import evaluate_batch
    from search.run.workers import keep_heap
    from search.sweep.driver import iter_batches

    keep_heap()  # as a pool worker does: batches reuse the malloc heap
    digest = hashlib.sha256()
    with tempfile.TemporaryDirectory() as tmp:
        plan, _ = _plan([*CASES[case][1], *HARDWARE], [f"sweep.output_dir={tmp}/probe"])
        it = iter_batches(plan, batch_size, np.zeros(0, dtype=np.int64))  # type: ignore[arg-type]
        evaluate_batch(next(it))
        rates = []
        for _, batch in zip(range(batches), it, strict=False):
            t0 = time.process_time()
            columns = evaluate_batch(batch)
            rates.append(batch.size / (time.process_time() - t0))
            for name in sorted(columns):
                values = columns[name]
                digest.update(name.encode())
                digest.update(values.tobytes() if values.dtype.kind != "O" else
                              "\n".join(map(str, values.tolist())).encode())
        return float(statistics.median(rates)), digest.hexdigest()


def main() -> None:
    """Alternate this checkout and the base per case, print the median rates."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--case", nargs="+", default=["gpt3"], choices=[*CASES, "all"])
    ap.add_argument("--base", type=Path, default=None)
    ap.add_argument("--batches", type=int, default=5)
    ap.add_argument("--batch-size", type=int, default=2048)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.batches, args.batch_size)))
        return
    from _bench_util import load_average, print_table

    here = Path(__file__).resolve()
    roots = {"new": here.parents[1]}
    if args.base is not None:
        roots["base"] = args.base
    cases = list(CASES) if "all" in args.case else list(dict.fromkeys(args.case))
    load0 = load_average()
    rates: dict[tuple[str, str], list[float]] = {}
    digests: dict[tuple[str, str], set[str]] = {}
    for _ in range(args.rounds):
        for case in cases:
            for name, root in roots.items():
                cmd = [sys.executable, str(here), "--worker", case, "--batches",
                       str(args.batches), "--batch-size", str(args.batch_size)]
                out = subprocess.run(cmd, cwd=root, env={**os.environ, "PYTHONPATH": str(root)},
                                     check=True, capture_output=True, text=True).stdout
                rate, digest = json.loads(out.strip().splitlines()[-1])
                rates.setdefault((case, name), []).append(rate)
                digests.setdefault((case, name), set()).add(digest)
                print(f"{case} {name}: {rate:,.0f} points per CPU second", flush=True)
    print_table(("case", "code", "points per CPU second, median (rounds)", "new / base",
                 "vs ZeRO-1 of the plan", "same results as base"),
                [_row(case, name, rates, digests) for case in cases for name in roots], load0)


def _row(case: str, name: str, rates: dict[tuple[str, str], list[float]],
         digests: dict[tuple[str, str], set[str]]) -> tuple[str, ...]:
    """One table row: the case's median rate for checkout ``name``, its ratios, whether the
    digests of this checkout and the base agree."""
    label, _, zero1 = CASES[case]
    runs = rates[(case, name)]
    med = statistics.median(runs)
    base = rates.get((case, "base"))
    ratio = f"{med / statistics.median(base):.2f}x" if base and name == "new" else "-"
    ref = rates.get((zero1, name)) if zero1 else None
    vs_zero1 = f"{med / statistics.median(ref):.3f}x" if ref else "-"
    same = "-"
    if base and name == "new":
        agree = digests[(case, "new")] == digests[(case, "base")]
        same = "yes" if agree and len(digests[(case, "new")]) == 1 else "NO"
    spread = ", ".join(f"{r:,.0f}" for r in runs)
    return (label, name, f"{med:,.0f} ({spread})", ratio, vs_zero1, same)


if __name__ == "__main__":
    main()
