"""Benchmark of the two fidelity modes of the LLM path (``calibrated`` vs ``astra``).

GPT-3 175B, TP8 PP8 DP16 on 1,024 A100-class GPUs: cold time of the first point (graph
generation + compile + evaluation; ``astra`` also re-orders and merges the comm streams and
derives the exporter's rings), warm time of one point, and a batch of 1,024 hardware variants.
The ``calibrated`` mode in the same run is the baseline. Medians of repeated runs.
Usage: ``python scripts/bench_fidelity.py``.
"""

from __future__ import annotations

import time

from _bench_util import GPT3, hardware_variants, median_s

from simcore.api import _compiled, simulate_batch
from simcore.specs.parallel import ParallelSpec
from simcore.specs.system import SystemSpec, TopologyDimSpec

PLAN = ParallelSpec(tp=8, pp=8, micro_batch=1, global_batch=1536, sequence_parallel=True,
                    recompute="selective", zero_stage=1)




def main() -> None:
    """Run both modes and print the table."""
    base = SystemSpec(name="a100", num_gpus=1024, gpus_per_node=8,
                      scaleup=TopologyDimSpec(kind="Switch", bandwidth_GBps=300.0, latency_ns=700.0),
                      scaleout=TopologyDimSpec(kind="Switch", bandwidth_GBps=25.0, latency_ns=2500.0))
    systems = hardware_variants(base, 1024)
    header = f"{'fidelity':<12}{'cold s':>9}{'warm s/pt':>11}{'B=1024 s':>10}{'pts/s':>9}{'iter s':>9}"
    print(header)
    print("-" * len(header))
    for mode in ("calibrated", "astra"):
        _compiled.cache_clear()
        t0 = time.perf_counter()
        first = simulate_batch(GPT3, PLAN, [base], mode)
        cold = time.perf_counter() - t0
        warm = median_s(lambda: simulate_batch(GPT3, PLAN, [base], mode), 5)  # noqa: B023
        batch = median_s(lambda: simulate_batch(GPT3, PLAN, systems, mode), 3)  # noqa: B023
        print(f"{mode:<12}{cold:>9.2f}{warm:>11.4f}{batch:>10.3f}{1024 / batch:>9.0f}"
              f"{float(first.iteration_time_s[0]):>9.3f}")


if __name__ == "__main__":
    main()
