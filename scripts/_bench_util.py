"""Shared helpers of the benchmark scripts: the models they time, median wall time, hardware
variants (seeded random, or a scale-out bandwidth sweep), the markdown table with the load it
was measured at."""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np

from simcore.specs.system import SystemSpec
from simcore.workloads.transformer.spec import ModelSpec

#: GPT-3 175B (Brown et al. 2020) and Megatron-Turing NLG 530B (Smith et al. 2022)
GPT3 = ModelSpec(name="gpt3_175b", num_layers=96, hidden_size=12288, num_heads=96,
                 seq_len=2048, vocab_size=51200)
MTNLG = ModelSpec(name="mt_nlg_530b", num_layers=105, hidden_size=20480, num_heads=128,
                  seq_len=2048, vocab_size=51200)
#: Llama 3 405B (conf/workload/llama3_405b.yaml): 126 layers, no power-of-two pp above 2 divides
LLAMA3_405B = ModelSpec(name="llama3_405b", num_layers=126, hidden_size=16384, num_heads=128,
                        num_kv_heads=8, ffn_hidden_size=53248, seq_len=8192, vocab_size=128256,
                        mlp="swiglu")


def median_s(fn: Callable[[], object], repeats: int) -> float:
    """Median wall-clock seconds of ``repeats`` calls of ``fn``."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def scaleout_variants(num_gpus: int, n: int) -> list[SystemSpec]:
    """``n`` default clusters of ``num_gpus`` GPUs, scale-out bandwidth 10, 10.1, ... GB/s."""
    base = SystemSpec(num_gpus=num_gpus)
    return [replace(base, scaleout=replace(base.scaleout, bandwidth_GBps=10.0 + 0.1 * i))
            for i in range(n)]


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
