"""Shared helpers of the benchmark scripts: the models they time, median wall time, hardware
variants (seeded random, or a scale-out bandwidth sweep), the markdown table with the load it
was measured at."""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import yaml

import search
from search.config.build import build_model
from simcore.specs.system import SystemSpec
from simcore.workloads.transformer.spec import ModelSpec

#: the workload configs of the tree whose code runs (a benchmark's base checkout, imported
#: through PYTHONPATH, reads its own: a key added since would be unknown to its specs)
WORKLOADS = Path(search.__file__).resolve().parents[1] / "conf" / "workload"


def workload(name: str) -> ModelSpec:
    """The model of ``conf/workload/<name>.yaml``, as ``workload=<name>`` builds it."""
    return build_model({"workload": yaml.safe_load((WORKLOADS / f"{name}.yaml").read_text())})


#: GPT-3 175B (Brown et al. 2020) and Llama 3 405B (126 layers: no power-of-two pp above 2
#: divides them) as configured; Megatron-Turing NLG 530B (Smith et al. 2022), which has no config
GPT3 = workload("gpt3_175b")
LLAMA3_405B = workload("llama3_405b")
MTNLG = ModelSpec(name="mt_nlg_530b", num_layers=105, hidden_size=20480, num_heads=128,
                  seq_len=2048, vocab_size=51200)
#: GPT-3's plan of conf/parallel/megatron_tp8_pp8.yaml (with ParallelSpec(micro_batch=1,
#: sequence_parallel=True, recompute="selective", zero_stage=1)): the benchmarks' base plan
GPT3_TP8_PP8: dict[str, Any] = {"tp": 8, "pp": 8, "global_batch": 1536}


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
