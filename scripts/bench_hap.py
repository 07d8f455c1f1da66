"""HAP's heterogeneous setting (Zhang et al., EuroSys 2024, Sec. 7.1): HAP's plan vs DP even split
(DP-EV) and DP split proportional to profiled speed (DP-CP), on 2x8 V100 + 6x8 P100 at ~10.4 Gb/s
between machines (``conf/system/mixed_v100_p100.yaml``), BERT-base and ViT-base built from the
transformer workload family's spec, fp32, global batch 32 per GPU (HAP's weak-scaling default).

Assumed [R] where the paper's setting is not known: DGX-1 class machines with one 10.4 Gb/s link
each; every GPU's sustained fraction of peak set so that the calibrated kernels reproduce HAP's
profiled whole-step FLOP/s (3.86e12 V100, 2.15e12 P100, from its AE configs: reference §1.4);
BERT-base and ViT as a bidirectional transformer of this family (no pooler, ViT's 65 tokens =
64 patches + class token, 10 classes as the "vocabulary").

Two cost models are printed: HAP's own (sum over instructions of the slowest device's compute
plus the slowest collective, no overlap: :mod:`simcore.hetero.hap`), and the simulator's engine
(per-device kernels, NCCL model, DP gradient reduction overlapped with backward) for the
data-parallel plans. Run: ``PYTHONPATH=. python scripts/bench_hap.py``.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
from hydra import compose, initialize_config_dir

from search.config.build import build_system
from simcore.api import simulate_batch
from simcore.hetero.hap import hap_plan, instructions, plan_cost, profiled_ratios
from simcore.specs.parallel import ParallelSpec
from simcore.specs.system import SystemSpec
from simcore.workloads.transformer.spec import ModelSpec

CONF = Path(__file__).resolve().parents[1] / "conf"
HAP_FLOPS = {"v100_32g": 3.86, "p100_16g": 2.15}  # TFLOP/s profiled by HAP (fp32, whole step)
MODELS = {
    "BERT-base": ModelSpec(name="bert_base", num_layers=12, hidden_size=768, num_heads=12,
                           seq_len=128, vocab_size=30522),
    "ViT-base": ModelSpec(name="vit_base", num_layers=12, hidden_size=768, num_heads=12,
                          seq_len=65, vocab_size=10),
}


def hap_cluster() -> SystemSpec:
    """``system=mixed_v100_p100`` with each pool's sustained fraction matched to HAP's FLOP/s."""
    with initialize_config_dir(config_dir=str(CONF), version_base=None):
        s = build_system(compose(config_name="config", overrides=["system=mixed_v100_p100"]))
    pools = []
    for d in s.devices:
        assert d.accelerator is not None and d.calibration is not None
        frac = HAP_FLOPS[d.accelerator.name] / d.accelerator.peak_tflops_fp32
        pools.append(replace(d, calibration=replace(d.calibration,
                                                    sustained_compute_fraction=round(frac, 4))))
    return replace(s, pools=tuple(pools))


def main() -> None:
    system = hap_cluster()
    n = system.num_gpus
    print("| model | plan | ratio V100 : P100 (x even) | HAP cost model s | speed-up vs DP-EV "
          "| engine s (overlap) | engine speed-up |")
    print("|---|---|---|---|---|---|---|")
    for label, model in MODELS.items():
        gb = 32 * n
        ins, counts = instructions(model, system, gb, "fp32")
        dp = tuple("allreduce" for _ in ins)
        plans = {"DP-EV": (dp, np.full(len(counts), 1.0 / n)),
                 "DP-CP": (dp, profiled_ratios(ins, counts))}
        hap = hap_plan(ins, counts)
        plans["HAP"] = (hap.choice, hap.ratios)
        par = ParallelSpec(global_batch=gb, micro_batch=32, precision="fp32")
        engine = {k: float(simulate_batch(model, replace(par, work_split=w), [system])
                           .iteration_time_s[0])
                  for k, w in (("DP-EV", "even"), ("DP-CP", "proportional"),
                               ("HAP", "balanced"))}
        base = plan_cost(ins, *plans["DP-EV"])
        for name, (choice, ratios) in plans.items():
            t = plan_cost(ins, choice, ratios)
            r = ratios * n
            methods = ",".join(sorted(set(choice)))
            print(f"| {label} | {name} ({methods}) | {r[0]:.2f} : {r[1]:.2f} | {t:.3f} | "
                  f"{base / t:.2f}x | {engine[name]:.3f} | {engine['DP-EV'] / engine[name]:.2f}x |")


if __name__ == "__main__":
    main()
