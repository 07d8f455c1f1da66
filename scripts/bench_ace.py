"""ACE's headline (Rashidi et al., ISCA 2021) in direction and rough size: iteration time of
ResNet-50, GNMT and DLRM with the ACE collectives engine against the best endpoint baseline, and
the HBM bandwidth needed to drive the network with and without ACE.

Baselines, as reference/methods-hap-ace-echo.md §2.2 and §2.3(d) describe them:

* CommOpt: collectives get enough SMs to drive the network (32 SMs, NCCL's most channels,
  ``NCCL_MAX_NCHANNELS``: 320 GB/s at 10 GB/s per SM) and the HBM they need first
  (``hbm_priority: collective``, at most half of it); overlapped compute slows down;
* CompOpt: collectives get the fewest SMs (2, the reference's "1-2 SMs": 20 GB/s) and only the
  HBM compute leaves (``hbm_priority: compute``): the network is under-used;
* NoOverlap: gradients are all-reduced after the backward (``parallel.dp_overlap=false``) with
  CommOpt's SMs; nothing is slowed, nothing is hidden;
* ACE: the offload engine (no SMs, one HBM read and write of the payload; 1 TB/s ALU and port);
* ideal: collectives take nothing from the endpoint.

The speed-up is the best baseline over ACE. Mechanisms (simcore/fidelity/contention.py): a
collective holds its SMs while in flight; compute-bound kernels beside it run on the SMs left,
memory-bound ones (batch norm, activations, lookups) on the HBM left; the collective runs no
faster than its SMs (``k r``), or the HBM it gets over its bytes per network byte (``M_c / mu``),
allow. The mechanism table prints, per case, the network GB/s the collectives reach on the
CommOpt baseline and with ACE (wire bytes over collective time, summed over the graph's
collective templates), the per-NPU fabric bandwidth ``W``, the baseline's HBM bound ``M_c / mu``
(all-reduce) and the slowdown of overlapped compute (CommOpt, ACE). In setting 1 collectives are
costed per dimension (below); in setting 2 by the calibrated NCCL-aware model.

Contention parameters, unchanged from ``conf/system/endpoint/default.yaml`` (not tuned here):
10 GB/s of network traffic per SM (assumed: NCCL's ~240 GB/s over ~24 channels on DGX A100),
``mu`` 5 per reduced and 2 per copied byte (ACE §2.3(a)), half the usable HBM at most for a
collective beside compute, CommOpt 32 SMs, CompOpt 2 SMs.

Setting 1, "ACE-like" (the main table). ACE simulated NPUs on a multi-dimensional fabric (an
intra-package local dimension plus inter-package dimensions, 100s of GB/s per NPU; §2.1) whose
sizes and bandwidths our reference does not give. Assumed here:

* topology: ASTRA-sim's own three-dimensional example system, Ring(2, 200 GB/s, 50 ns) x
  FullyConnected(8, 100 GB/s, 500 ns) x Switch(4, 50 GB/s, 2000 ns), 64 NPUs
  (``input/Ring_FullyConnected_Switch.yml`` of astra-network-analytical;
  reference/astra-sim-and-chakra.md §2.2), as a true 3-D fabric: the package (2 NPUs) is
  ``scaleup``, the two inter-package dimensions are ``scaleout_dims``; and its first two
  dimensions (16 NPUs). Collectives run as ASTRA-sim runs them (astra-sim-and-chakra.md §1.2,
  ``localBWAware``): one phase per dimension, each on that dimension's own bandwidth and latency
  (all-reduce: reduce-scatter up the dimensions, all-reduce on the last, all-gather back;
  all-to-all: one phase per dimension), ring on the Ring dimension and direct on the others,
  in 4 chunks pipelined through the phases (``preferred-dataset-splits`` 4, the splits of
  ASTRA-sim's example system configs, §5.1), so every dimension carries traffic at once and the
  endpoint's SMs and HBM must feed all of them (ACE §2.3(a)). The before table is the previous
  setting: the inter-package dimensions folded into one of their summed bandwidth (150 GB/s,
  the slower latency) and the NCCL-aware model (one ring across both levels);
* NPU: V100-class (125 TFLOP/s fp16, 900 GB/s HBM, 80 SMs; ``conf/system/accelerator/
  v100_32g.yaml``), the device of ACE's time, fp16; and A100-class (312 TFLOP/s, 2039 GB/s, 108
  SMs; ASTRA-sim 2.0's case studies assume an A100-class NPU, methods §4.2) in bf16;
* per-NPU mini-batches ResNet-50 32, GNMT 64, DLRM 512 (ACE's are not in our reference); DLRM
  with 64 tables placed over every NPU (``ep`` = NPUs; MLPerf's 26 do not split evenly);
* the fabric sweep scales every dimension's bandwidth by 1, 2, 4 (64 V100-class NPUs): ACE §2.3
  expects the gain to grow with ``W / M``; the last table varies ResNet-50's per-NPU batch on
  the 3-D fabric (a sensitivity, not a fit: ACE's batch is not in our reference).

Setting 2, "today's cluster": A100-class NPUs, 8 per node on a 300 GB/s scale-up dimension and
25 GB/s per NPU across nodes, 16 and 64 NPUs, the same batches. Compute is costed by the
calibrated kernel models with the default (unfitted) calibration in both settings. Absolute times are the model's, not a
measurement. Run: PYTHONPATH=. python scripts/bench_ace.py
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import yaml

from simcore.api import compiled_workload, simulate_batch
from simcore.engine.evaluate import template_durations
from simcore.fidelity.calibrated import CalibratedFidelity
from simcore.fidelity.contention import (
    _collective_templates,
    engines,
    hbm_per_wire_byte,
    stacked_wire_fraction,
)
from simcore.hardware.batch import SystemBatch
from simcore.ir.graph import CommType
from simcore.specs.collective import CollectiveSpec
from simcore.specs.endpoint import EndpointSpec
from simcore.specs.parallel import ParallelSpec
from simcore.specs.system import AcceleratorSpec, SystemSpec, TopologyDimSpec
from simcore.workloads.cnn.spec import ResNetSpec
from simcore.workloads.recsys.family import DLRMSpec
from simcore.workloads.rnn.family import GNMTSpec

COMM_OPT_SMS = 32
COMP_OPT_SMS = 2
_ACC = Path(__file__).resolve().parents[1] / "conf" / "system" / "accelerator"
V100 = AcceleratorSpec(**yaml.safe_load((_ACC / "v100_32g.yaml").read_text()))
A100 = AcceleratorSpec()
NPUS = {"V100": (V100, 80, "fp16"), "A100": (A100, 108, "bf16")}
# ASTRA-sim's Ring(2, 200) x FC(8, 100) x Switch(4, 50) example (input/Ring_FullyConnected_Switch.yml)
LOCAL = TopologyDimSpec("Ring", 0, 200.0, 50.0)
INTER = (TopologyDimSpec("FullyConnected", 8, 100.0, 500.0),
         TopologyDimSpec("Switch", 4, 50.0, 2000.0))
_PER_DIM = ("ring", "direct")  # ring on the Ring dimension, direct on the inter-package ones
HIERARCHICAL = CollectiveSpec(name="astra_hierarchical", all_reduce=_PER_DIM,
                              reduce_scatter=_PER_DIM, all_gather=_PER_DIM,
                              all_to_all=_PER_DIM, chunks_per_collective=4)


def ace_like(n: int, npu: str, scale: float = 1.0, folded: bool = False) -> SystemSpec:
    """Setting 1: ``n`` NPUs (16 or 64) of ``npu`` on ASTRA-sim's 3-D example fabric, bandwidths
    x scale: the inter-package dimensions stacked (``scaleout_dims``, per-dimension collectives)
    or, ``folded``, merged into one of their summed bandwidth with the NCCL-aware model."""
    acc, sms, _ = NPUS[npu]
    inter = INTER[:1] if n == 16 else INTER
    up = replace(LOCAL, bandwidth_GBps=LOCAL.bandwidth_GBps * scale)
    common = dict(name=f"ace_like_{npu}", num_gpus=n, gpus_per_node=2, accelerator=acc,
                  scaleup=up, endpoint=EndpointSpec("endpoint", sms=sms))
    if folded:
        return SystemSpec(**common, scaleout=TopologyDimSpec(  # type: ignore[arg-type]
            "Switch", 0, sum(d.bandwidth_GBps for d in inter) * scale,
            max(d.latency_ns for d in inter)))
    dims = tuple(replace(d, bandwidth_GBps=d.bandwidth_GBps * scale) for d in inter)
    if len(dims) == 1:
        return SystemSpec(**common, scaleout=replace(dims[0], size=0),  # type: ignore[arg-type]
                          collective=HIERARCHICAL)
    return SystemSpec(**common, scaleout_dims=dims,  # type: ignore[arg-type]
                      collective=HIERARCHICAL)


def todays(n: int) -> SystemSpec:
    """Setting 2: A100-class NPUs, 8 per node at 300 GB/s, 25 GB/s between nodes."""
    return SystemSpec(num_gpus=n)


def _engines(sms: int, comp_sms: int) -> dict[str, EndpointSpec]:
    return {
        "comm": EndpointSpec("endpoint", comm_sm_fraction=COMM_OPT_SMS / sms, sms=sms),
        "comp": EndpointSpec("endpoint", comm_sm_fraction=comp_sms / sms, sms=sms,
                             hbm_priority="compute"),
        "ace": EndpointSpec("ace", sms=sms),
        "ideal": EndpointSpec("ideal", sms=sms),
    }


def times_ms(model: object, par: ParallelSpec, base: SystemSpec,
             comp_sms: int = COMP_OPT_SMS) -> dict[str, float]:
    """Iteration time (ms) of every baseline, ACE and the ideal endpoint on ``base``."""
    engs = _engines(base.endpoint.sms, comp_sms)
    res = simulate_batch(model, par, [replace(base, endpoint=e) for e in engs.values()])
    out = {k: float(t) * 1e3 for k, t in zip(engs, res.iteration_time_s, strict=True)}
    no_overlap = simulate_batch(model, replace(par, dp_overlap=False),
                                [replace(base, endpoint=engs["comm"])])
    out["none"] = float(no_overlap.iteration_time_s[0]) * 1e3
    return out


def mechanism(model: object, par: ParallelSpec, base: SystemSpec) -> dict[str, float]:
    """Network GB/s the collectives reach (CommOpt, ACE: wire bytes over stretched collective
    time, over all collective templates), and the overlapped compute slowdown (CommOpt, ACE)."""
    engs = _engines(base.endpoint.sms, COMP_OPT_SMS)
    systems = [replace(base, endpoint=engs[k]) for k in ("comm", "ace")]
    par = par.resolve(base.num_gpus)
    cw = compiled_workload(model, par, systems[0])
    sb = SystemBatch.from_specs(systems)
    fid = CalibratedFidelity()
    tdur = fid.durations(cw, sb, systems, par)
    slow = fid.overlap_slowdown(sb, cw, par, tdur)
    wire, busy = 0.0, np.zeros(2)
    templates = _collective_templates(cw, engines(sb), systems)
    for t, w, _ in templates:
        wire += float(np.max(w))  # both systems have the same topology
        busy += tdur[t]
    net_only = template_durations(cw, sb, par.precision)
    busy_net = sum(float(net_only[t, 0]) for t, _, _ in templates)
    return {"comm_GBps": wire / busy[0] / 1e9, "ace_GBps": wire / busy[1] / 1e9,
            "net_GBps": wire / busy_net / 1e9,
            "comm_slow": float(slow[0]), "ace_slow": float(slow[1])}


def cases(n: int, precision: str) -> list[tuple[str, object, ParallelSpec]]:
    return [("ResNet-50", ResNetSpec(),
             ParallelSpec(micro_batch=32, global_batch=32 * n, precision=precision)),
            ("GNMT", GNMTSpec(),
             ParallelSpec(micro_batch=64, global_batch=64 * n, precision=precision)),
            ("DLRM", DLRMSpec(num_tables=64),
             ParallelSpec(micro_batch=512, global_batch=512 * n, ep=n, precision=precision))]


def _speedup(t: dict[str, float]) -> float:
    return min(t["comm"], t["comp"], t["none"]) / t["ace"]


def _hbm_bound_GBps(base: SystemSpec) -> float:
    """CommOpt's all-reduce rate the HBM allows beside compute: ``share M_usable / mu``."""
    ep = base.endpoint
    m = base.accelerator.hbm_bandwidth_GBps * base.calibration.hbm_efficiency
    return ep.comm_hbm_share * m / hbm_per_wire_byte(ep, int(CommType.ALL_REDUCE),
                                                     base.num_gpus)


