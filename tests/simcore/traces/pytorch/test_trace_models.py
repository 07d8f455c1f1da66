"""Ex-situ tracing of real PyTorch models: FLOPs and parameters against published / closed forms."""

from __future__ import annotations

from functools import cache

import pytest

from simcore.errors import InputError
from simcore.ir.graph import NodeKind
from simcore.traces.pytorch.api import trace_model
from simcore.traces.pytorch.ir_graph import step_to_graph
from simcore.traces.pytorch.step import TracedStep
from simcore.workloads.transformer.spec import ModelSpec

GPT = "tests.simcore.traces.pytorch.gpt:GPT"


@cache
def resnet50(batch: int = 2) -> TracedStep:
    return trace_model("torchvision.models:resnet50", [f"{batch}x3x224x224"])


def test_resnet50_matches_torchvision_published_counts() -> None:
    """torchvision publishes ResNet-50's size in its weights metadata (nothing downloaded):
    25,557,032 parameters and 4.089 "GFLOPS" at 224x224, which are multiply-accumulates of the
    convolutions and the classifier (fvcore's convention): half our model FLOPs."""
    from torchvision.models import ResNet50_Weights

    meta = ResNet50_Weights.IMAGENET1K_V1.meta
    step = resnet50()
    assert step.num_params == meta["num_params"] == 25_557_032
    macs_per_image = step.flops("forward") / 2 / step.batch_size
    assert macs_per_image / 1e9 == pytest.approx(meta["_ops"], abs=0.0005)
    # backward: input and weight gradients of every conv but the first (no input gradient)
    assert 1.9 < step.flops("backward") / step.flops("forward") < 2.0


def test_resnet50_data_dependencies_and_gradients() -> None:
    step = resnet50()
    assert all(d < i for i, op in enumerate(step.ops) for d in op.deps)
    convs = [i for i, op in enumerate(step.ops) if op.name == "aten::convolution"]
    assert len(convs) == 53
    # every conv after the first reads what an earlier kernel wrote
    assert all(step.ops[i].deps for i in convs[1:])
    # every parameter gets its gradient from a backward op, after its first forward use
    for p in step.params:
        assert step.ops[p.grad_ready].phase == 1
        assert 0 <= p.first_forward < p.grad_ready
    # activations: at least the conv inputs saved for backward, at most all forward outputs
    fwd_out = sum(op.bytes_written for op in step.ops if op.phase == 0)
    assert 0.2 * fwd_out < step.activation_bytes <= fwd_out


@pytest.mark.parametrize("layers,hidden,heads,vocab,batch,seq", [(2, 64, 4, 256, 2, 128),
                                                                  (3, 96, 6, 512, 1, 64)])
def test_gpt_flops_equal_closed_form(layers: int, hidden: int, heads: int, vocab: int,
                                     batch: int, seq: int) -> None:
    """Forward + backward FLOPs = 6 N tokens + attention (Narayanan et al. 2021), as the
    transformer family's ModelSpec counts them, and the same parameter count."""
    step = trace_model(GPT, [f"{batch}x{seq}:int64"],
                       kwargs={"layers": layers, "hidden": hidden, "heads": heads, "vocab": vocab})
    spec = ModelSpec(name="t", num_layers=layers, hidden_size=hidden, num_heads=heads,
                     seq_len=seq, vocab_size=vocab)
    assert step.num_params == spec.num_params()
    assert step.flops() == spec.model_flops_per_sample() * batch
    non_embedding = spec.num_params() - vocab * hidden
    attention = 3 * layers * 4 * seq * seq * hidden
    assert step.flops() == 6 * non_embedding * batch * seq + attention * batch
    # scaled_dot_product_attention is recorded as the fused kernel a GPU runs, one per layer
    names = [op.name for op in step.ops]
    assert names.count("aten::_scaled_dot_product_flash_attention_for_cpu") == layers
    assert names.count("aten::_scaled_dot_product_flash_attention_for_cpu_backward") == layers
    assert "aten::bmm" not in names


def test_optimizer_step_is_recorded_in_its_phase() -> None:
    step = trace_model(GPT, ["2x32:int64"], optimizer="adam")
    opt = [op for op in step.ops if op.phase == 2]
    assert opt and step.flops("optimizer") == 0.0
    assert sum(op.name == "aten::addcdiv_" for op in opt) == len(step.params)


def test_ir_graph_holds_every_op() -> None:
    step = trace_model(GPT, ["2x32:int64"])
    g = step_to_graph(step)
    assert g.num_nodes == len(step.ops)
    assert (g.kind == NodeKind.COMPUTE).all()
    assert g.attr("flops").sum() == step.flops()
    assert sum(len(g.deps_of(i)) for i in range(g.num_nodes)) == sum(len(o.deps) for o in step.ops)


def test_named_blocks_tag_forward_and_backward_ops() -> None:
    step = trace_model(GPT, ["2x32:int64"], kwargs={"layers": 3}, blocks="blocks")
    kernels = [op for op in step.ops if not op.view]
    fwd = [op.block for op in kernels if op.phase == 0]
    bwd = [op.block for op in kernels if op.phase == 1]
    # forward: embedding, blocks 0..2 in order, head + loss; backward: the reverse
    assert fwd[0] == -1 and fwd[-1] == -2 and [b for b in dict.fromkeys(fwd)] == [-1, 0, 1, 2, -2]
    assert [b for b in dict.fromkeys(bwd)] == [-2, 2, 1, 0, -1]
    mm = {b: sum(op.name == "aten::mm" for op in kernels if op.block == b) for b in range(3)}
    assert mm == {0: 12, 1: 12, 2: 12}  # 4 linear layers: forward, dX and dW each
    with pytest.raises(InputError, match="has no submodule 'layers'"):
        trace_model(GPT, ["2x32:int64"], blocks="layers")
