"""Multi-head latent attention (MLA; DeepSeek-V2 / V3) in the parameter, FLOP, kernel and memory
models, checked against DeepSeek-V3's published shape (``conf/workload/deepseek_v3.yaml``) and
against its model card: 671B parameters, 37B activated per token [R]."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from search.config.build import build_model
from simcore.api import simulate_batch
from simcore.errors import InputError
from simcore.ir.ops import OpTable
from simcore.specs.parallel import ParallelSpec
from simcore.specs.system import SystemSpec
from simcore.workloads.layout import RankLayout
from simcore.workloads.transformer.layers import build_layer_ops
from simcore.workloads.transformer.memory import footprint_bytes
from simcore.workloads.transformer.spec import ModelSpec

CONF = Path(__file__).resolve().parents[4] / "conf" / "workload"
V3 = build_model({"workload": yaml.safe_load((CONF / "deepseek_v3.yaml").read_text())})
assert isinstance(V3, ModelSpec)

# DeepSeek-V3's attention per layer, written out: query down 7168 x 1536, query up
# 1536 x 128 (128 + 64), key/value down 7168 x (512 + 64), key/value up 512 x 128 (128 + 128),
# output 128 x 128 x 7168
V3_ATTENTION = (7168 * 1536 + 1536 * 128 * 192 + 7168 * 576 + 512 * 128 * 256
                + 128 * 128 * 7168)
V3_EXPERT = 3 * 7168 * 2048  # SwiGLU: gate, up, down
V3_DENSE_MLP = 3 * 7168 * 18432  # the first three layers' dense MLP in the release


def test_attention_weights_are_the_latent_projections():
    assert V3.is_mla and V3.attention_params == V3_ATTENTION  # 187.1M
    no_q_latent = replace(V3, q_lora_rank=0)  # DeepSeek-V2-Lite's full-rank queries
    assert no_q_latent.attention_params == V3_ATTENTION - 7168 * 1536 - 1536 * 128 * 192 \
        + 7168 * 128 * 192


def test_deepseek_v3_matches_its_model_card():
    # activated: attention, 8 routed + 1 shared expert and the router per layer, embeddings;
    # the release's dense first layers (18,432 = 9 x 2,048 wide) activate as much
    assert V3.active_params() == pytest.approx(37e9, rel=0.02)
    # total: every layer here is MoE; the release's first three are dense
    moe_layer = 256 * V3_EXPERT + V3_EXPERT + 7168 * 256  # routed, shared, router
    assert V3.num_params() - 3 * (moe_layer - V3_DENSE_MLP) == pytest.approx(671e9, rel=0.005)


def test_model_flops_count_the_latent_core_at_its_head_widths():
    s = V3.seq_len
    core = 2.0 * s * s * 128 * (192 + 128)  # scores over 192-wide keys, values 128 wide
    layer = 2.0 * (V3.active_params() - 2 * 129280 * 7168) / 61 * s + core
    output = 2.0 * s * 7168 * 129280
    assert V3.model_flops_per_sample() == pytest.approx(3 * (61 * layer + output), rel=1e-12)


def _projection_gemms(tp: int) -> list[tuple[float, float]]:
    par = ParallelSpec(tp=tp, ep=8, global_batch=64).resolve(64)
    ops = OpTable()
    lo = build_layer_ops(V3, par, RankLayout.of(par, 8).spans(), ops)
    pre = next(t for kind, t, *_ in lo.fwd if kind == "c"
               and ops.template_names[t] == "attn_pre_fwd")
    return [ops.kernels[k][1][1:] for k, _ in ops.templates[pre] if ops.kernels[k][0] == "gemm"]


def test_down_projections_are_replicated_and_up_projections_split_over_tp():
    # (output width, input width) of each GEMM before the core, in order
    assert _projection_gemms(1) == [(1536, 7168), (128 * 192, 1536), (576, 7168),
                                    (128 * 256, 512)]
    assert _projection_gemms(8) == [(1536, 7168), (128 * 192 / 8, 1536), (576, 7168),
                                    (128 * 256 / 8, 512)]


def test_latent_attention_keeps_its_per_head_activations():
    plan = ParallelSpec(tp=1, pp=1, ep=8, global_batch=8).resolve(8)
    mla = footprint_bytes(V3, plan, 0)["activations"]
    # the same model with standard multi-head attention of head width h / a = 56
    mha = footprint_bytes(replace(V3, kv_lora_rank=0, q_lora_rank=0), plan, 0)["activations"]
    sbh = V3.seq_len * 7168  # per 16-bit h-wide activation unit (micro-batch 1)
    per_layer = (4 * 128 * 320 / 7168 - 8.0  # Q, K, V, projection input: a (d_qk + d_v) wide
                 + 2 * (2 * 1536 + 2 * 512 + 64) / 7168) * sbh  # the latents, rotary key
    assert mla - mha == pytest.approx(61 * per_layer, rel=1e-9)


def test_a_deepseek_v3_plan_runs_and_latent_fields_are_checked():
    res = simulate_batch(V3, ParallelSpec(pp=16, ep=64, global_batch=1920, zero_stage=1,
                                          recompute="full"),
                         [SystemSpec(num_gpus=2048, gpus_per_node=8)])
    assert res.feasible.all(), res.reason
    assert res.exposed_comm_by_kind["ep"][0] > 0
    with pytest.raises(InputError, match=r"workload\.num_kv_heads"):
        replace(V3, num_kv_heads=8)
    with pytest.raises(InputError, match=r"workload\.q_lora_rank.*kv_lora_rank > 0"):
        replace(V3, kv_lora_rank=0)
    with pytest.raises(InputError, match=r"workload\.v_head_dim"):
        replace(V3, v_head_dim=0)
    for bad in (-1, 1.5, True):
        with pytest.raises(InputError, match=r"workload\.kv_lora_rank.*integer >= 0"):
            replace(V3, kv_lora_rank=bad)