def _row(t: dict[str, float]) -> str:
    return (f"{t['comm']:.2f} | {t['comp']:.2f} | {t['none']:.2f} | {t['ace']:.2f} | "
            f"{t['ideal']:.2f} | {_speedup(t):.2f}x")


PAPER = {"ResNet-50": "1.41x (up to 1.51x)", "GNMT": "1.12x (up to 1.17x)",
         "DLRM": "1.13x (up to 1.19x)"}


def main() -> None:
    print("Setting 1 (ACE-like): ASTRA-sim's Ring(2,200) x FC(8,100) x Switch(4,50) fabric as a "
          "true 3-D fabric, per-dimension collectives in 4 chunks\n")
    print("| NPU | workload | NPUs | CommOpt ms | CompOpt ms | NoOverlap ms | ACE ms | ideal ms "
          "| ACE over best baseline | paper |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    before: dict[tuple[str, str, int], float] = {}
    after: dict[tuple[str, str, int], float] = {}
    mech_rows = []
    for npu, (_, _, prec) in NPUS.items():
        for n in (16, 64):
            base = ace_like(n, npu)
            folded = ace_like(n, npu, folded=True)
            for name, model, par in cases(n, prec):
                t = times_ms(model, par, base)
                after[npu, name, n] = _speedup(t)
                before[npu, name, n] = _speedup(times_ms(model, par, folded))
                paper = PAPER[name] if (npu, n) == ("V100", 16) else ""
                print(f"| {npu} | {name} | {n} | {_row(t)} | {paper} |")
                if n == 64:
                    mech_rows.append((npu, name, base, mechanism(model, par, base)))
    print("\nBefore / after, ACE over the best baseline (before: inter-package dims folded into "
          "one, NCCL-aware ring across both levels):\n")
    print("| NPU | workload | NPUs | folded 2-level, before | 3-D per-dimension, after | paper |")
    print("|---|---|---|---|---|---|")
    for (npu, name, n), a in after.items():
        print(f"| {npu} | {name} | {n} | {before[npu, name, n]:.2f}x | {a:.2f}x | "
              f"{PAPER[name]} |")
    print("\nMechanism, 64 NPUs (W = 350 GB/s per NPU: 200 local + 100 + 50 inter-package):\n")
    print("| NPU | workload | network-only GB/s | CommOpt GB/s | ACE GB/s | CommOpt HBM bound "
          "GB/s | compute slowdown CommOpt | compute slowdown ACE |")
    print("|---|---|---|---|---|---|---|---|")
    for npu, name, base, m in mech_rows:
        print(f"| {npu} | {name} | {m['net_GBps']:.0f} | {m['comm_GBps']:.0f} | "
              f"{m['ace_GBps']:.0f} | {_hbm_bound_GBps(base):.0f} | {m['comm_slow']:.1%} | "
              f"{m['ace_slow']:.1%} |")
    print("\nFabric sweep, 64 V100-class NPUs, 3-D (every dimension's bandwidth x scale; "
          "ACE over best baseline):\n")
    print("| scale | W GB/s per NPU | W / M | ResNet-50 | GNMT | DLRM | ResNet-50 CommOpt GB/s |")
    print("|---|---|---|---|---|---|---|")
    for scale in (1.0, 2.0, 4.0):
        base = ace_like(64, "V100", scale)
        w = 350.0 * scale
        row = [_speedup(times_ms(model, par, base)) for _, model, par in cases(64, "fp16")]
        rn = cases(64, "fp16")[0]
        m = mechanism(rn[1], rn[2], base)
        print(f"| {scale:g} | {w:.0f} | {w / V100.hbm_bandwidth_GBps:.2f} | {row[0]:.2f}x | "
              f"{row[1]:.2f}x | {row[2]:.2f}x | {m['comm_GBps']:.0f} |")
    print("\nSetting 2 (today's cluster): A100, 8 per node at 300 GB/s, 25 GB/s across nodes\n")
    print("| workload | NPUs | CommOpt ms | CompOpt ms | NoOverlap ms | ACE ms | ideal ms "
          "| ACE over best baseline |")
    print("|---|---|---|---|---|---|---|---|")
    for n in (16, 64):
        for name, model, par in cases(n, "bf16"):
            print(f"| {name} | {n} | {_row(times_ms(model, par, todays(n)))} |")
    w = 350.0
    fabric = ace_like(64, "V100")
    print(f"\nHBM GB/s to drive W = {w:.0f} GB/s on the 64-NPU 3-D fabric (endpoint / ACE):")
    for label, ct in (("all-reduce", CommType.ALL_REDUCE), ("all-to-all", CommType.ALL_TO_ALL)):
        wire = stacked_wire_fraction(int(ct), 64, 2, fabric)
        mu_base = hbm_per_wire_byte(EndpointSpec("endpoint"), int(ct), 64, wire)
        mu_ace = hbm_per_wire_byte(EndpointSpec("ace"), int(ct), 64, wire)
        print(f"  {label} ({wire:.3f} D on the wire over its phases): {mu_base * w:.0f} / "
              f"{mu_ace * w:.0f} ({mu_base / mu_ace:.2f}x less with ACE)")
    print("\nResNet-50, 64 NPUs, 3-D fabric, per-NPU batch sensitivity (ACE over best baseline; "
          "all-reduce share = NoOverlap over ideal - 1):\n")
    print("| per-NPU batch | V100 | V100 all-reduce share | A100 | A100 all-reduce share |")
    print("|---|---|---|---|---|")
    for b in (32, 16, 8, 4, 2, 1):
        cells = []
        for npu, (_, _, prec) in NPUS.items():
            par = ParallelSpec(micro_batch=b, global_batch=b * 64, precision=prec)
            t = times_ms(ResNetSpec(), par, ace_like(64, npu))
            cells.append(f"{_speedup(t):.2f}x | {t['none'] / t['ideal'] - 1:.0%}")
        print(f"| {b} | {' | '.join(cells)} |")


if __name__ == "__main__":
    main()
