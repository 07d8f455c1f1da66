"""TP overlap, CP rings and chunked all-to-alls as closed-form blocks (``parallel.overlap_blocks``,
simcore/ir/blocks.py) against the graph of pieces they replace, and against makespans worked
by hand (the flow shop of a two-step run, a ring)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from simcore import formats
from simcore.api import _compiled, simulate_batch
from simcore.engine import evaluate
from simcore.errors import InputError
from simcore.ir.blocks import PipelinedBlock, block_exposed_s
from simcore.specs.endpoint import EndpointSpec
from simcore.specs.parallel import ParallelSpec
from simcore.specs.system import DevicePool, SystemSpec
from simcore.workloads.transformer.generator import build_transformer
from simcore.workloads.transformer.spec import ModelSpec

MODEL = ModelSpec(name="blocks", num_layers=8, hidden_size=2048, num_heads=16, seq_len=2048,
                  vocab_size=32000)
MOE = replace(MODEL, name="blocks_moe", num_experts=8, top_k=2)
BASE = SystemSpec(num_gpus=64)
SYSTEMS = [replace(BASE, scaleout=replace(BASE.scaleout, bandwidth_GBps=gbps),
                   scaleup=replace(BASE.scaleup, bandwidth_GBps=nvl))
           for gbps, nvl in ((3.0, 60.0), (25.0, 300.0), (400.0, 2400.0))]
SYSTEMS.append(replace(SYSTEMS[1], endpoint=EndpointSpec(collective_engine="endpoint")))

PLANS = {
    "tp4 pp2 sp": dict(tp=4, pp=2, sequence_parallel=True),
    "tp8 pp1 no sp": dict(tp=8, pp=1),
    "tp4 pp4 vp2 full recompute": dict(tp=4, pp=4, vp=2, recompute="full",
                                        sequence_parallel=True),
    "tp2 pp2 selective zero1": dict(tp=2, pp=2, recompute="selective", zero_stage=1,
                                     sequence_parallel=True),
    "tp4 pp2 zero3": dict(tp=4, pp=2, zero_stage=3, sequence_parallel=True),
    "tp4 pp2 cp2 no dp overlap": dict(tp=4, pp=2, cp=2, dp_overlap=False,
                                       sequence_parallel=True),
    "tp2 pp2 zero2 mb2": dict(tp=2, pp=2, zero_stage=2, micro_batch=2),
    "tp1 pp2 (no tp steps)": dict(tp=1, pp=2),
    "cp2 ring, no TP overlap": dict(tp=2, pp=2, cp=2, tp_comm_overlap=False,
                                     sequence_parallel=True),
    "cp4 ring, no TP overlap, full recompute": dict(tp=2, pp=2, cp=4, tp_comm_overlap=False,
                                                     recompute="full"),
}


def _plan(blocks: bool, **kw: object) -> ParallelSpec:
    kw = {"tp_comm_overlap": True, **kw}
    return ParallelSpec(global_batch=64, overlap_blocks=blocks, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", sorted(PLANS))
def test_blocks_give_the_iteration_time_of_the_piece_graph(name):
    kw = PLANS[name]
    pieces = simulate_batch(MODEL, _plan(False, **kw), SYSTEMS)
    blocks = simulate_batch(MODEL, _plan(True, **kw), SYSTEMS)
    assert pieces.feasible.all(), pieces.reason
    np.testing.assert_allclose(blocks.iteration_time_s, pieces.iteration_time_s, rtol=1e-10)
    np.testing.assert_allclose(blocks.compute_s, pieces.compute_s, rtol=1e-10)
    # the exposed total is the same; a DP or PP transfer beside a block's exposed TP time
    # counts as covered, as beside any blocking collective, so kinds may trade
    np.testing.assert_allclose(blocks.exposed_comm_s, pieces.exposed_comm_s, rtol=1e-9,
                               atol=1e-12)


#: MoE plans whose all-to-all is pipelined with the experts in token chunks (with and without
#: TP overlap beside it, ZeRO-3 gathers, interleaving, a CP ring, recompute)
EP_PLANS = {
    "ep4 in 4 chunks": dict(tp=2, pp=2, ep=4, ep_overlap_chunks=4, tp_comm_overlap=False,
                            sequence_parallel=True),
    "ep4 in 2 chunks, TP overlap": dict(tp=2, pp=2, ep=4, ep_overlap_chunks=2,
                                        sequence_parallel=True),
    "ep2 in 3 chunks, zero3 vp2": dict(tp=1, pp=2, vp=2, ep=2, ep_overlap_chunks=3,
                                       zero_stage=3, tp_comm_overlap=False),
    "ep4 in 4 chunks, cp2, full recompute": dict(tp=2, pp=2, cp=2, ep=4, ep_overlap_chunks=4,
                                                 recompute="full", tp_comm_overlap=False),
}


@pytest.mark.parametrize("name", sorted(EP_PLANS))
def test_chunked_all_to_all_blocks_give_the_iteration_time_of_its_pieces(name):
    kw = EP_PLANS[name]
    pieces = simulate_batch(MOE, _plan(False, **kw), SYSTEMS)
    blocks = simulate_batch(MOE, _plan(True, **kw), SYSTEMS)
    blocking = simulate_batch(MOE, _plan(False, **{**kw, "ep_overlap_chunks": 1}), SYSTEMS)
    assert pieces.feasible.all(), pieces.reason
    np.testing.assert_allclose(blocks.iteration_time_s, pieces.iteration_time_s, rtol=1e-10)
    np.testing.assert_allclose(blocks.exposed_comm_s, pieces.exposed_comm_s, rtol=1e-9,
                               atol=1e-12)
    # the chunks hide all-to-all time the blocking plan exposes (whether the iteration gains
    # depends on what the smaller GEMMs and collectives lose: test_ep_overlap.py)
    assert (pieces.exposed_comm_by_kind["ep"] < 0.95 * blocking.exposed_comm_by_kind["ep"]).all()


def test_blocks_match_the_piece_graph_in_a_wide_batch():
    # from 32 points the engine costs distinct segment rows once (another code path)
    wide = [replace(BASE, scaleout=replace(BASE.scaleout, bandwidth_GBps=2.0 + 10.0 * i))
            for i in range(40)]
    kw = dict(tp=4, pp=4, vp=2, sequence_parallel=True)
    pieces = simulate_batch(MODEL, _plan(False, **kw), wide)
    blocks = simulate_batch(MODEL, _plan(True, **kw), wide)
    np.testing.assert_allclose(blocks.iteration_time_s, pieces.iteration_time_s, rtol=1e-10)
    assert np.ptp(blocks.iteration_time_s) > 0.01 * blocks.iteration_time_s.min()


def test_blocks_costed_once_per_batch_match_in_every_tile(monkeypatch):
    wide = [replace(BASE, scaleout=replace(BASE.scaleout, bandwidth_GBps=2.0 + 10.0 * i))
            for i in range(40)]
    kw = dict(tp=4, pp=2, sequence_parallel=True)
    whole = simulate_batch(MODEL, _plan(True, **kw), wide)
    monkeypatch.setattr(evaluate, "_TILE_BYTES", 1)  # tiles of 16 points: 16, 16, 8
    monkeypatch.setattr(evaluate, "_TILE_MIN_POINTS", 16)
    _compiled.cache_clear()
    tiled = simulate_batch(MODEL, _plan(True, **kw), wide)
    pieces = simulate_batch(MODEL, _plan(False, **kw), wide)
    np.testing.assert_allclose(tiled.iteration_time_s, pieces.iteration_time_s, rtol=1e-10)
    np.testing.assert_allclose(tiled.iteration_time_s, whole.iteration_time_s, rtol=1e-12)
    for kind, seconds in tiled.exposed_comm_by_kind.items():
        np.testing.assert_allclose(seconds, whole.exposed_comm_by_kind[kind], rtol=1e-12,
                                   atol=1e-15)


def test_blocks_match_the_piece_graph_for_moe_with_expert_parallelism():
    kw = dict(tp=2, pp=2, ep=4, sequence_parallel=True)
    pieces = simulate_batch(MOE, _plan(False, **kw), SYSTEMS[:2])
    blocks = simulate_batch(MOE, _plan(True, **kw), SYSTEMS[:2])
    np.testing.assert_allclose(blocks.iteration_time_s, pieces.iteration_time_s, rtol=1e-10)


def test_the_blocks_graph_is_plain_runs_and_far_smaller():
    kw = dict(tp=4, pp=2, dp=8, sequence_parallel=True)
    pieces = build_transformer(MODEL, _plan(False, **kw), 8)
    blocks = build_transformer(MODEL, _plan(True, **kw), 8)
    assert pieces.pipelined_blocks == () and len(blocks.pipelined_blocks) >= 4
    assert pieces.condensed is not None and blocks.condensed is not None
    n_pieces, n_blocks = pieces.condensed.chains.num_nodes, blocks.condensed.chains.num_nodes
    assert n_blocks * 3 < n_pieces, (n_blocks, n_pieces)
    names = [blocks.ops.template_names[b.exposed_template] for b in blocks.pipelined_blocks]
    assert all(n.startswith("tp_overlap_exposed[") for n in names)


def test_a_ring_spans_its_chunks_or_its_transfers():
    # n chunks of c beside n - 1 transfers of k, chunk j waiting for the j-th transfer:
    # the last chunk ends at max over i of (i k + (n - i) c), i.e. max(n c, (n - 1) k + c)
    for n, chunk_s, kv_s in ((2, 1.0, 3.0), (4, 1.0, 0.5), (4, 1.0, 1.5), (8, 2.0, 2.0)):
        block = PipelinedBlock.ring(3, 0, 1, n)
        tdur = np.array([[chunk_s * n], [kv_s], [0.0], [0.0]])  # template 0: the whole core
        span = max(n * chunk_s, (n - 1) * kv_s + chunk_s)
        exposed = block_exposed_s(block, tdur, np.ones((1, 1)))[0, 0]
        assert exposed == pytest.approx(span - n * chunk_s), (n, chunk_s, kv_s)


def test_without_tp_overlap_or_a_ring_the_flag_changes_nothing():
    plain = ParallelSpec(global_batch=64, tp=4, pp=2, sequence_parallel=True)
    flagged = replace(plain, overlap_blocks=True)
    a, b = simulate_batch(MODEL, plain, SYSTEMS), simulate_batch(MODEL, flagged, SYSTEMS)
    assert np.array_equal(a.iteration_time_s, b.iteration_time_s)
    assert build_transformer(MODEL, replace(flagged, dp=8), 8).pipelined_blocks == ()


@pytest.mark.parametrize("tp_s, gemm_s", [(1.0, 3.0), (3.0, 1.0), (2.0, 2.0)])
def test_a_two_step_block_spans_the_flow_shop_makespan(tp_s, gemm_s):
    # an all-gather then a GEMM, 4 pieces each: the last piece of the GEMM ends after
    # sum(step / 4) + 3 * max(step / 4) (the longest path stays 4 pieces in the slowest step)
    block = PipelinedBlock.pipelined_steps(2, ((False, 0), (True, 1)), 4)
    tdur = np.array([[tp_s], [gemm_s], [0.0]])
    span = (tp_s + gemm_s) / 4 + 3 * max(tp_s, gemm_s) / 4
    scale = np.ones((1, 1))
    assert block_exposed_s(block, tdur, scale)[0, 0] == pytest.approx(span - gemm_s)
    # compute slowed down by half on a second stage: its GEMM pieces take 1.5x
    scale = np.array([[1.0], [1.5]])
    slow_span = (tp_s + 1.5 * gemm_s) / 4 + 3 * max(tp_s, 1.5 * gemm_s) / 4
    np.testing.assert_allclose(block_exposed_s(block, tdur, scale)[:, 0],
                               [span - gemm_s, slow_span - 1.5 * gemm_s])


def test_three_steps_across_both_streams_follow_the_recurrence():
    # GEMM -> reduce-scatter -> GEMM: the second GEMM's piece j waits for the reduce-scatter's
    # piece j and for the first GEMM's last piece (same stream); worked by hand, pieces of
    # 1 (GEMM a), 2 (RS), 0.5 (GEMM b):
    # a: 1 2 3 4; rs: 3 5 7 9; b: max(4, 3) + .5 = 4.5, max(4.5, 5) + .5 = 5.5, 7.5, 9.5
    block = PipelinedBlock.pipelined_steps(3, ((True, 0), (False, 1), (True, 2)), 4)
    tdur = np.array([[4.0], [8.0], [2.0], [0.0]])
    exposed = block_exposed_s(block, tdur, np.ones((1, 1)))
    assert exposed[0, 0] == pytest.approx(9.5 - (4.0 + 2.0))


def test_a_flag_that_is_not_a_bool_is_named():
    for bad in ("yes", 1, None):
        with pytest.raises(InputError, match=r"parallel.overlap_blocks=.*must be true or false"):
            ParallelSpec(overlap_blocks=bad)  # type: ignore[arg-type]


def test_what_cannot_cost_blocks_says_so():
    plan = _plan(True, tp=4, pp=2, sequence_parallel=True)
    astra = simulate_batch(MODEL, plan, SYSTEMS[:1], fidelity="astra")
    assert not astra.feasible.any()
    assert str(astra.reason[0]).startswith("parallel.overlap_blocks")
    with pytest.raises(InputError, match="parallel.overlap_blocks"):
        formats.workload_traces(MODEL, plan, SYSTEMS[0])
    twin = replace(BASE.accelerator, name="twin")  # the same numbers on a second pool
    mixed = replace(BASE, pools=(DevicePool(count=32), DevicePool(twin, count=32)))
    res = simulate_batch(MODEL, plan, [mixed])
    assert not res.feasible.any()
    assert "mixed device pools" in str(res.reason[0])
    assert simulate_batch(MODEL, _plan(False, tp=4, pp=2, sequence_parallel=True),
                          [mixed]).feasible.all()  # as pieces it runs


def test_the_timeline_of_blocks_ends_at_the_iteration_time():
    plan = _plan(True, tp=4, pp=2, sequence_parallel=True)
    events = formats.chrome_trace(MODEL, plan, SYSTEMS[1])["traceEvents"]
    end_us = max(e["ts"] + e["dur"] for e in events if e["ph"] == "X")
    iteration_s = simulate_batch(MODEL, plan, SYSTEMS[1:2]).iteration_time_s[0]
    assert end_us == pytest.approx(iteration_s * 1e6, rel=1e-9)
    names = {e["name"] for e in events if e["ph"] == "X"}
    assert any(n.startswith("tp_overlap_exposed[") for n in names)
