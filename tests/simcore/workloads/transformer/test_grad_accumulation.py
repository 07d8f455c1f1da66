"""Gradient accumulation: fused into the weight-gradient GEMM, or a separate kernel per micro-batch.

Unfused (the DeepSpeed pipeline engine), every micro-batch's 16-bit weight gradient of a layer is
added to the gradient buffer: read 2 bytes, read and write the buffer (4 bytes each in bf16 runs,
2 in fp16 runs) per parameter, on the compute stream; the data-parallel reduction then reads the
buffer's dtype. A block holds 12 h^2 weights (Narayanan et al. 2021, biases ignored), split over
the tensor-parallel group.
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
PLAN = ParallelSpec(tp=TP, pp=PP, dp=DP, global_batch=DP * MB, zero_stage=1)
SYSTEM = SystemSpec(num_gpus=TP * PP * DP)
LAYER_PARAMS = 12 * H * H / TP


def _kernel_bytes(plan: ParallelSpec, template: str) -> list[tuple[float, ...]]:
    ops = compiled_workload(MODEL, plan, SYSTEM).workload.ops
    out = []
    for t, name in enumerate(ops.template_names):
        if name == template:
            out += [ops.kernels[k][1] for k, _ in ops.templates[t]]
    return out


@pytest.mark.parametrize(("precision", "buffer_bytes"), [("bf16", 4.0), ("fp16", 2.0)])
def test_unfused_accumulation_costs_one_pass_per_layer_and_micro_batch(
        precision: str, buffer_bytes: float) -> None:
    plan = replace(PLAN, precision=precision, grad_accumulation_fusion=False)
    assert _kernel_bytes(plan, "grad_accumulate") == [(LAYER_PARAMS * (2 + 2 * buffer_bytes),)]
    graph = compiled_workload(MODEL, plan, SYSTEM).workload.graph
    # one representative GPU per stage: every layer, every micro-batch
    assert sum(n == "grad_accumulate" for n in graph.names) == LAYERS * MB
    reduce = _kernel_bytes(plan, "dp_grad_reduce")
    assert reduce == [(float(CommType.REDUCE_SCATTER), LAYER_PARAMS * buffer_bytes, DP,
                       reduce[0][3])]
    gather = _kernel_bytes(plan, "dp_param_gather")
    assert gather[0][1] == LAYER_PARAMS * 2  # parameters stay 16-bit


def test_fused_accumulation_adds_nothing_and_reduces_16_bit() -> None:
    assert PLAN.grad_accumulation_fusion
    assert _kernel_bytes(PLAN, "grad_accumulate") == []
    assert _kernel_bytes(PLAN, "dp_grad_reduce")[0][1] == LAYER_PARAMS * 2
    fused = simulate_batch(MODEL, PLAN, [SYSTEM])
    unfused = simulate_batch(MODEL, replace(PLAN, grad_accumulation_fusion=False), [SYSTEM])
    assert np.all(unfused.iteration_time_s > fused.iteration_time_s)


@pytest.mark.parametrize(("stack", "fused"), [("deepspeed", False), ("megatron_lm", True),
                                              ("megatron_core", True), ("nemo", True)])
def test_the_stack_sets_the_plan_accumulation(stack: str, fused: bool) -> None:
    assert build_case(case_row(stack))[1].grad_accumulation_fusion is fused


def test_stack_plan_setting_is_checked_and_null_keeps_the_plan() -> None:
    with pytest.raises(InputError, match="stack.grad_accumulation_fusion"):
        StackSpec(grad_accumulation_fusion="no")  # type: ignore[arg-type]
    assert apply_stack_plan(PLAN, StackSpec()) == PLAN
    with pytest.raises(InputError, match="parallel.grad_accumulation_fusion"):
        ParallelSpec(grad_accumulation_fusion=1)  # type: ignore[arg-type]
