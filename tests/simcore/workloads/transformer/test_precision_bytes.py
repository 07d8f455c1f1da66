"""The bytes a transformer plan moves and touches follow its precision.

An fp32 / tf32 run keeps activations, their gradients, the weights' working copy and the weight
gradients in 4 bytes per element; a 16-bit run in 2; fp8 / fp4 runs cast only the GEMM inputs
(Transformer Engine), so what crosses GPUs stays bf16. So against bf16, every TP, CP, PP and ZeRO
transfer and every memory-bound pass of a layer is exactly twice as large in fp32 and equal in
fp8; the data-parallel gradient reduction of a fused accumulation too (the weight-gradient GEMM
writes into the buffer in the run's own width). Before, all of these were 16-bit whatever the
precision (the memory model already counted fp32 activations as 4 bytes).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from simcore.api import compiled_workload, simulate_batch
from simcore.specs.parallel import ParallelSpec
from simcore.specs.system import SystemSpec
from simcore.workloads.transformer.generator import grad_buffer_bytes
from simcore.workloads.transformer.memory import footprint_bytes
from simcore.workloads.transformer.spec import ModelSpec

MODEL = ModelSpec(name="t", num_layers=4, hidden_size=256, num_heads=4, seq_len=512,
                  vocab_size=1024)
#: tp 2 with SP (all-gather / reduce-scatter), pp 2 (sends), dp 2 with ZeRO-3 (gathers), cp 2
PLAN = ParallelSpec(tp=2, pp=2, dp=2, cp=2, global_batch=8, sequence_parallel=True,
                    zero_stage=3, grad_accumulation_fusion=True)
SYSTEM = SystemSpec(num_gpus=16, gpus_per_node=8)
#: templates whose kernels are all sized by the precision's element width
SIZED = ("tp_allgather", "tp_reducescatter", "pp_send", "dp_param_gather", "dp_grad_reduce",
         "cp_kv")


def _bytes_by_template(precision: str) -> dict[str, list[float]]:
    """Template name -> the byte sizes of its communication and memory-bound kernels."""
    ops = compiled_workload(MODEL, replace(PLAN, precision=precision), SYSTEM).workload.ops
    out: dict[str, list[float]] = {}
    for t, name in enumerate(ops.template_names):
        sizes = []
        for k, _ in ops.templates[t]:
            cost, args = ops.kernels[k]
            if cost in ("coll", "p2p", "mem"):
                sizes.append(args[1] if cost == "coll" else args[0])
        out.setdefault(name, []).extend(sizes)
    return out


def test_fp32_moves_and_touches_twice_the_bytes_of_bf16_and_fp8_the_same() -> None:
    """Every collective, send and memory-bound pass (layers, embedding, output layer, ZeRO,
    DP and tied-embedding reductions); only the optimizer step (fp32 states) keeps its bytes."""
    bf16, fp32, fp8 = (_bytes_by_template(p) for p in ("bf16", "fp32", "fp8"))
    sized = {n: s for n, s in bf16.items() if s and n != "optimizer_step"}
    assert all(any(n.startswith(k) for n in sized) for k in SIZED), sorted(sized)
    assert any(n.startswith(("attn_pre", "mlp")) for n in sized)
    for name, sizes in sized.items():
        assert all(x > 0 for x in sizes), name
        assert fp32[name] == [2.0 * x for x in sizes], name
        assert fp8[name] == sizes, name
    assert fp32["optimizer_step"] == bf16["optimizer_step"]


@pytest.mark.parametrize(("precision", "fused", "expected"), [
    ("bf16", True, 2.0), ("fp16", False, 2.0), ("fp8", True, 2.0),
    ("fp32", True, 4.0), ("tf32", True, 4.0), ("fp32", False, 4.0), ("bf16", False, 4.0),
])
def test_gradient_buffer_width(precision: str, fused: bool, expected: float) -> None:
    plan = replace(PLAN, precision=precision, grad_accumulation_fusion=fused)
    assert grad_buffer_bytes(plan) == expected


def test_fp32_communication_costs_more_and_memory_agrees() -> None:
    """Slow links: the fp32 plan's exposed communication of every kind is larger; the memory
    model's activations were already twice bf16's."""
    slow = replace(SYSTEM, scaleout=replace(SYSTEM.scaleout, bandwidth_GBps=1.0),
                   scaleup=replace(SYSTEM.scaleup, bandwidth_GBps=5.0))
    plan = replace(PLAN, zero_stage=1, cp=1, dp=4, dp_overlap=False)
    model = replace(MODEL, hidden_size=2048, num_heads=16, seq_len=2048)  # bandwidth-bound
    res = {p: simulate_batch(model, replace(plan, precision=p), [slow])
           for p in ("bf16", "fp32")}
    for kind in ("tp", "pp", "dp"):
        lo = float(res["bf16"].exposed_comm_by_kind[kind][0])
        hi = float(res["fp32"].exposed_comm_by_kind[kind][0])
        assert hi > 1.5 * lo > 0, (kind, lo, hi)
    acts = {p: footprint_bytes(MODEL, replace(plan, precision=p).resolve(16), 0)["activations"]
            for p in ("bf16", "fp32")}
    assert acts["fp32"] == pytest.approx(2 * acts["bf16"], rel=1e-6)
