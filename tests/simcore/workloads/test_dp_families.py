"""ResNet, GNMT and DLRM families: shapes against the reference implementations, graphs, bad
inputs, and the Chakra export re-imported through the ASTRA-sim engine (= fidelity=astra)."""

from __future__ import annotations

from pathlib import Path

import pytest

from simcore.api import check_structure, simulate_batch
from simcore.errors import InputError
from simcore.specs.parallel import ParallelSpec
from simcore.specs.system import SystemSpec
from simcore.workloads import get_family
from simcore.workloads.cnn.layers import resnet_macs, resnet_params
from simcore.workloads.cnn.spec import ResNetSpec
from simcore.workloads.recsys.family import DLRMSpec
from simcore.workloads.rnn.family import GNMTSpec


@pytest.mark.parametrize(("depth", "width", "params"), [
    # torchvision.models: sum(p.numel() for p in resnetX().parameters()) (model docs table)
    (18, 64, 11_689_512), (34, 64, 21_797_672), (50, 64, 25_557_032),
    (101, 64, 44_549_160), (152, 64, 60_192_808), (50, 128, 68_883_240),
])
def test_resnet_parameters_match_torchvision(depth: int, width: int, params: int) -> None:
    assert resnet_params(ResNetSpec(depth=depth, width=width)) == params


def test_resnet50_forward_is_4_1_gmacs_at_224() -> None:
    # torchvision lists ResNet-50 at 4.09 GFLOPS (multiply-accumulates); ResNet-18 at 1.81
    assert resnet_macs(ResNetSpec()) / 1e9 == pytest.approx(4.09, abs=0.01)
    assert resnet_macs(ResNetSpec(depth=18)) / 1e9 == pytest.approx(1.81, abs=0.01)
    fam = get_family("resnet")
    par = ParallelSpec(global_batch=256).resolve(8)
    assert fam.flops_per_iter(ResNetSpec(), par) == pytest.approx(3 * 2 * 4.09e9 * 256, rel=3e-3)


def test_gnmt_parameters_match_the_reference_model() -> None:
    # NVIDIA DeepLearningExamples / MLPerf GNMT v2 (h=1024, 4+4 layers, vocab 32320, shared
    # embedding): the training log's "Number of parameters: 160671297"
    assert GNMTSpec().num_params() == 160_671_297


def test_gnmt_forward_macs_by_hand() -> None:
    h, v, s, t = 1024, 32320, 50, 50
    enc = 2 * s * 4 * h * (2 * h) + s * 4 * h * (3 * h) + 2 * s * 4 * h * (2 * h)
    dec = t * 4 * h * (2 * h) + 3 * t * 4 * h * (3 * h)
    att = s * h * h + t * h * h + 2 * t * s * h
    assert GNMTSpec().macs_per_sample() == enc + dec + att + t * h * v


def test_dlrm_parameters_of_the_mlperf_shapes() -> None:
    spec = DLRMSpec()
    assert spec.interaction_width == 27 * 26 // 2 + 128 == 479
    bottom = (13 * 512 + 512) + (512 * 256 + 256) + (256 * 128 + 128)
    top = (479 * 1024 + 1024) + (1024 * 1024 + 1024) + (1024 * 512 + 512) + (512 * 256 + 256) + 257
    assert spec.mlp_params() == bottom + top == 2_368_897
    assert spec.num_params() == bottom + top + 26 * 1_000_000 * 128


def test_dlrm_graph_has_forward_and_backward_all_to_all() -> None:
    fam = get_family("dlrm")
    spec, sys8 = fam.tiny_spec(), SystemSpec(num_gpus=8, gpus_per_node=4)
    par, why = check_structure(spec, ParallelSpec(global_batch=8, ep=8), sys8)
    assert par is not None, why
    w = fam.build(spec, par, 4)
    names = [w.ops.template_names[int(t)] for t in w.graph.attr("template")]
    assert names.count("ep_alltoall_fwd") == 1 and names.count("ep_alltoall_bwd") == 1
    assert names.index("embedding_lookup") < names.index("ep_alltoall_fwd") < names.index("interaction_fwd")
    assert names[-1] == "optimizer_step" and "dp_grad_bucket" in names and "edp_grad_bucket" not in names
    # replicated shards (ep < dp) reduce their touched rows over edp
    par4, _ = check_structure(spec, ParallelSpec(global_batch=8, ep=4), sys8)
    assert par4 is not None
    assert "edp_grad_bucket" in fam.build(spec, par4, 4).ops.template_names


