"""Benchmark of the LLM path: GPT-3 175B on 1,024 GPUs and a 16,384-GPU case.

For each case: graph size (nodes -> chains -> levels), cold time of the first point (graph
generation + compile + evaluation), warm time of one point (structure cached), and the
throughput of a batch of 1,024 hardware variants (scale-out bandwidth, peak FLOP/s and HBM
bandwidth varied), with the per-point speed-up of batching over warm single points (the
baseline, same run). Medians of repeated runs. Usage: ``python scripts/bench_llm.py``.
"""

from __future__ import annotations

import time

from _bench_util import GPT3, hardware_variants, median_s

from simcore.api import _compiled, check_structure, simulate_batch
from simcore.specs.parallel import ParallelSpec
from simcore.specs.system import SystemSpec

CASES = [
    ("GPT-3 175B, 1,024 GPUs, TP8 PP8 DP16, 1F1B, gb 1536", GPT3,
     ParallelSpec(tp=8, pp=8, micro_batch=1, global_batch=1536, sequence_parallel=True,
                  recompute="selective", zero_stage=1), 1024),
    ("GPT-3 175B, 16,384 GPUs, TP8 PP16 DP128, 1F1B, gb 4096", GPT3,
     ParallelSpec(tp=8, pp=16, micro_batch=1, global_batch=4096, sequence_parallel=True,
                  recompute="selective", zero_stage=1), 16384),
]




def main() -> None:
    """Run every case and print the table."""
    header = (f"{'case':<56}{'nodes':>8}{'chains':>8}{'levels':>7}{'cold s':>8}"
              f"{'warm s/pt':>11}{'B=1024 s':>10}{'pts/s':>8}{'speed-up':>9}{'iter s':>8}")
    print(header)
    print("-" * len(header))
    for title, model, par, gpus in CASES:
        system = SystemSpec(num_gpus=gpus)
        _compiled.cache_clear()
        t0 = time.perf_counter()
        first = simulate_batch(model, par, [system])
        cold = time.perf_counter() - t0
        resolved, _ = check_structure(model, par, system)
        assert resolved is not None
        cw = _compiled(model, resolved, system.gpus_per_node)
        warm = median_s(lambda: simulate_batch(model, par, [system]), 5)  # noqa: B023
        systems = hardware_variants(system, 1024)
        batch = median_s(lambda: simulate_batch(model, par, systems), 3)  # noqa: B023
        per = batch / 1024
        cond = getattr(cw.workload, "condensed", None)  # node count without building nodes
        nodes = cond.chains.num_nodes if cond is not None else cw.workload.graph.num_nodes
        print(f"{title:<56}{nodes:>8}{cw.plan.num_chains:>8}{cw.plan.num_levels:>7}"
              f"{cold:>8.2f}{warm:>11.4f}{batch:>10.2f}{1 / per:>8.0f}{warm / per:>8.1f}x"
              f"{first.iteration_time_s[0]:>8.2f}")


if __name__ == "__main__":
    main()
