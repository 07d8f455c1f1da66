"""ACE's headline (Rashidi et al., ISCA 2021) in direction and rough size: iteration time of
ResNet-50, GNMT and DLRM with the ACE collectives engine against the best endpoint baseline, and
the HBM bandwidth needed to drive the network with and without ACE.

Baselines, as reference/methods-hap-ace-echo.md §2.2 and §2.3(d) describe them:

* CommOpt: collectives get enough SMs to drive the network (32 of 108 SMs, NCCL's most channels
  on A100: 320 GB/s at 10 GB/s per SM, above the 300 GB/s scale-up line) and the HBM they need
  first (``hbm_priority: collective``, at most half of it); overlapped compute slows down;
* CompOpt: collectives get the fewest SMs (2, the reference's "1-2 SMs": 20 GB/s) and only the
  HBM compute leaves (``hbm_priority: compute``): the network is under-used;
* NoOverlap: gradients are all-reduced after the backward (``parallel.dp_overlap=false``) with
  CommOpt's SMs; nothing is slowed, nothing is hidden;
* ACE: the offload engine (no SMs, one HBM read and write of the payload; 1 TB/s ALU and port);
* ideal: collectives take nothing from the endpoint.

The speed-up is the best baseline over ACE. Mechanisms (simcore/fidelity/contention.py): a
collective holds its SMs while in flight; compute-bound kernels beside it run on the SMs left,
memory-bound ones (batch norm, activations, lookups) on the HBM left; the collective runs no
faster than its SMs, or the HBM it gets, allow.

Assumed setting (ACE's topology sizes, link bandwidths, NPU resources, per-NPU mini-batches and
compute model are not in our reference, §2.1 and §7): A100-class NPUs (312 TFLOP/s, 2039 GB/s
HBM, 108 SMs) costed by the calibrated kernel models, 8 per node on a 300 GB/s scale-up dimension
and 25 GB/s per NPU across nodes (two dimensions, not ACE's 3-D torus), 16 and 64 NPUs; per-NPU
batches ResNet-50 32, GNMT 64, DLRM 512; DLRM with 64 tables (MLPerf's 26 do not split evenly
over 16 or 64 NPUs; ACE's table count is not in our reference) placed over every NPU (``ep`` =
NPUs); 10 GB/s of network traffic per SM (``collective_GBps_per_sm``, assumed from NCCL's
~240 GB/s over ~24 channels on DGX A100). The second table varies the two settings the ResNet-50
gap depends on most (per-NPU batch and CompOpt's SMs); it is a sensitivity, not a fit.
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

SMS = 108
COMM_OPT_SMS = 32
COMP_OPT_SMS = 2


def _engines(comp_sms: int) -> dict[str, EndpointSpec]:
    return {
        "comm": EndpointSpec("endpoint", comm_sm_fraction=COMM_OPT_SMS / SMS),
        "comp": EndpointSpec("endpoint", comm_sm_fraction=comp_sms / SMS, hbm_priority="compute"),
        "ace": EndpointSpec("ace"),
        "ideal": EndpointSpec("ideal"),
    }


def times_ms(model: object, par: ParallelSpec, n: int, comp_sms: int = COMP_OPT_SMS
             ) -> dict[str, float]:
    """Iteration time (ms) of every baseline, ACE and the ideal endpoint."""
    base = SystemSpec(num_gpus=n)
    engines = _engines(comp_sms)
    res = simulate_batch(model, par, [replace(base, endpoint=e) for e in engines.values()])
    out = {k: float(t) * 1e3 for k, t in zip(engines, res.iteration_time_s, strict=True)}
    no_overlap = simulate_batch(model, replace(par, dp_overlap=False),
                                [replace(base, endpoint=engines["comm"])])
    out["none"] = float(no_overlap.iteration_time_s[0]) * 1e3
    return out


def main() -> None:
    print("| workload | NPUs | CommOpt ms | CompOpt ms | NoOverlap ms | ACE ms | ideal ms "
          "| ACE over best baseline |")
    print("|---|---|---|---|---|---|---|---|")
    for n in (16, 64):
        cases = [("ResNet-50", ResNetSpec(), ParallelSpec(micro_batch=32, global_batch=32 * n)),
                 ("GNMT", GNMTSpec(), ParallelSpec(micro_batch=64, global_batch=64 * n)),
                 ("DLRM", DLRMSpec(num_tables=64),
                  ParallelSpec(micro_batch=512, global_batch=512 * n, ep=n))]
        for name, model, par in cases:
            t = times_ms(model, par, n)
            best = min(t["comm"], t["comp"], t["none"])
            print(f"| {name} | {n} | {t['comm']:.2f} | {t['comp']:.2f} | {t['none']:.2f} | "
                  f"{t['ace']:.2f} | {t['ideal']:.2f} | {best / t['ace']:.2f}x |")
    ar = int(CommType.ALL_REDUCE)
    mu_base = hbm_per_wire_byte(EndpointSpec("endpoint"), ar, 8)
    mu_ace = hbm_per_wire_byte(EndpointSpec("ace"), ar, 8)
    w = 300.0
    print(f"\nHBM GB/s to drive {w:.0f} GB/s of all-reduce traffic: endpoint {mu_base * w:.0f}, "
          f"ACE {mu_ace * w:.0f} ({mu_base / mu_ace:.1f}x less)")
    print("\nResNet-50 on 64 NPUs, sensitivity (ACE over best baseline):\n")
    print("| per-NPU batch | CompOpt 2 SMs | CompOpt 7 SMs | ACE over ideal (time) | compute ms |")
    print("|---|---|---|---|---|")
    n = 64
    for b in (8, 16, 32, 64):
        par = ParallelSpec(micro_batch=b, global_batch=b * n)
        row = []
        for sms in (2, 7):
            t = times_ms(ResNetSpec(), par, n, comp_sms=sms)
            row.append(min(t["comm"], t["comp"], t["none"]) / t["ace"])
        res = simulate_batch(ResNetSpec(), par, [replace(SystemSpec(num_gpus=n),
                                                         endpoint=EndpointSpec("ideal"))])
        print(f"| {b} | {row[0]:.2f}x | {row[1]:.2f}x | {t['ace'] / t['ideal']:.2f}x | "
              f"{float(res.compute_s[0]) * 1e3:.2f} |")


if __name__ == "__main__":
    main()
