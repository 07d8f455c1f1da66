"""The condensed transformer build (runs, no node objects) against the node-by-node reference.

``build_transformer`` emits chains of runs (:mod:`simcore.ir.runs`); ``build_transformer_nodes``
is the original generator, one node per op, compiled by ``compile_plan``. For many plans
(interleaved, SP, CP, MoE/EP, ZeRO 0-3, recompute, uneven splits, TP overlap, chunked
all-to-all, no DP overlap)
the compiled arrays and the evaluated metrics must be bit-identical, with both fidelities.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from simcore.api import check_structure
from simcore.engine.evaluate import CompiledWorkload, compile_workload, evaluate_times
from simcore.fidelity import REGISTRY
from simcore.hardware.batch import SystemBatch
from simcore.ir.graph import LazyGraph
from simcore.specs.parallel import ParallelSpec
from simcore.specs.system import SystemSpec
from simcore.workloads.pipeline import pipeline_program_arrays, stage_program, stage_program_arrays
from simcore.workloads.transformer.generator import (
    _RunGenerator,
    build_transformer,
    build_transformer_nodes,
)
from simcore.workloads.transformer.spec import ModelSpec

DENSE = ModelSpec(name="dense", num_layers=12, hidden_size=1024, num_heads=16, seq_len=1024,
                  vocab_size=8192)
MOE = ModelSpec(name="moe", num_layers=8, hidden_size=1024, num_heads=16, seq_len=1024,
                vocab_size=8192, num_experts=8, top_k=2)

PLANS = [
    (DENSE, 64, ParallelSpec(tp=4, pp=4, micro_batch=1, global_batch=32)),
    (DENSE, 64, ParallelSpec(tp=2, pp=4, vp=3, micro_batch=1, global_batch=32,
                             sequence_parallel=True, recompute="selective", zero_stage=1)),
    (DENSE, 32, ParallelSpec(tp=2, pp=4, vp=2, global_batch=16, recompute="full",
                             zero_stage=2)),
    (DENSE, 32, ParallelSpec(tp=2, pp=2, global_batch=16, zero_stage=3, dp_overlap=False)),
    (DENSE, 32, ParallelSpec(tp=2, pp=2, global_batch=16, zero_stage=3)),
    (DENSE, 32, ParallelSpec(tp=2, pp=4, global_batch=16, zero_stage=1, dp_overlap=False)),
    (DENSE, 64, ParallelSpec(tp=2, cp=2, pp=4, global_batch=16, sequence_parallel=True)),
    (DENSE, 32, ParallelSpec(tp=4, pp=2, global_batch=16, sequence_parallel=True,
                             tp_comm_overlap=True)),
    (DENSE, 40, ParallelSpec(tp=2, pp=5, global_batch=20, first_stage_layers=1,
                             last_stage_layers=2, recompute="full")),
    (DENSE, 16, ParallelSpec(tp=8, pp=1, global_batch=16, zero_stage=2)),
    (DENSE, 16, ParallelSpec(tp=1, pp=8, global_batch=16, flash_attention=False)),
    (DENSE, 8, ParallelSpec(tp=4, pp=2, global_batch=8, first_stage_layers=7)),
    (DENSE, 2, ParallelSpec(pp=2, global_batch=4)),
    (MOE, 32, ParallelSpec(tp=2, pp=2, ep=4, global_batch=16, sequence_parallel=True,
                           zero_stage=1)),
    (MOE, 32, ParallelSpec(tp=1, pp=4, vp=2, ep=2, global_batch=32, recompute="selective")),
    # the whole-plan batch's edges: pp 1, ZeRO-1/2 gathers with and without DP overlap,
    # interleaving (pp 2: both sends to one link; pp 3), fewer micro-batches than stages,
    # uneven first/last stages, MoE's two reductions and gathers per layer, DeepSpeed's
    # BF16_Optimizer (gathers without ZeRO), fp16, no DP overlap without ZeRO
    (DENSE, 8, ParallelSpec(tp=8, pp=1, global_batch=16, zero_stage=1)),
    (DENSE, 16, ParallelSpec(tp=8, pp=1, global_batch=16, zero_stage=1, dp_overlap=False)),
    (DENSE, 32, ParallelSpec(tp=2, pp=2, vp=2, global_batch=16, zero_stage=1)),
    (DENSE, 48, ParallelSpec(tp=2, pp=3, vp=2, global_batch=24, zero_stage=2,
                             dp_overlap=False)),
    (DENSE, 64, ParallelSpec(tp=2, pp=4, global_batch=16, zero_stage=2)),
    (DENSE, 64, ParallelSpec(tp=1, pp=8, global_batch=24, zero_stage=1)),
    (DENSE, 40, ParallelSpec(tp=2, pp=5, global_batch=60, first_stage_layers=4,
                             last_stage_layers=1, zero_stage=1, dp_overlap=False)),
    (DENSE, 64, ParallelSpec(tp=2, pp=4, vp=3, global_batch=64, zero_stage=2)),
    (MOE, 32, ParallelSpec(tp=2, pp=2, ep=4, global_batch=16, zero_stage=1, dp_overlap=False)),
    (MOE, 64, ParallelSpec(tp=1, pp=4, vp=2, ep=2, global_batch=64, zero_stage=2)),
    (MOE, 64, ParallelSpec(tp=1, pp=4, ep=2, global_batch=16, dp_overlap=False)),
    (DENSE, 32, ParallelSpec(tp=2, pp=4, global_batch=32, grad_accumulation_fusion=False,
                             bf16_optimizer=True)),
    (DENSE, 32, ParallelSpec(tp=2, pp=2, global_batch=16, precision="fp16",
                             grad_accumulation_fusion=False, zero_stage=1, dp_overlap=False)),
    (DENSE, 8, ParallelSpec(tp=4, pp=2, global_batch=2)),
    # passes recorded once per kind and replayed (TP overlap pieces, CP rings): interleaving
    # with ZeRO-1 gathers before the first forwards, recompute blocks, reductions every
    # micro-batch (ZeRO-2) or after the flush, uneven stages, MoE, CP with TP overlap, pp 1
    (DENSE, 32, ParallelSpec(tp=2, pp=4, vp=3, global_batch=32, sequence_parallel=True,
                             recompute="selective", zero_stage=1, tp_comm_overlap=True)),
    (DENSE, 32, ParallelSpec(tp=2, pp=4, global_batch=16, recompute="full", zero_stage=1,
                             dp_overlap=False, tp_comm_overlap=True)),
    (DENSE, 32, ParallelSpec(tp=4, pp=2, vp=2, global_batch=16, sequence_parallel=True,
                             zero_stage=2, tp_comm_overlap=True)),
    (DENSE, 64, ParallelSpec(tp=2, cp=2, pp=2, vp=2, global_batch=16, sequence_parallel=True,
                             recompute="selective", tp_comm_overlap=True)),
    (DENSE, 32, ParallelSpec(tp=2, cp=2, pp=4, global_batch=24, zero_stage=1,
                             dp_overlap=False, recompute="full")),
    (DENSE, 40, ParallelSpec(tp=2, pp=5, global_batch=20, first_stage_layers=1,
                             last_stage_layers=3, tp_comm_overlap=True)),
    (MOE, 32, ParallelSpec(tp=2, pp=2, ep=4, global_batch=16, sequence_parallel=True,
                           zero_stage=1, tp_comm_overlap=True)),
    (DENSE, 8, ParallelSpec(tp=8, pp=1, global_batch=16, zero_stage=1, tp_comm_overlap=True)),
    (DENSE, 8, ParallelSpec(tp=4, pp=2, global_batch=2, tp_comm_overlap=True)),
    # ZeRO-3 passes replayed: gathers waiting for the layer end one or two before (one layer
    # per chunk: the end two passes back), with interleaving, TP overlap, pp 1
    (DENSE, 32, ParallelSpec(tp=2, pp=4, vp=3, global_batch=32, zero_stage=3)),
    (DENSE, 32, ParallelSpec(tp=2, pp=4, vp=3, global_batch=32, zero_stage=3,
                             dp_overlap=False, recompute="full")),
    (DENSE, 32, ParallelSpec(tp=4, pp=2, vp=2, global_batch=16, zero_stage=3,
                             sequence_parallel=True, tp_comm_overlap=True)),
    (DENSE, 8, ParallelSpec(tp=4, pp=1, global_batch=16, zero_stage=3)),
    # interleaving with micro-batch groups other than pp (Megatron-Core): 6 micro-batches in
    # one group on 4 stages with ZeRO-1 prefetched gathers; groups of 6 of 12, ZeRO-2
    (DENSE, 32, ParallelSpec(tp=2, pp=4, vp=2, global_batch=24, microbatch_group=6,
                             zero_stage=1)),
    (DENSE, 32, ParallelSpec(tp=2, pp=4, vp=3, global_batch=48, microbatch_group=6,
                             zero_stage=2)),
    (DENSE, 32, ParallelSpec(tp=2, pp=4, vp=2, global_batch=40, microbatch_group=6)),  # 6 + 4
    # the all-to-all pipelined with the experts in token chunks on the ep stream: alone, beside
    # TP overlap pieces, with ZeRO-3's replayed passes and interleaving, with a CP ring
    (MOE, 32, ParallelSpec(tp=2, pp=2, ep=4, global_batch=16, ep_overlap_chunks=4,
                           sequence_parallel=True, zero_stage=1)),
    (MOE, 32, ParallelSpec(tp=2, pp=2, ep=4, global_batch=16, ep_overlap_chunks=2,
                           sequence_parallel=True, tp_comm_overlap=True)),
    (MOE, 32, ParallelSpec(tp=1, pp=4, vp=2, ep=2, global_batch=32, ep_overlap_chunks=3,
                           zero_stage=3, recompute="full")),
    (MOE, 64, ParallelSpec(tp=2, cp=2, pp=2, ep=4, global_batch=16, ep_overlap_chunks=2,
                           recompute="selective", dp_overlap=False)),
]


def _systems(gpus: int) -> list[SystemSpec]:
    """Three systems of one structure: scale-out bandwidth and peak FLOP/s varied."""
    base = SystemSpec(num_gpus=gpus)
    out = [base]
    for scale in (0.5, 3.0):
        acc = replace(base.accelerator, peak_tflops_bf16=base.accelerator.peak_tflops_bf16 * scale)
        out.append(replace(base, accelerator=acc, scaleout=replace(
            base.scaleout, bandwidth_GBps=base.scaleout.bandwidth_GBps / scale)))
    return out


def _compiled_pair(model: ModelSpec, gpus: int, plan: ParallelSpec, fidelity: str
                   ) -> tuple[CompiledWorkload, CompiledWorkload, ParallelSpec]:
    system = SystemSpec(num_gpus=gpus)
    par, reason = check_structure(model, plan, system)
    assert par is not None, reason
    fid = REGISTRY[fidelity]
    new = compile_workload(fid.prepare(build_transformer(model, par, system.gpus_per_node)))
    old = compile_workload(fid.prepare(build_transformer_nodes(model, par,
                                                               system.gpus_per_node)))
    return new, old, par


def _same_csr(a: object, b: object) -> None:
    for name in ("indptr", "indices", "data"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    assert a.shape == b.shape  # type: ignore[attr-defined]


@pytest.mark.parametrize(("model", "gpus", "plan"), PLANS, ids=[f"p{i}" for i in range(len(PLANS))])
def test_condensed_build_compiles_to_the_same_arrays(model: ModelSpec, gpus: int,
                                                     plan: ParallelSpec) -> None:
    new, old, _ = _compiled_pair(model, gpus, plan, "calibrated")
    assert isinstance(new.workload.graph, LazyGraph)
    assert not new.workload.graph.materialized  # scheduling never built the nodes
    assert new.ops.templates == old.ops.templates
    assert new.workload.in_flight == old.workload.in_flight
    assert new.ops.template_names == old.ops.template_names
    _same_csr(new.seg_counts, old.seg_counts)
    for name in ("seg_stage", "stage_counts", "overlap_counts", "template_kind"):
        np.testing.assert_array_equal(getattr(new, name), getattr(old, name))
    pn, po = new.plan, old.plan
    for name in ("seg_chain", "chain_seg_ptr", "level_pos"):
        np.testing.assert_array_equal(getattr(pn, name), getattr(po, name))
    assert len(pn.levels) == len(po.levels)
    for a, b in zip(pn.levels, po.levels, strict=True):
        for name in ("chains", "pred_segs", "seg", "pred_chains"):
            np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    for a, b in zip(pn.steps, po.steps, strict=True):
        assert (a.lo, a.hi, a.k) == (b.lo, b.hi, b.k)
        np.testing.assert_array_equal(a.pred_segs, b.pred_segs)
    for a, b in zip(new.compute_chains, old.compute_chains, strict=True):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(new.comm_chains, old.comm_chains, strict=True):
        assert list(a) == list(b)
        for k in a:
            np.testing.assert_array_equal(a[k], b[k])
    # the node level, built on demand, is the reference's (same chain numbering)
    np.testing.assert_array_equal(pn.order, po.order)
    np.testing.assert_array_equal(pn.seg_ptr, po.seg_ptr)
    assert new.workload.graph.num_nodes == old.workload.graph.num_nodes


@pytest.mark.parametrize("fidelity", sorted(REGISTRY))
@pytest.mark.parametrize(("model", "gpus", "plan"), PLANS[:9] + PLANS[11:],
                         ids=[f"p{i}" for i in [*range(9), *range(11, len(PLANS))]])
def test_condensed_build_evaluates_bit_identically(model: ModelSpec, gpus: int,
                                                   plan: ParallelSpec, fidelity: str) -> None:
    new, old, par = _compiled_pair(model, gpus, plan, fidelity)
    systems = _systems(gpus)
    fid = REGISTRY[fidelity]
    sb = SystemBatch.from_specs(systems)
    slow = fid.overlap_slowdown(sb)
    tn = fid.durations(new, sb, systems, par)
    to = fid.durations(old, sb, systems, par)
    np.testing.assert_array_equal(tn, to)
    a, b = evaluate_times(new, tn, slow), evaluate_times(old, to, slow)
    for name in ("iteration_time_s", "compute_s", "bubble_s"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    assert list(a.exposed_by_kind) == list(b.exposed_by_kind)
    for k in a.exposed_by_kind:
        np.testing.assert_array_equal(a.exposed_by_kind[k], b.exposed_by_kind[k])


@pytest.mark.parametrize(("pp", "vp"), [(1, 1), (2, 1), (4, 1), (8, 1), (2, 2), (4, 3), (3, 2)])
def test_stage_program_arrays_is_the_program(pp: int, vp: int) -> None:
    for m in (1, 2, pp, 2 * pp, 3 * pp + (1 if vp == 1 else 0)):
        if vp > 1 and m % pp:
            continue
        stage, fwd_all, mb_all, chunk_all, k_all = pipeline_program_arrays(pp, vp, m)
        for s in range(pp):
            fwd, mb, chunk = stage_program_arrays(s, pp, vp, m)
            want = [tuple(op) for op in stage_program(s, pp, vp, m)]
            assert list(zip(fwd.tolist(), mb.tolist(), chunk.tolist(), strict=True)) == want
            mine = stage == s
            got = zip(fwd_all[mine].tolist(), mb_all[mine].tolist(), chunk_all[mine].tolist(),
                      strict=True)
            assert list(got) == want
            # k: the pass's index among its stage's forwards (backwards)
            for forward in (True, False):
                sel = fwd_all[mine] == forward
                assert k_all[mine][sel].tolist() == list(range(int(sel.sum())))


@pytest.mark.parametrize(("model", "gpus", "plan"), PLANS, ids=[f"p{i}" for i in range(len(PLANS))])
def test_plans_without_zero3_tp_overlap_or_cp_are_one_batch(model: ModelSpec, gpus: int,
                                                            plan: ParallelSpec) -> None:
    """The whole-plan batch is taken exactly where it applies (not silently skipped): not for
    ZeRO-3, TP overlap, CP or chunked all-to-all pieces."""
    system = SystemSpec(num_gpus=gpus)
    par, reason = check_structure(model, plan, system)
    assert par is not None, reason
    gen = _RunGenerator(model, par, system.gpus_per_node)
    gen.emit_plan()
    per_stage = (par.zero_stage == 3 or par.tp_comm_overlap or par.cp > 1
                 or par.ep_overlap_chunks > 1)
    assert gen.path == ("per-stage" if per_stage else "batched")


@pytest.mark.parametrize(("model", "gpus", "plan"), PLANS, ids=[f"p{i}" for i in range(len(PLANS))])
def test_per_stage_passes_are_replayed(model: ModelSpec, gpus: int,
                                               plan: ParallelSpec) -> None:
    """Every pass of a per-stage plan (ZeRO-3, TP overlap, CP) is replayed from its kind's
    recording, except the first forward of each chunk that waits for ZeRO-1/2 parameter
    gathers."""
    system = SystemSpec(num_gpus=gpus)
    par, reason = check_structure(model, plan, system)
    assert par is not None, reason
    gen = _RunGenerator(model, par, system.gpus_per_node)
    gen.emit_plan()
    if gen.path == "batched":
        assert gen.replayed == 0
        return
    passes = 2 * par.num_micro_batches * par.vp * par.pp
    gathered = (par.zero_stage in (1, 2) or par.bf16_optimizer) and par.dp_overlap
    assert gen.replayed == passes - (par.vp * par.pp if gathered else 0)


def test_compiled_condensed_workload_pickles_with_its_nodes() -> None:
    import pickle

    model, gpus, plan = PLANS[1]
    new, old, _ = _compiled_pair(model, gpus, plan, "calibrated")
    back = pickle.loads(pickle.dumps(new))
    np.testing.assert_array_equal(back.plan.order, old.plan.order)
    assert back.workload.graph.num_nodes == old.workload.graph.num_nodes


@pytest.mark.parametrize(("model", "gpus", "plan"), PLANS, ids=[f"p{i}" for i in range(len(PLANS))])
def test_whole_plan_batch_records_the_per_stage_runs(model: ModelSpec, gpus: int,
                                                     plan: ParallelSpec,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The one-batch build is the per-stage build's condensed graph, field by field (incl.
    the stream ids, which follow the order the per-stage emitter creates the streams in)."""
    system = SystemSpec(num_gpus=gpus)
    par, reason = check_structure(model, plan, system)
    assert par is not None, reason
    one = build_transformer(model, par, system.gpus_per_node)
    monkeypatch.setattr(_RunGenerator, "plan_batched", lambda self: False)
    ref = build_transformer(model, par, system.gpus_per_node)
    assert one.condensed is not None and ref.condensed is not None
    a, b = one.condensed.chains, ref.condensed.chains
    assert one.in_flight == ref.in_flight
    assert one.ops.templates == ref.ops.templates
    assert a.num_nodes == b.num_nodes and a.streams == b.streams
    _same_csr(a.seg_counts, b.seg_counts)
    for name in ("seg_chain", "seg_stage", "chain_seg_ptr", "pred_ptr", "pred_seg",
                 "chain_stream", "chain_first_template", "resource_counts",
                 "stage_other_counts"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
