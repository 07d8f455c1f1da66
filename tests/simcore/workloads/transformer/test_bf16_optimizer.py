"""DeepSpeed's BF16_Optimizer gradient path (``parallel.bf16_optimizer``, set by ``stack=deepspeed``).

Facts, from the DeepSpeed 0.6.5 source (PyPI sdist; the release current during BLOOM's training):

* ``runtime/pipe/engine.py`` ``_exec_backward_pass`` calls ``optimizer.update_hp_grads`` after
  every micro-batch's backward on every stage but the last (which goes through
  ``optimizer.backward``, the same update); ``runtime/bf16_optimizer.py`` ``update_hp_grads`` runs
  ``hp_grad.data.add_(lp.grad.data.to(hp_grad.dtype))`` per parameter: a cast that reads the
  2-byte bf16 gradient and writes a 4-byte fp32 temporary, then an add that reads the fp32
  gradient and the temporary and writes the fp32 gradient: 2 + 4 + 4 + 4 + 4 = 18 bytes per
  parameter per micro-batch.
* ``_exec_reduce_grads`` -> ``_bf16_reduce_grads`` -> ``buffered_allreduce_fallback`` on the fp32
  gradients; ``runtime/engine.py`` ``allreduce_bucket`` casts them to ``communication_data_type``
  (bf16 when bf16 is enabled and nothing is configured) before ``dist.all_reduce`` and copies
  back: an all-reduce of 2 bytes per parameter, not a reduce-scatter.
* ``BF16_Optimizer.step`` updates this rank's fp32 shard and ``all_gather_dp_groups`` the bf16
  weights (2 bytes per parameter).
* ``_exec_reduce_tied_grads`` all-reduces ``weight._hp_grad`` (fp32, 4 bytes) between the first
  and the last stage.

A block holds 12 h^2 weights (Narayanan et al. 2021, biases ignored), split over the TP group.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from search.config.cases import build_case
from simcore.api import compiled_workload, simulate_batch
from simcore.errors import InputError
from simcore.ir.graph import CommType
from simcore.specs.parallel import ParallelSpec
from simcore.specs.stack import StackSpec, apply_stack_plan
from simcore.specs.system import SystemSpec
from simcore.workloads.transformer.spec import ModelSpec
from tests.simcore.workloads.transformer._cases import case_row

H, LAYERS, TP, PP, DP, MB = 256, 4, 2, 2, 2, 4
MODEL = ModelSpec(name="t", num_layers=LAYERS, hidden_size=H, num_heads=4, seq_len=512,
                  vocab_size=1024)
PLAN = ParallelSpec(tp=TP, pp=PP, dp=DP, global_batch=DP * MB, zero_stage=1, precision="bf16",
                    grad_accumulation_fusion=False, bf16_optimizer=True, dp_overlap=False)
SYSTEM = SystemSpec(num_gpus=TP * PP * DP)
LAYER_PARAMS = 12 * H * H / TP
EMB_PARAMS = 1024 * H / TP
BF16, FP32 = 2.0, 4.0


def _kernels(plan: ParallelSpec, template: str) -> list[tuple[float, ...]]:
    ops = compiled_workload(MODEL, plan, SYSTEM).workload.ops
    out = []
    for t, name in enumerate(ops.template_names):
        if name == template:
            out += [ops.kernels[k][1] for k, _ in ops.templates[t]]
    return out


def test_accumulation_casts_into_an_fp32_temporary_every_micro_batch() -> None:
    cast = BF16 + FP32  # lp.grad.to(fp32): read bf16, write the temporary
    add = FP32 + FP32 + FP32  # hp_grad.add_(tmp): read both, write hp_grad
    assert _kernels(PLAN, "grad_accumulate") == [(LAYER_PARAMS * (cast + add),)]
    graph = compiled_workload(MODEL, PLAN, SYSTEM).workload.graph
    assert sum(n == "grad_accumulate" for n in graph.names) == LAYERS * MB


@pytest.mark.parametrize("zero", [0, 1])
def test_reduction_is_a_16_bit_all_reduce_then_a_parameter_gather(zero: int) -> None:
    plan = replace(PLAN, zero_stage=zero)
    (reduce,) = _kernels(plan, "dp_grad_reduce")
    assert reduce[:3] == (float(CommType.ALL_REDUCE), LAYER_PARAMS * BF16, DP)
    (gather,) = _kernels(plan, "dp_param_gather")
    assert gather[:3] == (float(CommType.ALL_GATHER), LAYER_PARAMS * BF16, DP)
    graph = compiled_workload(MODEL, plan, SYSTEM).workload.graph
    assert sum(n == "dp_param_gather" for n in graph.names) == LAYERS  # once per layer, per step
    (tied,) = _kernels(plan, "embedding_tied_allreduce")
    assert tied[:2] == (float(CommType.ALL_REDUCE), EMB_PARAMS * FP32)


def test_the_step_updates_one_shard_and_casts_the_gradients_down_and_back() -> None:
    (step, casts) = _kernels(PLAN, "optimizer_step")[:2]
    # Adam on this rank's 1/dp shard (28 B per parameter), and the cast of every fp32 gradient
    # of the stage to bf16 and back around the all-reduce (4 + 2, then 2 + 4 bytes)
    stage_params = LAYER_PARAMS * LAYERS / PP + EMB_PARAMS
    assert step == (pytest.approx(stage_params / DP * 28.0),)
    assert casts == (pytest.approx(stage_params * (FP32 + BF16 + BF16 + FP32)),)


@pytest.mark.parametrize("change", [{"precision": "fp16"}, {"grad_accumulation_fusion": True},
                                    {"zero_stage": 2}, {"bf16_optimizer": False}])
def test_the_path_only_applies_to_unfused_bf16_runs_without_zero_2(change: dict) -> None:
    """fp16 runs take DeepSpeed's fp16 optimizers, ZeRO-2/3 their own; fused accumulation
    (Megatron) has no separate pass; other stacks leave the flag off."""
    plan = replace(PLAN, **change)
    plain = replace(plan, bf16_optimizer=False)
    assert _kernels(plan, "grad_accumulate") == _kernels(plain, "grad_accumulate")
    assert _kernels(plan, "dp_grad_reduce") == _kernels(plain, "dp_grad_reduce")


def test_the_added_bytes_cost_more_at_one_sample_per_micro_batch() -> None:
    """A per-parameter pass every micro-batch weighs twice as much, relative to the GEMMs,
    at micro-batch 1 as at 2 (MT-NLG vs BLOOM): the mechanism behind their different
    residuals."""
    def slowdown(micro_batch: int) -> float:
        plan = replace(PLAN, micro_batch=micro_batch, global_batch=DP * MB * micro_batch)
        t = simulate_batch(MODEL, plan, [SYSTEM]).iteration_time_s[0]
        t0 = simulate_batch(MODEL, replace(plan, bf16_optimizer=False), [SYSTEM]).iteration_time_s[0]
        return float(t / t0 - 1.0)
    one, two = slowdown(1), slowdown(2)
    assert one > two > 0


@pytest.mark.parametrize(("stack", "on"), [("deepspeed", True), ("megatron_lm", False),
                                           ("megatron_core", False), ("nemo", False)])
def test_the_stack_sets_the_flag(stack: str, on: bool) -> None:
    assert build_case(case_row(stack))[1].bf16_optimizer is on


def test_bad_values_are_one_line_errors_and_null_keeps_the_plan() -> None:
    with pytest.raises(InputError, match="stack.bf16_optimizer"):
        StackSpec(bf16_optimizer="yes")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="parallel.bf16_optimizer"):
        ParallelSpec(bf16_optimizer=1)  # type: ignore[arg-type]
    assert apply_stack_plan(PLAN, StackSpec()) == PLAN
    assert not apply_stack_plan(PLAN, StackSpec(bf16_optimizer=False)).bf16_optimizer
    assert np.isfinite(simulate_batch(MODEL, PLAN, [SYSTEM]).iteration_time_s).all()
