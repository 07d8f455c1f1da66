"""The MoE all-to-all pipelined with the experts in token chunks (``parallel.ep_overlap_chunks``;
FasterMoE, He et al. PPoPP 2022; Tutel, Hwang et al. MLSys 2023).

Makespans worked by hand for the block of one layer (compute-bound and communication-bound
chunks), chunks that are collectives and GEMMs of their own size (not fractions of the whole),
the trade-off that follows (more chunks hide more of the all-to-all but each pays its latency
and a smaller GEMM), and bad values named by key. The pieces graph against the closed-form
blocks and against the node-by-node build: test_overlap_blocks.py and test_condensed.py.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from simcore.api import simulate_batch
from simcore.errors import InputError
from simcore.ir.blocks import PipelinedBlock, block_exposed_s
from simcore.ir.graph import CommType
from simcore.ir.ops import OpTable
from simcore.specs.parallel import ParallelSpec
from simcore.specs.system import SystemSpec
from simcore.workloads.layout import RankLayout
from simcore.workloads.transformer.layers import build_layer_ops
from simcore.workloads.transformer.spec import ModelSpec

# Mixtral-8x7B-shaped layers (Jiang et al. 2024: h 4096, 32 heads, 8 kv heads, SwiGLU 14336,
# 8 experts, top 2), 8 of them
MOE = ModelSpec(name="moe", num_layers=8, hidden_size=4096, num_heads=32, num_kv_heads=8,
                seq_len=4096, vocab_size=32000, mlp="swiglu", ffn_hidden_size=14336,
                num_experts=8, top_k=2, dropout=0.0)
PLAN = ParallelSpec(tp=2, pp=2, ep=8, global_batch=64, sequence_parallel=True, zero_stage=1)


def _block_exposed(n: int, dispatch_s: float, experts_s: float, combine_s: float) -> float:
    block = PipelinedBlock.pipelined_steps(3, ((False, 0), (True, 1), (False, 2)), n, 1.0)
    tdur = np.array([[dispatch_s], [experts_s], [combine_s], [0.0]])
    return float(block_exposed_s(block, tdur, np.ones((1, 1)))[0, 0])


@pytest.mark.parametrize("n", [1, 2, 3, 8])
def test_compute_bound_chunks_expose_one_dispatch_and_one_combine(n):
    # experts (3 s) outlast each chunk's dispatch (1 s) and combine (2 s): after the first
    # dispatch the experts never wait, and only the last combine runs after the last chunk
    assert _block_exposed(n, 1.0, 3.0, 2.0) == pytest.approx(1.0 + 2.0)


@pytest.mark.parametrize("n", [2, 3, 8])
def test_communication_bound_chunks_hide_only_the_experts(n):
    # dispatch (2 s) and combine (3 s) outlast the experts (1 s): the ep stream runs every
    # dispatch, then every combine, without a gap; the experts hide n x 1 s of it (one chunk
    # hides nothing: the blocking all-to-all, 2 + 3 s)
    assert _block_exposed(1, 2.0, 1.0, 3.0) == pytest.approx(2.0 + 3.0)
    assert _block_exposed(n, 2.0, 1.0, 3.0) == pytest.approx(n * (2.0 + 3.0) - n * 1.0)


def _a2a_and_expert_gemms(plan: ParallelSpec) -> tuple[tuple[float, ...], list[float]]:
    """The forward all-to-all kernel's arguments and the rows of the experts' GEMMs."""
    ops = OpTable()
    par = plan.resolve(64)
    lo = build_layer_ops(MOE, par, RankLayout.of(par, 8).spans(), ops)
    chunked = [s for s in lo.fwd if s[0] == "moe"]
    if chunked:
        _, a2a, experts, combine, _ = chunked[0]
        assert combine == a2a
    else:
        a2a = next(s[1] for s in lo.fwd if s[0] == "ep")
        experts = next(s[1] for s in lo.fwd if ops.template_names[s[1]] == "moe_experts_fwd")
    ((kernel, weight),) = ops.templates[a2a]
    cost, args = ops.kernels[kernel]
    assert (cost, weight) == ("coll", 1.0)
    rows = [ops.kernels[k][1][0] for k, _ in ops.templates[experts] if ops.kernels[k][0] == "gemm"]
    return args, rows


def test_chunks_are_collectives_and_gemms_of_their_own_size():
    whole, whole_rows = _a2a_and_expert_gemms(PLAN)
    chunk, chunk_rows = _a2a_and_expert_gemms(replace(PLAN, ep_overlap_chunks=4))
    routed = PLAN.micro_batch * MOE.seq_len * MOE.top_k  # tokens sent to experts
    assert whole[0] == chunk[0] == int(CommType.ALL_TO_ALL)
    assert whole[1] == pytest.approx(routed * MOE.hidden_size * 2.0 / PLAN.tp)  # SP: / tp
    assert chunk[1] == pytest.approx(whole[1] / 4)
    assert whole[2:] == chunk[2:] == (8.0, whole[3])  # the same ep group
    assert whole_rows == [routed, routed] and chunk_rows == [routed / 4, routed / 4]


def test_more_chunks_hide_more_but_each_costs_its_latency_and_a_smaller_gemm():
    base = SystemSpec(num_gpus=64)
    slow = replace(base, scaleout=replace(base.scaleout, bandwidth_GBps=12.5))
    times, exposed = [], []
    for n in (1, 2, 4, 8, 64):
        res = simulate_batch(MOE, replace(PLAN, ep_overlap_chunks=n), [slow])
        assert res.feasible.all(), res.reason
        times.append(float(res.iteration_time_s[0]))
        exposed.append(float(res.exposed_comm_by_kind["ep"][0]))
    assert exposed == sorted(exposed, reverse=True)  # each doubling hides more
    assert exposed[2] < 0.5 * exposed[0]
    assert times[2] < 0.95 * times[0]  # on a slow network, 4 chunks pay off
    assert times[4] > times[2]  # 64 chunks: latencies and small GEMMs cost more than they hide


def test_bad_chunk_counts_name_the_key():
    with pytest.raises(InputError, match=r"parallel\.ep_overlap_chunks.*needs ep > 1"):
        ParallelSpec(ep_overlap_chunks=2)
    for bad in (0, 2.5, True):
        with pytest.raises(InputError, match=r"parallel\.ep_overlap_chunks.*integer >= 1"):
            ParallelSpec(ep=2, ep_overlap_chunks=bad)  # type: ignore[arg-type]
    # more chunks than tokens (4,096 per micro-batch, 2,048 per CP rank): a bounded graph and
    # block, refused with the key before any build
    tiny = [SystemSpec(num_gpus=64)]
    res = simulate_batch(MOE, replace(PLAN, ep_overlap_chunks=4097), tiny)
    assert not res.feasible.any() and "parallel.ep_overlap_chunks" in res.reason[0]
    assert "4096" in res.reason[0]
    cp2 = simulate_batch(MOE, replace(PLAN, cp=2, ep_overlap_chunks=2049), tiny)
    assert not cp2.feasible.any() and "(2048)" in cp2.reason[0]
    ok = simulate_batch(MOE, replace(PLAN, cp=2, ep_overlap_chunks=16), tiny)
    assert ok.feasible.all(), ok.reason
