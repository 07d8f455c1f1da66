"""HAP's heterogeneous setting (Zhang et al., EuroSys 2024, Sec. 7.1): HAP's plan vs DP even split
(DP-EV) and DP split proportional to profiled speed (DP-CP), on 2x8 V100 + 6x8 P100 at ~10.4 Gb/s
between machines (``conf/system/mixed_v100_p100.yaml``), on three of HAP's four models: VGG19
(CIFAR-10), BERT-base and ViT-base, fp32, global batch 32 per GPU (HAP's weak-scaling default;
AE readme, reference §1.7). The HAP plan is printed twice: with the data-parallel methods only
(the ratio LP alone) and with every method (per-weight choice of all-reduce, RS+AG padded /
grouped, SFB, feature sharding).

Assumed [R] where the paper's setting is not known: DGX-1 class machines with one 10.4 Gb/s link
each; every GPU's sustained fraction of peak set so that the calibrated kernels reproduce HAP's
profiled whole-step FLOP/s (3.86e12 V100, 2.15e12 P100, from its AE configs: reference §1.4);
BERT-base and ViT as a bidirectional transformer of this family (no pooler, ViT's 65 tokens =
64 patches + class token, 10 classes as the "vocabulary"); VGG19 as torchvision's (no batch
norm, adaptive 7x7 average pool, classifier 25088-4096-4096-10) on 32x32 images: 139.6 M
parameters of which 119.6 M in the classifier, 0.52 G multiply-accumulates per image.

Two cost models are printed: HAP's own (sum over instructions of the slowest device's compute
plus the slowest collective, no overlap: :mod:`simcore.hetero.hap`), and the simulator's engine
(per-device kernels, NCCL model, DP gradient reduction overlapped with backward) for the
data-parallel plans (the engine has no VGG workload family: VGG19 rows show ``-``).
Run: ``PYTHONPATH=. python scripts/bench_hap.py``.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
from hydra import compose, initialize_config_dir

from search.config.build import build_system
from simcore.api import simulate_batch
from simcore.hetero.hap import (
    METHODS,
    Instruction,
    hap_plan,
    instructions,
    plan_cost,
    profiled_ratios,
    vgg_instructions,
)
from simcore.specs.parallel import ParallelSpec
from simcore.specs.system import SystemSpec
from simcore.workloads.cnn.vgg import vgg_layers
from simcore.workloads.transformer.spec import ModelSpec

CONF = Path(__file__).resolve().parents[1] / "conf"
HAP_FLOPS = {"v100_32g": 3.86, "p100_16g": 2.15}  # TFLOP/s profiled by HAP (fp32, whole step)
DP_METHODS = METHODS[:3]
PER_GPU = 32
MODELS: dict[str, ModelSpec | None] = {
    "VGG19": None,
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


def _engine(model: ModelSpec | None, system: SystemSpec, gb: int) -> dict[str, float]:
    if model is None:
        return {}
    par = ParallelSpec(global_batch=gb, micro_batch=PER_GPU, precision="fp32")
    return {k: float(simulate_batch(model, replace(par, work_split=w), [system])
                     .iteration_time_s[0])
            for k, w in (("DP-EV", "even"), ("DP-CP", "proportional"),
                         ("HAP (LP, DP methods)", "balanced"))}


def _instructions(model: ModelSpec | None, system: SystemSpec, gb: int
                  ) -> tuple[list[Instruction], np.ndarray]:
    if model is None:
        return vgg_instructions(vgg_layers(19, 32, 10), system, gb, "fp32")
    return instructions(model, system, gb, "fp32")


def main() -> None:
    system = hap_cluster()
    n = system.num_gpus
    print("| model | plan | methods other than all-reduce | ratio V100 : P100 (x even) "
          "| HAP cost model s | speed-up vs DP-EV | engine s (overlap) | engine speed-up |")
    print("|---|---|---|---|---|---|---|---|")
    for label, model in MODELS.items():
        gb = PER_GPU * n
        ins, counts = _instructions(model, system, gb)
        dp = tuple("allreduce" for _ in ins)
        plans = {"DP-EV": (dp, np.full(len(counts), 1.0 / n)),
                 "DP-CP": (dp, profiled_ratios(ins, counts))}
        for name, methods in (("HAP (LP, DP methods)", DP_METHODS), ("HAP", METHODS)):
            plan = hap_plan(ins, counts, methods)
            plans[name] = (plan.choice, plan.ratios)
        engine = _engine(model, system, gb)
        base = plan_cost(ins, *plans["DP-EV"])
        for name, (choice, ratios) in plans.items():
            t = plan_cost(ins, choice, ratios)
            r = ratios * n
            other = ", ".join(f"{i.name}: {c}" for i, c in zip(ins, choice, strict=True)
                              if c != "allreduce") or "-"
            # a plan of data-parallel methods only runs in the engine as the balanced split
            key = ("HAP (LP, DP methods)" if name == "HAP" and set(choice) <= set(DP_METHODS)
                   else name)
            eng = (f"{engine[key]:.3f} | {engine['DP-EV'] / engine[key]:.2f}x"
                   if key in engine else "- | -")
            print(f"| {label} | {name} | {other} | {r[0]:.2f} : {r[1]:.2f} | {t:.3f} | "
                  f"{base / t:.2f}x | {eng} |")
    print()
    print("VGG19, HAP cost model, speed-up over DP-EV by images per GPU (HAP's default: 32)")
    print()
    print("| images per GPU | DP-CP | HAP (LP, DP methods) | HAP | HAP's methods |")
    print("|---|---|---|---|---|")
    for per in (8, 16, 32, 64):
        ins, counts = vgg_instructions(vgg_layers(19, 32, 10), system, per * n, "fp32")
        dp = tuple("allreduce" for _ in ins)
        even = plan_cost(ins, dp, np.full(len(counts), 1.0 / n))
        prop = plan_cost(ins, dp, profiled_ratios(ins, counts))
        lp, hap = hap_plan(ins, counts, DP_METHODS), hap_plan(ins, counts)
        other = ", ".join(f"{i.name}: {c}" for i, c in zip(ins, hap.choice, strict=True)
                          if c != "allreduce") or "-"
        print(f"| {per} | {even / prop:.2f}x | {even / lp.iteration_s:.2f}x | "
              f"{even / hap.iteration_s:.2f}x | {other} |")


if __name__ == "__main__":
    main()
