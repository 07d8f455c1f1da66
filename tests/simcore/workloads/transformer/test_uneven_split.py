"""Uneven layer splits over pipeline stages against hand-derived 1F1B closed forms.

Two stages, three layers (L % pp != 0), free network, dp = 1, vocab 8. With per-layer forward
/ backward times ``f`` / ``b`` (from the engine's own template durations), a stage runs a
micro-batch forward in ``F_s`` and backward in ``B_s``. 1F1B on stage 0: F1, F2, B1, F3, B2, ...
Fm, B(m-1), Bm; stage 1: F1, B1, F2, B2, ... (Narayanan et al. 2021, Sec. 2.2.1).

* Heavy first stage (default split [2, 1]: the first chunk gets the extra layer). Stage 0 is
  never waiting except twice: before B1 it has only run F2 (F0) while stage 1 needed F1 + B1
  for micro-batch 1; before Bm it has only run B(m-1) (B0). Between every other F_i end and
  B_i start it runs B(i-1) + F(i+1) = F0 + B0 >= F1 + B1. So
  ``T = m (F0 + B0) + max(0, F1 + B1 - F0) + max(0, F1 + B1 - B0) + opt0``.
* Heavy last stage (override first_stage_layers=1, last_stage_layers=2): stage 1 starts after
  stage 0's first forward and then never waits (stage 0 is faster); stage 0's last backward
  follows, then the tied-embedding all-reduce (free) and stage 1's optimizer step:
  ``T = F0 + m (F1 + B1) + B0 + opt1`` = m x slowest stage + fill + drain.

Neither equals the uniform-stage formula ``(m + pp - 1) x slowest``, which the test rejects.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from simcore.api import compiled_workload, simulate_batch, structure_key
from simcore.engine.evaluate import template_durations
from simcore.hardware import SystemBatch
from simcore.memory import footprint_bytes
from simcore.memory.capacity import GIB
from simcore.specs.layer_split import chunk_layers, stage_layers
from simcore.specs.parallel import ParallelSpec
from simcore.specs.system import CalibrationSpec, SystemSpec, TopologyDimSpec
from simcore.workloads.transformer.spec import ModelSpec

CAL = CalibrationSpec(kernel_overhead_us=0.0, collective_base_latency_us=0.0,
                      collective_step_latency_us=0.0, scaleup_efficiency=1.0,
                      scaleout_efficiency=1.0, p2p_efficiency=1.0)
SYSTEM = SystemSpec(num_gpus=2, gpus_per_node=8, calibration=CAL,
                    scaleup=TopologyDimSpec(bandwidth_GBps=1e9, latency_ns=0.0),
                    scaleout=TopologyDimSpec(bandwidth_GBps=1e9, latency_ns=0.0))
MODEL = ModelSpec(name="t", num_layers=3, hidden_size=512, num_heads=8, seq_len=512,
                  vocab_size=8)
M = 4
LAYER_FWD = ("attn_pre_fwd", "attn_core_fwd", "attn_post_fwd", "mlp_fwd")
LAYER_BWD = ("attn_pre_bwd", "attn_core_bwd", "attn_post_bwd", "mlp_bwd")


def _durations(par: ParallelSpec) -> dict[str, float]:
    cw = compiled_workload(MODEL, par, SYSTEM)
    tdur = template_durations(cw, SystemBatch.from_specs([SYSTEM]), par.precision)[:, 0]
    out: dict[str, float] = {}
    for name, t in zip(cw.ops.template_names, tdur, strict=True):
        out[name] = max(out.get(name, 0.0), float(t))  # optimizer_step: the larger stage
    return out


def _iteration_s(par: ParallelSpec) -> float:
    r = simulate_batch(MODEL, par, [SYSTEM])
    assert r.feasible[0], r.reason[0]
    return float(r.iteration_time_s[0])


def test_default_split_gives_the_first_chunks_one_more_layer() -> None:
    assert chunk_layers(70, 12) == (6,) * 10 + (5,) * 2  # BLOOM-176B: 70 layers on PP 12
    assert chunk_layers(126, 16)[:14] == (8,) * 14 and chunk_layers(126, 16)[14:] == (7, 7)
    split = chunk_layers(10, 2, vp=2)  # chunks v = c*pp + s: [3, 3, 2, 2]
    assert split == (3, 3, 2, 2) and [stage_layers(split, 2, s) for s in (0, 1)] == [5, 5]
    assert chunk_layers(96, 8, vp=3) == (4,) * 24  # even splits unchanged
    assert chunk_layers(70, 12, first_stage_layers=5, last_stage_layers=5) == (5,) + (6,) * 10 + (5,)


def test_heavy_first_stage_matches_the_1f1b_closed_form() -> None:
    par = ParallelSpec(pp=2, global_batch=M)
    d = _durations(par)
    f, b = sum(d[n] for n in LAYER_FWD), sum(d[n] for n in LAYER_BWD)
    f0, b0 = d["embedding_fwd"] + 2 * f, 2 * b + d["embedding_bwd"]
    f1, b1 = f + d["output_fwd"], b + d["output_bwd"]
    assert f0 + b0 > f1 + b1  # stage 0 (two layers) is the slowest
    want = M * (f0 + b0) + max(0.0, f1 + b1 - f0) + max(0.0, f1 + b1 - b0) + d["optimizer_step"]
    got = _iteration_s(par)
    assert got == pytest.approx(want, rel=1e-4)
    assert abs(got - ((M + 1) * (f0 + b0) + d["optimizer_step"])) > 0.1 * got


def test_heavy_last_stage_override_is_m_slowest_plus_fill_and_drain() -> None:
    par = ParallelSpec(pp=2, global_batch=M, first_stage_layers=1, last_stage_layers=2)
    assert par.chunk_layers(3) == (1, 2)
    d = _durations(par)
    f, b = sum(d[n] for n in LAYER_FWD), sum(d[n] for n in LAYER_BWD)
    f0, b0 = d["embedding_fwd"] + f, b + d["embedding_bwd"]
    f1, b1 = 2 * f + d["output_fwd"], 2 * b + d["output_bwd"]
    want = f0 + M * (f1 + b1) + b0 + d["optimizer_step"]
    assert _iteration_s(par) == pytest.approx(want, rel=1e-4)
    default = ParallelSpec(pp=2, global_batch=M)
    assert structure_key(MODEL, par, SYSTEM) != structure_key(MODEL, default, SYSTEM)


def test_memory_per_stage_follows_its_layers_and_the_worst_stage_is_reported() -> None:
    par = ParallelSpec(pp=2, global_batch=M).resolve(2)
    s0, s1 = (footprint_bytes(MODEL, par, s) for s in (0, 1))
    layer_params = MODEL.attention_params + MODEL.expert_params
    # both stages hold a vocab x h embedding copy (pp > 1); stage 0 has one more layer
    assert s0["weights"] - s1["weights"] == pytest.approx(2 * layer_params, abs=2)
    assert s0["optimizer"] - s1["optimizer"] == pytest.approx(12 * layer_params, abs=2)
    # 1F1B: stage 0 keeps min(pp, m) = 2 micro-batches of 2 layers, stage 1 one of 1 layer
    one = footprint_bytes(replace(MODEL, num_layers=1), ParallelSpec(global_batch=M).resolve(1), 0)
    logits = 4 * MODEL.seq_len * MODEL.vocab_size  # fp32 logits on the last stage
    per_layer = one["activations"] - logits
    assert s0["activations"] == pytest.approx(4 * per_layer, abs=4)
    assert s1["activations"] == pytest.approx(per_layer + logits, abs=4)
    r = simulate_batch(MODEL, ParallelSpec(pp=2, global_batch=M), [SYSTEM])
    assert r.peak_memory_gib[0] == pytest.approx(max(s0["total"], s1["total"]) / GIB, rel=1e-9)
    heavy_last = ParallelSpec(pp=2, global_batch=M, first_stage_layers=1, last_stage_layers=2)
    t1 = footprint_bytes(MODEL, heavy_last.resolve(2), 1)
    assert t1["weights"] - s1["weights"] == pytest.approx(2 * layer_params, abs=2)


@pytest.mark.parametrize("layers,kw,key", [
    (3, {"pp": 4}, "workload.num_layers"),  # 4 chunks, 3 layers
    (3, {"pp": 2, "first_stage_layers": 3}, "parallel.first_stage_layers"),  # nothing left
    (8, {"pp": 2, "vp": 2, "last_stage_layers": 1}, "parallel.last_stage_layers"),  # needs vp=1
])
def test_impossible_splits_are_infeasible_with_the_key(layers: int, kw: dict[str, int],
                                                       key: str) -> None:
    par = ParallelSpec(**{"global_batch": M, **kw})
    r = simulate_batch(replace(MODEL, num_layers=layers), par, [replace(SYSTEM, num_gpus=par.pp)])
    assert not r.feasible[0] and r.reason[0].startswith(key + "=")