def test_resnet_buckets_overlap_the_backward() -> None:
    fam = get_family("resnet")
    spec = ResNetSpec()
    par = ParallelSpec(micro_batch=32, global_batch=256).resolve(8)
    g = fam.build(spec, par, 8).graph
    names = list(g.names)
    buckets = [i for i, n in enumerate(names) if n == "dp_grad_bucket"]
    # 102.2 MB of fp32 gradients; a bucket closes once it holds >= 25 MB (whole layers), so
    # four buckets, together exactly every gradient
    w = fam.build(spec, par, 8)
    tmpl = w.graph.attr("template").astype(int)
    sizes = [w.ops.kernels[w.ops.templates[tmpl[i]][0][0]][1][1] for i in buckets]
    assert sum(sizes) == 4 * 25_557_032 and all(x >= 25e6 for x in sizes[:-1])
    assert len(buckets) == 4
    assert buckets[0] < max(i for i, n in enumerate(names) if n.startswith("conv_bwd"))
    no_overlap = fam.build(spec, ParallelSpec(micro_batch=32, global_batch=256, dp_overlap=False)
                           .resolve(8), 8).graph
    assert list(no_overlap.names).count("dp_grad_bucket") == 1


def test_bad_inputs_name_key_value_and_rule() -> None:
    with pytest.raises(InputError, match=r"workload\.block='dense': unknown layer kind"):
        ResNetSpec(block="dense")
    with pytest.raises(InputError, match=r"workload\.cell='gru': unknown layer kind"):
        GNMTSpec(cell="gru")
    with pytest.raises(InputError, match=r"workload\.depth=20"):
        ResNetSpec(depth=20)
    big = DLRMSpec(num_rows=200_000_000)  # 95 GiB per table > 80 GiB
    res = simulate_batch(big, ParallelSpec(global_batch=64, ep=8), [SystemSpec()])
    assert not res.feasible[0]
    assert res.reason[0].startswith("workload.num_rows=200000000: one table")
    res = simulate_batch(ResNetSpec(), ParallelSpec(micro_batch=3, global_batch=100), [SystemSpec()])
    assert not res.feasible[0] and res.reason[0].startswith("parallel.global_batch=100: must be divisible")
    res = simulate_batch(DLRMSpec(num_tables=4), ParallelSpec(global_batch=64, ep=8), [SystemSpec()])
    assert res.reason[0].startswith("workload.num_tables=4: must be >= parallel.ep=8")
    res = simulate_batch(GNMTSpec(), ParallelSpec(tp=2, global_batch=64), [SystemSpec()])
    assert res.reason[0].startswith("parallel.tp=2: must be 1")


@pytest.mark.slow
@pytest.mark.parametrize("overrides", [
    ["workload=resnet50", "workload.depth=18", "workload.image_size=64", "parallel.micro_batch=4",
     "parallel.global_batch=64", "workload.bucket_mb=5"],
    ["workload=gnmt", "workload.hidden_size=256", "workload.src_len=6", "workload.tgt_len=6",
     "workload.vocab_size=2000", "parallel.global_batch=64"],
    ["workload=dlrm", "workload.num_tables=8", "parallel.ep=8", "parallel.global_batch=64"],
    ["workload=dlrm", "workload.num_tables=8", "parallel.ep=4", "parallel.global_batch=64",
     "system.num_gpus=16", "system.gpus_per_node=4"],
])
def test_export_reimports_with_the_astra_fidelity_time(tmp_path: Path, overrides: list[str]) -> None:
    """``simsweep chakra export`` -> ``simsweep astra``'s engine equals fidelity=astra to the ns."""
    simulate = pytest.importorskip("search.commands.simulate")
    from search.config.build import build_specs
    from tests.simcore.traces.test_export import _export_and_run_astra

    overrides = [*overrides, "parallel.precision=fp16"]
    model, parallel, system = build_specs(simulate.compose(overrides))
    astra_ns, _ = _export_and_run_astra(tmp_path, overrides)
    direct = simulate_batch(model, parallel, [system], fidelity="astra")
    assert float(direct.iteration_time_s[0]) * 1e9 == pytest.approx(astra_ns, rel=1e-12, abs=0.5)
