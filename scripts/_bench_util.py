"""Shared helpers of the benchmark scripts: median wall time, seeded hardware variants, the
markdown table with the load it was measured at."""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np

from simcore.specs.system import SystemSpec


def median_s(fn: Callable[[], object], repeats: int) -> float:
    """Median wall-clock seconds of ``repeats`` calls of ``fn``."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def hardware_variants(base: SystemSpec, n: int, seed: int = 0) -> list[SystemSpec]:
    """``n`` systems with ``base``'s structure and seeded random accelerator / scale-out numbers."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        acc = replace(base.accelerator, peak_tflops_bf16=float(rng.uniform(200, 1000)),
                      hbm_bandwidth_GBps=float(rng.uniform(1500, 5000)))
        out.append(replace(base, accelerator=acc, scaleout=replace(
            base.scaleout, bandwidth_GBps=float(rng.uniform(12.5, 100.0)))))
    return out


def print_table(head: Sequence[str], rows: Sequence[Sequence[str]], load_before: str) -> None:
    """``rows`` as a markdown table under ``head``, then the load average before (as
    :func:`load_average` gave it) and now: every figure on a shared machine needs it."""
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for row in rows:
        print("| " + " | ".join(row) + " |")
    print(f"load average (1, 5, 15 min) before: {load_before}; after: {load_average()} "
          f"({os.cpu_count()} CPUs)")


def load_average() -> str:
    """The 1-, 5- and 15-minute load averages, as printed under a table."""
    return ", ".join(f"{x:.1f}" for x in os.getloadavg())
