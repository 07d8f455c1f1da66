"""The traced family: costs from the kernel models, DDP / ZeRO / FSDP traffic, ASTRA-sim export."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from simcore.engine.evaluate import (
    compile_workload,
    evaluate_times,
    kernel_durations,
    template_durations,
)
from simcore.fidelity.astra.costs import astra_template_durations, astra_workload
from simcore.hardware import SystemBatch, gemm_time_s, memory_bound_time_s
from simcore.ir.graph import CommType, NodeKind
from simcore.specs.parallel import ParallelSpec
from simcore.specs.system import AcceleratorSpec, SystemSpec, TopologyDimSpec
from simcore.traces.pytorch.api import write_step
from simcore.workloads._base import Workload
from simcore.workloads.layout import RankLayout
from simcore.workloads.traced.family import TracedFamily, tiny_step
from simcore.workloads.traced.generator import ddp_buckets
from simcore.workloads.traced.spec import TracedSpec

FAM = TracedFamily()
SYSTEM = SystemSpec(num_gpus=16, gpus_per_node=8, accelerator=AcceleratorSpec(),
                    scaleout=TopologyDimSpec(kind="Switch", bandwidth_GBps=25.0, latency_ns=2500.0))


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SIMSWEEP_CACHE_DIR", str(tmp_path / "et-cache"))


def _plan(**kw: object) -> ParallelSpec:
    base: dict[str, object] = {"micro_batch": 4, "global_batch": 128, "precision": "fp16"}
    return ParallelSpec(**{**base, **kw}).resolve(SYSTEM.num_gpus)  # type: ignore[arg-type]


def _spec(tmp_path: Path) -> TracedSpec:
    return TracedSpec(trace=write_step(tmp_path / "tiny", tiny_step()))


def test_compute_is_the_kernel_models_summed_over_the_ops(tmp_path: Path) -> None:
    """One rank, no overlap partner: compute time = sum over ops of gemm_time_s / memory_bound_time_s
    of its shapes, x micro-batches, + the optimizer pass (Adam, 28 B per parameter)."""
    spec, par = _spec(tmp_path), _plan()
    step = spec.step
    sb = SystemBatch.from_specs([SYSTEM])
    per_mb = 0.0
    for op in step.ops:
        if op.gemms:
            m, n, k, _ = op.gemms[0]
            per_mb += float(gemm_time_s(sb, m, n, k, "fp16")[0, 0])
        else:
            per_mb += float(memory_bound_time_s(sb, op.bytes_read + op.bytes_written)[0, 0])
    opt = float(memory_bound_time_s(sb, step.num_params * 28.0)[0, 0])
    cw = compile_workload(FAM.build(spec, par, 8))
    bd = evaluate_times(cw, template_durations(cw, sb, "fp16"))
    assert par.num_micro_batches == 2
    assert float(bd.compute_s[0]) == pytest.approx(2 * per_mb + opt, rel=1e-12)
    assert float(bd.iteration_time_s[0]) > float(bd.compute_s[0])  # the exposed all-reduce


@pytest.mark.parametrize("zero,overlap,colls", [
    (0, True, {CommType.ALL_REDUCE: 1}),
    (1, True, {CommType.REDUCE_SCATTER: 1, CommType.ALL_GATHER: 1}),
    (2, False, {CommType.REDUCE_SCATTER: 2, CommType.ALL_GATHER: 1}),  # every micro-batch
    (3, True, {CommType.REDUCE_SCATTER: 2, CommType.ALL_GATHER: 2 * 2}),  # fwd + bwd gathers
])
def test_data_parallel_traffic_as_pytorch_issues_it(tmp_path: Path, zero: int, overlap: bool,
                                                     colls: dict[CommType, int]) -> None:
    spec = _spec(tmp_path)
    w = FAM.build(spec, _plan(zero_stage=zero, dp_overlap=overlap), 8)
    g = w.graph
    kinds = {}
    tmpl = g.attr("template").astype(int)
    for i in np.flatnonzero(g.kind == NodeKind.COLLECTIVE):
        (kid, _), = w.ops.templates[tmpl[i]]
        cost, args = w.ops.kernels[kid]
        assert cost == "coll" and args[1] == 2 * 64 * 64 * 4 and args[2] == 16  # one bucket
        kinds[CommType(int(args[0]))] = kinds.get(CommType(int(args[0])), 0) + 1
    assert kinds == colls


def _direct_and_emulated_ns(spec: TracedSpec, par: ParallelSpec, tmp_path: Path,
                            groups_check: bool = False) -> tuple[float, float]:
    """(direct ``fidelity=astra`` iteration ns, the emulated run of the exported traces' ns):
    the family's graph costed with ASTRA-sim's rules, and its Chakra export run through the
    ASTRA-sim emulation (``simsweep astra``'s engine) on the system the exporter writes."""
    from simcore.emulator.inputs import read_comm_groups, read_network, read_system
    from simcore.emulator.load import read_programs
    from simcore.emulator.run import simulate_astra
    from simcore.fidelity.astra.export_system import network_yaml, system_json
    from simcore.traces.chakra.export import write_comm_groups, write_traces

    w = FAM.build(spec, par, SYSTEM.gpus_per_node)
    sb = SystemBatch.from_specs([SYSTEM])
    cw = compile_workload(astra_workload(w))
    tdur = template_durations(cw, sb, par.precision)
    direct = evaluate_times(cw, astra_template_durations(cw.workload, par, [SYSTEM], tdur))
    traces, groups = FAM.export_traces(w, RankLayout.of(par, SYSTEM.gpus_per_node), np.asarray(tdur[:, 0]) * 1e6)
    if groups_check:
        assert len(traces) == 16 and list(groups.values()) == [tuple(range(16))]
    out = str(tmp_path / "w")
    write_traces(out, [traces[r] for r in range(16)])
    write_comm_groups(f"{out}.comm_groups.json", groups)
    Path(f"{out}.system.json").write_text(json.dumps(system_json(SYSTEM)))
    Path(f"{out}.network.yml").write_text(network_yaml(SYSTEM))
    network = read_network(Path(f"{out}.network.yml"))
    got = simulate_astra(read_programs(out), read_system(Path(f"{out}.system.json")), network,
                         "unaware", read_comm_groups(Path(f"{out}.comm_groups.json"), network.npus))
    return float(direct.iteration_time_s[0]) * 1e9, float(max(r.finish_ns for r in got))


@pytest.mark.parametrize("zero,overlap", [(0, True), (0, False), (1, True), (2, True),
                                          (3, True), (3, False)])
def test_export_through_astra_equals_the_direct_astra_fidelity(tmp_path: Path, zero: int,
                                                               overlap: bool) -> None:
    """The data-parallel traced model exported to Chakra (one ET per rank) and run by the
    ASTRA-sim emulation (``simsweep astra``'s engine) ends when the direct engine with
    ASTRA-sim's costs says, to the ns."""

    spec, par = _spec(tmp_path), _plan(zero_stage=zero, dp_overlap=overlap)
    direct_ns, emulated_ns = _direct_and_emulated_ns(spec, par, tmp_path, groups_check=True)
    assert direct_ns == pytest.approx(emulated_ns, abs=0.5)


def test_footprint_shards_with_zero_and_counts_activations(tmp_path: Path) -> None:
    spec = _spec(tmp_path)
    step = spec.step
    params = step.num_params
    f0 = FAM.footprint(spec, _plan(), 0)
    assert f0["weights"] == f0["gradients"] == 4 * params and f0["optimizer"] == 8 * params
    assert f0["activations"] == step.activation_bytes
    f3 = FAM.footprint(spec, _plan(zero_stage=3), 0)
    assert f3["weights"] == f3["gradients"] == 4 * params // 16 and f3["optimizer"] == 8 * params // 16
    assert f3["total"] < f0["total"]


def test_flops_samples_and_shape_rules(tmp_path: Path) -> None:
    spec = _spec(tmp_path)
    par = _plan()
    assert FAM.flops_per_iter(spec, par) == spec.step.flops() / 4 * 128
    assert FAM.samples_per_iter(spec, par) == 128
    assert FAM.check(spec, par, SYSTEM) is None
    assert "micro_batch" in str(FAM.check(spec, _plan(micro_batch=2), SYSTEM))
    cp2 = ParallelSpec(cp=2, micro_batch=4, global_batch=128).resolve(16)
    assert "parallel.cp=2" in str(FAM.check(spec, cp2, SYSTEM))
    pp2 = ParallelSpec(pp=2, micro_batch=4, global_batch=128).resolve(16)
    assert "parallel.pp=2" in str(FAM.check(spec, pp2, SYSTEM))  # no blocks were named
    missing = TracedSpec(trace=str(tmp_path / "nope.0.et"))
    assert "workload.trace" in str(FAM.check(missing, par, SYSTEM))
    # the preset's "???" (no trace set) is refused as such, not looked up as a file
    from simcore.errors import InputError
    with pytest.raises(InputError, match=r"workload.trace='\?\?\?': must name an ET file"):
        TracedSpec(trace="???")


def test_ddp_buckets_equal_pytorch_reducer_assignment() -> None:
    """Our bucket rule against PyTorch's own reducer (C++ compute_bucket_assignment_by_size)."""
    torch = pytest.importorskip("torch")
    dist = pytest.importorskip("torch.distributed")
    from simcore.traces.pytorch.api import trace_model

    step = trace_model("torchvision.models:resnet50", ["2x3x224x224"])
    with torch.device("meta"):
        import torchvision

        params = list(torchvision.models.resnet50().parameters())
    rev = list(reversed(range(len(params))))
    want, *_ = dist._compute_bucket_assignment_by_size(
        [params[i] for i in rev], [dist._DEFAULT_FIRST_BUCKET_BYTES, 25 * 2**20],
        [False] * len(params), rev)
    assert ddp_buckets(step.params, 25.0) == [list(b) for b in want]


def _kernel_class_seconds(workload: Workload, system: SystemSpec) -> dict[str, float]:
    """Seconds per kernel class (gemm, attn, mem, coll) summed over the graph's nodes."""
    cw = compile_workload(workload)
    kd = kernel_durations(cw.ops, SystemBatch.from_specs([system]), "bf16")[:, 0]
    tmpl = workload.graph.attr("template").astype(int)
    out: dict[str, float] = {}
    for t in tmpl[tmpl >= 0]:
        for kid, weight in workload.ops.templates[t]:
            cost = workload.ops.kernels[kid][0]
            out[cost] = out.get(cost, 0.0) + weight * float(kd[kid])
    return out


_GPT_SHAPE = {"layers": 4, "hidden": 1024, "heads": 16, "vocab": 8192}
_GPT_BATCH, _GPT_SEQ = 2, 1024


@cache
def _traced_gpt(folder: str) -> TracedSpec:
    """The GPT block stack with its LM loss and tied embedding, traced in bf16 (blocks named)."""
    from simcore.traces.pytorch.api import trace_model

    step = trace_model("tests.simcore.traces.pytorch.gpt:GPTLM", [f"{_GPT_BATCH}x{_GPT_SEQ}:int64"],
                       dtype="bfloat16", kwargs={**_GPT_SHAPE, "tie": True}, blocks="blocks")
    return TracedSpec(trace=write_step(Path(folder) / "gpt", step))


@pytest.fixture(scope="module")
def traced_gpt(tmp_path_factory: pytest.TempPathFactory) -> TracedSpec:
    pytest.importorskip("torch")
    return _traced_gpt(str(tmp_path_factory.mktemp("gpt")))


_PLANS = [(1, 1, True), (1, 2, True), (1, 4, True), (1, 2, False), (2, 1, True), (2, 2, True),
          (4, 2, True)]


def _gpt_plan(pp: int, tp: int, flash: bool = True) -> ParallelSpec:
    """pp x tp x dp = 8 GPUs, 4 micro-batches of the traced batch per iteration."""
    return ParallelSpec(pp=pp, tp=tp, micro_batch=_GPT_BATCH,
                        global_batch=8 // (pp * tp) * _GPT_BATCH * 4, precision="bf16",
                        flash_attention=flash).resolve(8)


@pytest.mark.parametrize("pp,tp,flash", _PLANS)
def test_traced_gpt_and_the_transformer_family_agree(traced_gpt: TracedSpec, pp: int, tp: int,
                                                     flash: bool) -> None:
    """Two independent paths to one model: a GPT block stack written in PyTorch (its
    language-model loss: fp32 cross-entropy over the logits, as Megatron-LM computes it; the
    output layer tied to the word embedding, Megatron's default, which the generator holds and
    reduces once) traced, and the transformer family's generator on the same shape, on the same
    8-GPU node with data, tensor and pipeline parallelism: equal model FLOPs; parameters equal but the
    untied output layer ``ModelSpec.num_params`` counts; the matrix products and attention
    cores cost the same to the ns (same kernel classes and per-rank shapes, the linear layers
    split Megatron-style); the memory-bound passes within 15% (the trace counts each kernel's
    tensor bytes, the generator a fixed number of passes per block: 2x forward in backward, 4V
    per token for the loss); iteration time within 5%. With ``flash_attention = false`` both
    cost the recorded fused core as Megatron's unfused one (batched GEMMs, softmax)."""
    from simcore.api import simulate_batch
    from simcore.workloads.transformer.generator import build_transformer
    from simcore.workloads.transformer.spec import ModelSpec

    spec, shape = traced_gpt, _GPT_SHAPE
    model = ModelSpec(name="gpt", num_layers=shape["layers"], hidden_size=shape["hidden"],
                      num_heads=shape["heads"], seq_len=_GPT_SEQ, vocab_size=shape["vocab"])
    system = SystemSpec(num_gpus=8, gpus_per_node=8)
    par = _gpt_plan(pp, tp, flash)
    assert FAM.check(spec, par, system) is None
    assert spec.step.num_params == model.num_params() - shape["vocab"] * shape["hidden"]
    assert FAM.flops_per_iter(spec, par) == model.model_flops_per_sample() * par.global_batch
    w = FAM.build(spec, par, 8)
    cw = compile_workload(w)
    traced = evaluate_times(cw, template_durations(cw, SystemBatch.from_specs([system]), "bf16"))
    generated = simulate_batch(model, par, [system])
    ours = _kernel_class_seconds(w, system)
    theirs = _kernel_class_seconds(build_transformer(model, par, 8), system)
    assert ours["gemm"] == pytest.approx(theirs["gemm"], rel=1e-9)
    assert ours.get("attn", 0.0) == pytest.approx(theirs.get("attn", 0.0), rel=1e-9)
    assert ("attn" in ours) == flash
    assert ours["mem"] == pytest.approx(theirs["mem"], rel=0.15)
    assert float(traced.compute_s[0]) == pytest.approx(float(generated.compute_s[0]), rel=0.05)
    assert float(traced.iteration_time_s[0]) == pytest.approx(
        float(generated.iteration_time_s[0]), rel=0.05)


@pytest.mark.parametrize("tp", [2, 4])
def test_tensor_parallel_allreduces_equal_the_closed_form(traced_gpt: TracedSpec, tp: int) -> None:
    """Megatron's TP traffic per micro-batch: per block two all-reduces of the activation
    ``b s h`` in forward (after each row-parallel product) and two in backward (the
    column-parallel input gradients), plus one for the vocabulary-parallel output layer's input
    gradient, each of ``b s h x 2`` bytes among the ``tp`` ranks; the transformer family issues
    the same per block; the split weights hold 1/tp of their elements."""
    from simcore.workloads.transformer.generator import build_transformer
    from simcore.workloads.transformer.spec import ModelSpec

    shape = _GPT_SHAPE
    par = _gpt_plan(1, tp)
    model = ModelSpec(name="gpt", num_layers=shape["layers"], hidden_size=shape["hidden"],
                      num_heads=shape["heads"], seq_len=_GPT_SEQ, vocab_size=shape["vocab"])
    activation = _GPT_BATCH * _GPT_SEQ * shape["hidden"] * 2

    def tp_colls(w: Workload) -> list[tuple[float, ...]]:
        tmpl = w.graph.attr("template").astype(int)
        out = []
        for i in np.flatnonzero(w.graph.kind == NodeKind.COLLECTIVE):
            (kid, _), = w.ops.templates[tmpl[i]]
            if w.ops.template_kind[tmpl[i]] == 0:  # CommKind.TP
                out.append(w.ops.kernels[kid][1])
        return out

    ours = tp_colls(FAM.build(traced_gpt, par, 8))
    m = par.num_micro_batches
    assert len(ours) == m * (4 * shape["layers"] + 1)
    assert set(ours) == {(float(CommType.ALL_REDUCE), float(activation), float(tp), float(tp))}
    theirs = tp_colls(build_transformer(model, par, 8))
    assert len(theirs) == m * 4 * shape["layers"] and set(theirs) == set(ours)
    weights = FAM.footprint(traced_gpt, par)["weights"]
    blocks = shape["layers"] * model.layer_params() // tp
    tied = shape["vocab"] * shape["hidden"] // tp  # the output layer's weight, split by vocabulary
    assert weights == 2 * (blocks + tied)


def test_tensor_parallel_needs_named_blocks_in_linear_pairs(tmp_path: Path) -> None:
    spec = _spec(tmp_path)  # the tiny MLP: no blocks named
    tp2 = ParallelSpec(tp=2, micro_batch=4, global_batch=64).resolve(16)
    assert "needs the repeated blocks named" in str(FAM.check(spec, tp2, SYSTEM))
    sp = ParallelSpec(tp=2, micro_batch=4, global_batch=64, sequence_parallel=True).resolve(16)
    assert "parallel.sequence_parallel" in str(FAM.check(spec, sp, SYSTEM))


def _gpt_with_blocks(tmp_path: Path, layers: int = 4) -> TracedSpec:
    pytest.importorskip("torch")
    from simcore.traces.pytorch.api import trace_model

    step = trace_model("tests.simcore.traces.pytorch.gpt:GPT", ["4x64:int64"], dtype="bfloat16",
                       kwargs={"layers": layers, "hidden": 128, "heads": 4, "vocab": 512},
                       blocks="blocks")
    assert step.num_blocks == layers and step.block_out_bytes == (4 * 64 * 128 * 2,) * layers
    return TracedSpec(trace=write_step(tmp_path / "gpt", step))


def test_pipeline_stages_cut_between_the_named_blocks(tmp_path: Path) -> None:
    spec = _gpt_with_blocks(tmp_path)
    par = ParallelSpec(pp=2, micro_batch=4, global_batch=32).resolve(16)  # dp 8, 1 micro-batch
    par4 = ParallelSpec(pp=4, micro_batch=4, global_batch=64).resolve(16)  # dp 4, 4 micro-batches
    assert FAM.check(spec, par4, SYSTEM) is None
    w = FAM.build(spec, par4, 8)
    m = par4.num_micro_batches
    sends = np.flatnonzero(w.graph.kind == NodeKind.SEND)
    assert len(sends) == 2 * m * (4 - 1)  # activations forward, gradients backward, per boundary
    assert w.in_flight == (4, 3, 2, 1)  # 1F1B: min(pp - s, m)
    (kid, _), = w.ops.templates[int(w.graph.attr("template")[sends[0]])]
    assert w.ops.kernels[kid][1][0] == 4 * 64 * 128 * 2  # one block output in bf16
    # every parameter on exactly one stage; the embedding on the first, the head on the last
    weights = [FAM.footprint(spec, par4, s)["weights"] for s in range(4)]
    assert sum(weights) == spec.step.num_params * 2
    assert weights[0] > weights[1] and weights[3] > weights[1]
    assert "parallel.pp=8" in str(FAM.check(spec, ParallelSpec(pp=8, micro_batch=4,
                                                              global_batch=8).resolve(16), SYSTEM))
    assert FAM.check(spec, par, SYSTEM) is None


@pytest.mark.parametrize("pp,zero,tp", [(2, 0, 1), (4, 1, 1), (1, 0, 2), (2, 1, 4)])
def test_pipelined_export_through_astra_equals_the_direct_astra_fidelity(
        tmp_path: Path, pp: int, zero: int, tp: int) -> None:
    """Pipeline and tensor parallel traced GPT: the per-rank Chakra export (TP all-reduces with
    their communicator groups) run by the ASTRA-sim emulation equals the direct astra fidelity."""
    spec = _gpt_with_blocks(tmp_path)
    par = ParallelSpec(pp=pp, tp=tp, micro_batch=4, global_batch=64 // tp, zero_stage=zero,
                       precision="bf16").resolve(16)
    assert FAM.check(spec, par, SYSTEM) is None
    direct_ns, emulated_ns = _direct_and_emulated_ns(spec, par, tmp_path)
    assert direct_ns == pytest.approx(emulated_ns, abs=0.5)


def test_step_cache_is_keyed_by_content_not_path_or_mtime(tmp_path: Path) -> None:
    """A trace replaced by another of the same size with the old mtime kept (``cp -p``,
    ``rsync -t``) is read again; the same content under another path is the same step."""
    import os
    import shutil

    path = write_step(tmp_path / "a", tiny_step(batch=4))
    other = write_step(tmp_path / "b", tiny_step(batch=8))
    first = TracedSpec(trace=path).step
    assert first.batch_size == 4
    st = os.stat(path)
    assert os.path.getsize(other) == st.st_size  # only the shapes differ, not the field widths
    shutil.copyfile(other, path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert TracedSpec(trace=path).step.batch_size == 8
    copy = tmp_path / "c.0.et"
    shutil.copyfile(other, copy)
    assert TracedSpec(trace=str(copy)).step is TracedSpec(trace=path).step


def test_pipeline_sends_with_tensor_parallelism_are_scattered(tmp_path: Path) -> None:
    """PP 2 x TP 2: each TP rank sends 1/tp of the boundary activation (Megatron's
    scatter/gather), as the transformer family's pp_send."""
    spec = _gpt_with_blocks(tmp_path)
    par = ParallelSpec(pp=2, tp=2, micro_batch=4, global_batch=32, precision="bf16").resolve(16)
    w = FAM.build(spec, par, 8)
    sends = np.flatnonzero(w.graph.kind == NodeKind.SEND)
    sizes = {w.ops.kernels[w.ops.templates[int(w.graph.attr("template")[i])][0][0]][1][0]
             for i in sends}
    assert sizes == {4 * 64 * 128 * 2 / 2}
