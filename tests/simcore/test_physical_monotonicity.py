"""Properties every plan must have, whatever the calibration: a faster part never makes an
iteration slower, and more work never makes it faster.

A co-design search reads the simulator as a function of the hardware: a point where more
scale-out bandwidth, HBM bandwidth or FLOP/s (or less link latency) gave a slower iteration
would steer it wrong (an algorithm choice or an overlap rule with a step in it). Checked on
plans that exercise each mechanism (SP, interleaving, CP rings, ZeRO 0-3 with and without DP
overlap, TP overlap as pieces and as blocks, MoE all-to-all blocking and in chunks, latent
attention), with both fidelities and with explicit collective algorithms; then recompute
(none <= selective <= full) and the global batch (more micro-batches, more time).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from simcore.api import simulate_batch
from simcore.specs.collective import CollectiveSpec
from simcore.specs.parallel import ParallelSpec
from simcore.specs.system import SystemSpec
from simcore.workloads.transformer.spec import ModelSpec

DENSE = ModelSpec(name="dense", num_layers=12, hidden_size=2048, num_heads=16, seq_len=2048,
                  vocab_size=32000)
MOE = ModelSpec(name="moe", num_layers=8, hidden_size=2048, num_heads=16, num_kv_heads=4,
                seq_len=2048, vocab_size=32000, mlp="swiglu", ffn_hidden_size=5632,
                num_experts=8, top_k=2, dropout=0.0)
MLA = replace(MOE, name="mla", num_kv_heads=None, kv_lora_rank=256, q_lora_rank=512,
              qk_nope_head_dim=64, qk_rope_head_dim=32, v_head_dim=64)
RING = CollectiveSpec(name="ring", all_reduce=("ring",), all_gather=("ring",),
                      reduce_scatter=("ring",), all_to_all=("direct",), chunks_per_collective=4)
HALVING = CollectiveSpec(name="hd", all_reduce=("halvingDoubling",),
                         all_gather=("halvingDoubling",), reduce_scatter=("halvingDoubling",),
                         all_to_all=("direct",))
IN_NETWORK = CollectiveSpec(name="inn", in_network=True)

#: (model, GPUs, plan, fidelity, collectives)
CASES: list[tuple[ModelSpec, int, dict[str, Any], str, CollectiveSpec]] = [
    (DENSE, 64, {"tp": 8, "pp": 2, "sequence_parallel": True, "zero_stage": 1}, "calibrated",
     CollectiveSpec()),
    (DENSE, 32, {"tp": 2, "pp": 4, "vp": 3, "zero_stage": 2, "dp_overlap": False},
     "calibrated", CollectiveSpec()),
    (DENSE, 32, {"tp": 2, "pp": 2, "zero_stage": 3}, "calibrated", CollectiveSpec()),
    (DENSE, 64, {"tp": 2, "cp": 2, "pp": 2, "sequence_parallel": True,
                 "tp_comm_overlap": True}, "calibrated", CollectiveSpec()),
    (DENSE, 32, {"tp": 4, "pp": 2, "sequence_parallel": True, "tp_comm_overlap": True,
                 "overlap_blocks": True}, "calibrated", CollectiveSpec()),
    (MOE, 32, {"tp": 2, "pp": 2, "ep": 4, "sequence_parallel": True, "zero_stage": 1},
     "calibrated", CollectiveSpec()),
    (MOE, 64, {"tp": 1, "pp": 4, "vp": 2, "ep": 2, "recompute": "selective"}, "calibrated",
     IN_NETWORK),
    (MOE, 32, {"tp": 2, "pp": 2, "ep": 4, "ep_overlap_chunks": 3}, "calibrated",
     CollectiveSpec()),
    (MOE, 32, {"tp": 2, "pp": 2, "ep": 4, "ep_overlap_chunks": 4, "overlap_blocks": True},
     "calibrated", CollectiveSpec()),
    (MLA, 32, {"tp": 2, "cp": 2, "ep": 2, "sequence_parallel": True}, "calibrated",
     CollectiveSpec()),
    (DENSE, 64, {"tp": 4, "pp": 2, "zero_stage": 1}, "calibrated", RING),
    (DENSE, 32, {"tp": 2, "pp": 2, "zero_stage": 2}, "astra", HALVING),
    (MOE, 32, {"tp": 2, "pp": 2, "ep": 2, "dp_overlap": False}, "astra", RING),
]
IDS = [f"{m.name}-{g}-{f}-{c.name}-" + "-".join(f"{k}{v}" for k, v in p.items())
       for m, g, p, f, c in CASES]
FACTORS = (1.0, 1.3, 2.0, 4.0)


def _variants(base: SystemSpec, axis: str) -> list[SystemSpec]:
    """``base`` with one hardware rate raised by each of :data:`FACTORS` (latency lowered)."""
    acc, up, out = base.accelerator, base.scaleup, base.scaleout
    make = {
        "scaleup_bandwidth": lambda f: replace(base, scaleup=replace(
            up, bandwidth_GBps=up.bandwidth_GBps * f)),
        "scaleout_bandwidth": lambda f: replace(base, scaleout=replace(
            out, bandwidth_GBps=out.bandwidth_GBps * f)),
        "scaleout_latency": lambda f: replace(base, scaleout=replace(
            out, latency_ns=out.latency_ns / f)),
        "hbm_bandwidth": lambda f: replace(base, accelerator=replace(
            acc, hbm_bandwidth_GBps=acc.hbm_bandwidth_GBps * f)),
        "peak_flops": lambda f: replace(base, accelerator=replace(
            acc, peak_tflops_bf16=acc.peak_tflops_bf16 * f)),
    }[axis]
    return [make(f) for f in FACTORS]


def _time_s(model: ModelSpec, plan: dict[str, Any], systems: list[SystemSpec],
            fidelity: str) -> np.ndarray:
    res = simulate_batch(model, ParallelSpec(**{"global_batch": 64, **plan}), systems,
                         fidelity)
    times = np.asarray(res.iteration_time_s, dtype=np.float64)
    assert np.isfinite(times).all() and (times > 0).all(), res.reason[0]
    return times


@pytest.mark.parametrize(("model", "gpus", "plan", "fidelity", "collective"), CASES, ids=IDS)
def test_a_faster_part_never_slows_the_iteration(model: ModelSpec, gpus: int,
                                                 plan: dict[str, Any], fidelity: str,
                                                 collective: CollectiveSpec) -> None:
    base = SystemSpec(num_gpus=gpus, collective=collective)
    spans: dict[str, float] = {}
    for axis in ("scaleup_bandwidth", "scaleout_bandwidth", "scaleout_latency",
                 "hbm_bandwidth", "peak_flops"):
        times = _time_s(model, plan, _variants(base, axis), fidelity)
        assert (np.diff(times) <= 1e-12 * times[:-1]).all(), (axis, times)
        spans[axis] = float(times[0] / times[-1])
    # the property is not met by a model blind to the hardware: FLOP/s always matters
    assert spans["peak_flops"] > 1.05, spans


@pytest.mark.parametrize(("model", "gpus", "plan", "fidelity", "collective"), CASES, ids=IDS)
def test_more_work_never_speeds_the_iteration(model: ModelSpec, gpus: int,
                                              plan: dict[str, Any], fidelity: str,
                                              collective: CollectiveSpec) -> None:
    systems = [SystemSpec(num_gpus=gpus, collective=collective)]
    by_mode = [float(_time_s(model, {**plan, "recompute": mode}, systems, fidelity)[0])
               for mode in ("none", "selective", "full")]
    assert by_mode[0] <= by_mode[1] <= by_mode[2], by_mode
    assert by_mode[2] > by_mode[0] * 1.05, by_mode  # a full forward more is not free
    by_batch = [float(_time_s(model, {**plan, "global_batch": 64 * k}, systems,
                              fidelity)[0]) for k in (1, 2, 3)]
    assert by_batch[0] < by_batch[1] < by_batch[2], by_batch
