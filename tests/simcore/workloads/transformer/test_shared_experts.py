"""Shared experts of a mixture-of-experts layer (DeepSeekMoE, Qwen-MoE): a dense MLP beside the
routed experts on every token, data- and tensor-parallel, not expert-parallel."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from search.config.build import build_model
from simcore.api import simulate_batch
from simcore.errors import InputError
from simcore.specs.parallel import ParallelSpec
from simcore.specs.system import SystemSpec
from simcore.workloads.transformer.memory import footprint_bytes, layers_in_stage
from simcore.workloads.transformer.spec import ModelSpec

#: Qwen1.5-MoE-A2.7B, conf/workload/qwen1.5_moe_a2.7b.yaml (hidden 2,048, 24 layers, 16 heads,
#: 60 experts of 1,408, top 4, shared experts 5,632 wide, vocabulary 151,936, untied embeddings)
PRESET = Path(__file__).resolve().parents[4] / "conf" / "workload" / "qwen1.5_moe_a2.7b.yaml"
QWEN_MOE = build_model({"workload": yaml.safe_load(PRESET.read_text())})


def test_parameter_counts_match_the_published_total_and_activated() -> None:
    """The model card's 14.3B parameters in total and 2.7B activated per token (the Qwen team's
    release, recalled: not in reference/; norms, QKV biases and the shared-expert gate, a few
    million, are not modelled)."""
    assert QWEN_MOE.num_params() / 1e9 == pytest.approx(14.3, rel=0.01)
    assert QWEN_MOE.active_params() / 1e9 == pytest.approx(2.7, rel=0.01)
    without = replace(QWEN_MOE, shared_ffn_hidden_size=0)
    assert QWEN_MOE.num_params() - without.num_params() == 24 * 3 * 2048 * 5632
    # forward + backward FLOPs grow by 3 x 2 x the shared weights per token
    extra = 3 * 2 * 3 * 2048 * 5632 * 24 * QWEN_MOE.seq_len
    assert QWEN_MOE.model_flops_per_sample() - without.model_flops_per_sample() == extra


def _run(model: ModelSpec, par: ParallelSpec):  # type: ignore[no-untyped-def]
    return simulate_batch(model, par, [SystemSpec(num_gpus=16)])


def test_shared_experts_cost_compute_memory_and_dense_gradients_not_expert_ones() -> None:
    par = ParallelSpec(tp=2, pp=2, ep=4, global_batch=16, precision="bf16", zero_stage=1,
                       sequence_parallel=True)
    small = replace(QWEN_MOE, num_layers=4, num_experts=8, top_k=2)
    without = replace(small, shared_ffn_hidden_size=0)
    with_res, without_res = _run(small, par), _run(without, par)
    assert with_res.compute_s[0] > without_res.compute_s[0]
    resolved = par.resolve(16)
    stage = 1  # no embedding: the difference is the shared experts' weights alone
    fp = footprint_bytes(small, resolved, stage)
    fp0 = footprint_bytes(without, resolved, stage)
    layers = layers_in_stage(small.num_layers, par.pp, stage)
    shared_per_gpu = layers * small.shared_expert_params / par.tp  # tp-sharded, not ep
    assert fp["weights"] - fp0["weights"] == pytest.approx(2 * shared_per_gpu, rel=1e-9)
    assert fp["gradients"] - fp0["gradients"] == pytest.approx(4 * shared_per_gpu, rel=1e-9)
    assert fp["activations"] > fp0["activations"]
    # a model without shared experts is the one it was before the field existed
    assert _run(without, par).iteration_time_s[0] == _run(
        ModelSpec(**{k: getattr(without, k) for k in ("name", "num_layers", "hidden_size",
                                                      "num_heads", "ffn_hidden_size", "seq_len",
                                                      "vocab_size", "mlp", "num_experts",
                                                      "top_k", "dropout")}), par
    ).iteration_time_s[0]


@pytest.mark.parametrize(("change", "words"), [
    ({"num_experts": 1, "top_k": 1}, "mixture of experts"),
    ({"shared_ffn_hidden_size": -1}, "integer >= 0"),
])
def test_bad_shared_widths_name_the_key(change: dict[str, int], words: str) -> None:
    with pytest.raises(InputError) as err:
        replace(QWEN_MOE, **change)
    assert err.value.key == "workload.shared_ffn_hidden_size" and words in str(err.value)


def test_a_shared_width_tp_does_not_divide_is_infeasible() -> None:
    model = replace(QWEN_MOE, num_layers=2, shared_ffn_hidden_size=5633)
    res = simulate_batch(model, ParallelSpec(tp=2, global_batch=8, precision="bf16"),
                         [SystemSpec(num_gpus=8)])
    assert not res.feasible[0] and "shared_ffn_hidden_size" in res.reason[0]
