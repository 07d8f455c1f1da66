"""Megatron-style splitting of a traced step's linear layers, on a hand-written two-layer MLP."""

from __future__ import annotations

from dataclasses import replace

import pytest

from simcore.errors import InputError
from simcore.traces.pytorch.step import TracedStep
from simcore.workloads.traced.family import tiny_step
from simcore.workloads.traced.tensor_parallel import COLUMN, ROW, linear_roles, split_step

B, H = 4, 64


def _mlp_block() -> TracedStep:
    """``relu(x W1) W2`` as one named block: the forward products read fc1 / fc2, each backward
    op names its forward op (dW2, dX2 -> op 2; relu backward -> op 1; dW1 -> op 0)."""
    step = tiny_step(batch=B, width=H)
    params = {0: 0, 2: 1, 6: 1}  # op -> the weight it reads (dX2 reads W2)
    twins = {4: 3, 5: 2, 6: 2, 7: 1, 8: 0}
    ops = tuple(replace(op, block=0, param=params.get(i, -1), twin=twins.get(i, -1))
                for i, op in enumerate(step.ops))
    return replace(step, ops=ops, block_out_bytes=(4 * B * H,))


@pytest.mark.parametrize("tp", [2, 4])
def test_column_then_row_split_and_the_allreduce(tp: int) -> None:
    step = _mlp_block()
    assert linear_roles(step, tp) == {0: COLUMN, 2: ROW}
    split = split_step(step, tp)
    ops = split.step.ops
    assert ops[0].gemms == ((B, H // tp, H, 1),)  # column-parallel: output features
    assert ops[1].bytes_read == step.ops[1].bytes_read // tp  # relu on the split activation
    assert ops[2].gemms == ((B, H, H // tp, 1),)  # row-parallel: input features
    assert ops[2].bytes_written == step.ops[2].bytes_written  # partial sums of the full output
    assert ops[0].bytes_written == step.ops[0].bytes_written // tp
    assert ops[3] == step.ops[3]  # the loss on the full (all-reduced) output
    assert ops[5].gemms == ((H, H // tp, B, 1),)  # dW2 = dy^T x: (out, in / tp, T)
    assert ops[6].gemms == ((B, H // tp, H, 1),)  # dX2 = dy W2: (T, in / tp, out)
    assert ops[7].bytes_written == step.ops[7].bytes_written // tp
    assert ops[8].gemms == ((H // tp, H, B, 1),)  # dW1 = dy^T x: (out / tp, in, T)
    assert split.allreduce_after == {2: 4 * B * H}  # no input gradient: no backward all-reduce
    assert [p.numel for p in split.step.params] == [H * H // tp] * 2
    assert split.step.flops() == pytest.approx(step.flops() / tp)


def test_rules_name_what_is_wrong() -> None:
    step = _mlp_block()
    odd = replace(step, ops=tuple(replace(op, param=-1) if i == 2 else op
                                  for i, op in enumerate(step.ops)))
    with pytest.raises(InputError, match="block 0 has 1 linear layers"):
        split_step(odd, 2)
    with pytest.raises(InputError, match="must divide the 64 features"):
        split_step(step, 3)
    with pytest.raises(InputError, match="needs the repeated blocks named"):
        split_step(tiny_step(), 2)
    untagged = replace(step, ops=tuple(replace(op, param=-1) for op in step.ops))
    with pytest.raises(InputError, match="must be traced again"):
        split_step(untagged, 2)
    assert split_step(step, 1).step is step


def test_attention_heads_must_split_evenly() -> None:
    """A traced GPT with 6 heads x batch 1: tp = 4 divides the 96 / 384 features of the linear
    layers but not the 6 heads."""
    pytest.importorskip("torch")
    from simcore.traces.pytorch.api import trace_model

    step = trace_model("tests.simcore.traces.pytorch.gpt:GPT", ["1x16:int64"],
                       kwargs={"layers": 1, "hidden": 96, "heads": 6, "vocab": 64}, blocks="blocks")
    assert split_step(step, 2).allreduce_after
    with pytest.raises(InputError, match="must divide the 6 batch x heads"):
        split_step(step, 4)
