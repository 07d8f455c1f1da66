"""ACE's headline (Rashidi et al., ISCA 2021) in direction and rough size: iteration time of
ResNet-50, GNMT and DLRM with the ACE collectives engine against the best endpoint baseline, and
the HBM bandwidth needed to drive the network with and without ACE.

Assumed setting (ACE's exact topology and bandwidths are not in our reference, §2.1): A100-class
NPUs (312 TFLOP/s, 2039 GB/s HBM), 8 per node on a 300 GB/s scale-up dimension and 25 GB/s per NPU
across nodes, 16 and 64 NPUs; per-NPU batches ResNet-50 32, GNMT 64, DLRM 512; DLRM with 64
tables (MLPerf's 26 do not split evenly over 16 or 64 NPUs; ACE's table count is not in our
reference) placed over every NPU (``ep`` = NPUs); baselines = the endpoint engine with a
comm-optimised (30% of the 108 SMs: 324 GB/s at the assumed 10 GB/s per SM, enough for the 300 GB/s
scale-up) and a compute-optimised (6%: 65 GB/s) split, best taken; ACE with 1 TB/s ALU and link.
Run: PYTHONPATH=. python scripts/bench_ace.py
"""

from __future__ import annotations

from dataclasses import replace

from simcore.api import simulate_batch
from simcore.fidelity.contention import hbm_per_wire_byte
from simcore.ir.graph import CommType
from simcore.specs.endpoint import EndpointSpec
from simcore.specs.parallel import ParallelSpec
from simcore.specs.system import SystemSpec
from simcore.workloads.cnn.spec import ResNetSpec
from simcore.workloads.recsys.family import DLRMSpec
from simcore.workloads.rnn.family import GNMTSpec


def main() -> None:
    print("| workload | NPUs | CommOpt ms | CompOpt ms | ACE ms | ideal ms | ACE speed-up |")
    print("|---|---|---|---|---|---|---|")
    for n in (16, 64):
        base = SystemSpec(num_gpus=n)
        cases = [("ResNet-50", ResNetSpec(), ParallelSpec(micro_batch=32, global_batch=32 * n)),
                 ("GNMT", GNMTSpec(), ParallelSpec(micro_batch=64, global_batch=64 * n)),
                 ("DLRM", DLRMSpec(num_tables=64),
                  ParallelSpec(micro_batch=512, global_batch=512 * n, ep=n))]
        for name, model, par in cases:
            t = {}
            for label, ep in [("comm", EndpointSpec("endpoint", comm_sm_fraction=0.30)),
                              ("comp", EndpointSpec("endpoint", comm_sm_fraction=0.06)),
                              ("ace", EndpointSpec("ace")), ("ideal", EndpointSpec("ideal"))]:
                res = simulate_batch(model, par, [replace(base, endpoint=ep)])
                t[label] = float(res.iteration_time_s[0]) * 1e3
            best = min(t["comm"], t["comp"])
            print(f"| {name} | {n} | {t['comm']:.2f} | {t['comp']:.2f} | {t['ace']:.2f} | "
                  f"{t['ideal']:.2f} | {best / t['ace']:.2f}x |")
    ar = int(CommType.ALL_REDUCE)
    mu_base = hbm_per_wire_byte(EndpointSpec("endpoint"), ar, 8)
    mu_ace = hbm_per_wire_byte(EndpointSpec("ace"), ar, 8)
    w = 300.0
    print(f"\nHBM GB/s to drive {w:.0f} GB/s of all-reduce traffic: endpoint {mu_base * w:.0f}, "
          f"ACE {mu_ace * w:.0f} ({mu_base / mu_ace:.1f}x less)")


if __name__ == "__main__":
    main()
