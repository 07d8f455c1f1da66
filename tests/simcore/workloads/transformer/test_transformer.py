"""Transformer generator: symmetry reduction, program order, MoE/CP/overlap variants run."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from simcore.api import compiled_workload, simulate_batch
from simcore.specs.parallel import ParallelSpec
from simcore.specs.system import SystemSpec
from simcore.workloads.pipeline import stage_program
from simcore.workloads.transformer.spec import ModelSpec

GPT3 = ModelSpec(name="gpt3_175b", num_layers=96, hidden_size=12288, num_heads=96,
                 seq_len=2048, vocab_size=51200)


def test_1f1b_program_has_warmup_steady_cooldown() -> None:
    prog = stage_program(1, pp=4, vp=1, num_micro_batches=6)
    kinds = "".join("F" if op.forward else "B" for op in prog)
    assert kinds == "FF" + "FB" * 4 + "BB"
    assert [op.micro_batch for op in prog if op.forward] == list(range(6))


def test_interleaved_program_visits_every_chunk_of_every_micro_batch() -> None:
    prog = stage_program(0, pp=2, vp=2, num_micro_batches=4)
    assert sorted((op.micro_batch, op.chunk) for op in prog if op.forward) == [
        (m, c) for m in range(4) for c in range(2)]
    assert len(prog) == 16


@pytest.mark.slow
def test_gpt3_on_1024_gpus_is_one_rank_per_stage_and_small() -> None:
    par = ParallelSpec(tp=8, pp=8, global_batch=1536, sequence_parallel=True)
    cw = compiled_workload(GPT3, par, SystemSpec(num_gpus=1024))
    graph = cw.workload.graph
    ranks = set(np.unique(graph.rank).tolist())
    assert ranks - {-1} == set(range(8))  # 8 representatives, not 1,024 ranks
    assert int((graph.rank == -1).sum()) == 1  # the first/last-stage embedding rendezvous
    assert graph.num_nodes < 250_000
    assert cw.plan.num_chains < graph.num_nodes // 20  # chains collapse ~50x


@pytest.mark.parametrize("overrides", [
    {"cp": 2}, {"tp_comm_overlap": True, "sequence_parallel": True}, {"zero_stage": 3},
    {"vp": 2, "global_batch": 8},
])
def test_variants_run_and_add_up(overrides: dict[str, object]) -> None:
    model = ModelSpec(name="t", num_layers=4, hidden_size=256, num_heads=4, seq_len=512,
                      vocab_size=1024)
    par = replace(ParallelSpec(tp=2, pp=2, global_batch=8), **overrides)  # type: ignore[arg-type]
    r = simulate_batch(model, par, [SystemSpec(num_gpus=16)])
    assert r.feasible[0], r.reason[0]
    np.testing.assert_allclose(r.compute_s + r.exposed_comm_s + r.bubble_s, r.iteration_time_s)


def test_moe_all_to_all_appears_with_expert_parallelism() -> None:
    moe = ModelSpec(name="moe", num_layers=4, hidden_size=256, num_heads=4, seq_len=512,
                    vocab_size=1024, mlp="swiglu", num_experts=4, top_k=2)
    sysm = SystemSpec(num_gpus=8)
    with_ep = simulate_batch(moe, ParallelSpec(ep=4, global_batch=8), [sysm])
    no_ep = simulate_batch(moe, ParallelSpec(ep=1, global_batch=8), [sysm])
    assert with_ep.exposed_comm_by_kind["ep"][0] > 0
    assert no_ep.exposed_comm_by_kind["ep"][0] == 0
    assert with_ep.peak_memory_gib[0] < no_ep.peak_memory_gib[0]  # experts sharded


def test_group_spans_follow_the_rank_order() -> None:
    from simcore.workloads.layout import RankLayout

    par = ParallelSpec(tp=8, pp=2, dp=4, global_batch=8)
    default = RankLayout.of(par, gpus_per_node=8).spans()
    assert default["tp"] == (8, 8) and not default["tp"].cross_node  # one node
    assert default["dp"] == (4, 1)  # one member per node: over the NICs
    flipped = RankLayout.of(replace(par, rank_order="dp-tp-cp-pp"), gpus_per_node=8).spans()
    assert flipped["dp"] == (4, 4) and flipped["tp"] == (8, 2)  # TP now spans 4 nodes


def test_tp_across_nodes_is_slower_than_inside() -> None:
    model = ModelSpec(name="t", num_layers=4, hidden_size=1024, num_heads=8, seq_len=1024,
                      vocab_size=1024)
    par = ParallelSpec(tp=8, global_batch=8)
    inside = simulate_batch(model, par, [SystemSpec(num_gpus=64)])
    across = simulate_batch(model, replace(par, rank_order="dp-tp-cp-pp"),
                            [SystemSpec(num_gpus=64)])
    assert across.exposed_comm_by_kind["tp"][0] > 2 * inside.exposed_comm_by_kind["tp"][0]


def test_tp_comm_overlap_hides_most_tp_communication() -> None:
    model = ModelSpec(name="t", num_layers=4, hidden_size=4096, num_heads=32, seq_len=2048,
                      vocab_size=1024)
    par = ParallelSpec(tp=8, global_batch=2, sequence_parallel=True)
    sysm = [SystemSpec(num_gpus=8)]
    plain = simulate_batch(model, par, sysm)
    overlapped = simulate_batch(model, replace(par, tp_comm_overlap=True), sysm)
    assert overlapped.exposed_comm_by_kind["tp"][0] < 0.5 * plain.exposed_comm_by_kind["tp"][0]
    assert overlapped.iteration_time_s[0] < plain.iteration_time_s[0]
