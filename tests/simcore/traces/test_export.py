"""Workload graph -> per-rank Chakra ET: a small hand-made graph, and the LLM generator's 3D
workload re-imported through the ASTRA-sim engine against the direct simulation (fidelity=astra)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from simcore.errors import InputError
from simcore.ir.graph import CommType, GraphBuilder, NodeKind
from simcore.traces.chakra.et import AttrKind, NodeType, read_traces
from simcore.traces.chakra.export import graph_to_traces, write_comm_groups, write_traces
from tests.shared_paths import GPT3_INPUTS, SHARED, needs_shared


def _small_graph() -> GraphBuilder:
    b = GraphBuilder()
    for r in range(2):
        c = b.add(NodeKind.COMPUTE, rank=r, name=f"gemm{r}", node_id=10 * r, duration_us=40.4,
                  flops=2e9, bytes=4e6)
        a = b.add(NodeKind.COLLECTIVE, rank=r, deps=[c], name="ar", node_id=10 * r + 1,
                  comm_type=CommType.ALL_REDUCE, comm_bytes=1 << 20, group=1)
        if r == 0:
            b.add(NodeKind.SEND, rank=0, deps=[a], name="act", node_id=2, peer=1, tag=7,
                  comm_bytes=4096)
        else:
            rv = b.add(NodeKind.RECV, rank=1, name="act", node_id=12, peer=0, tag=7, comm_bytes=4096)
            b.add(NodeKind.COMPUTE, rank=1, deps=[rv, a], name="next", node_id=13, duration_us=5)
    return b


def test_small_graph_exports_typed_attributes(tmp_path: Path) -> None:
    traces = graph_to_traces(_small_graph().build())
    write_traces(tmp_path / "w", traces)
    write_comm_groups(tmp_path / "g.json", {1: [0, 1]})
    t0, t1 = read_traces(tmp_path / "w")
    assert t0.ids.tolist() == [0, 1, 2] and t1.ids.tolist() == [10, 11, 12, 13]
    assert t0.types.tolist() == [NodeType.COMP_NODE, NodeType.COMM_COLL_NODE, NodeType.COMM_SEND_NODE]
    assert t0.duration_micros.tolist() == [40, 0, 0]
    assert t0.int_attr("num_ops")[0][0] == 2_000_000_000 and t0.int_attr("tensor_size")[0][0] == 4_000_000
    assert t0.int_attr("comm_size")[0].tolist() == [0, 1 << 20, 4096]
    assert t0.str_attr("pg_name").value(1) == "1"
    assert t0.int_attr("comm_dst")[0][2] == 1 and t1.int_attr("comm_src")[0][2] == 0
    assert t1.data_deps[t1.data_ptr[3] : t1.data_ptr[4]].tolist() == [12, 11]
    kinds = {t0.attrs.names[c]: int(k) for c, k in zip(t0.attrs.name, t0.attrs.kind, strict=True)}
    assert kinds["is_cpu_op"] == AttrKind.BOOL and kinds["comm_size"] == AttrKind.INT64
    assert kinds["tensor_size"] == AttrKind.UINT64 and kinds["comm_dst"] == AttrKind.INT32
    assert (tmp_path / "g.json").read_text() == '{"1": [0, 1]}'


def test_cross_rank_dependency_is_rejected() -> None:
    b = GraphBuilder()
    a = b.add(NodeKind.COMPUTE, rank=0)
    b.add(NodeKind.COMPUTE, rank=1, deps=[a])
    with pytest.raises(InputError, match="another rank"):
        graph_to_traces(b.build())
    b2 = GraphBuilder()
    b2.add(NodeKind.COMPUTE)  # rank -1: shared by several ranks
    with pytest.raises(InputError, match="belong to one rank"):
        graph_to_traces(b2.build())


TINY_3D = ["workload=gpt_tiny", "parallel.tp=2", "parallel.pp=2", "system.num_gpus=8"]


def _export_and_run_astra(tmp_path: Path, overrides: list[str]) -> tuple[float, dict[int, tuple[int, ...]]]:
    """``simsweep chakra export`` then ``simsweep astra``'s engine on the written files: (ns, groups)."""
    from search.commands import chakra
    from simcore.emulator.inputs import read_comm_groups, read_network, read_system
    from simcore.emulator.load import read_programs
    from simcore.emulator.run import simulate_astra

    out = tmp_path / "w"
    assert chakra.main(["export", "--out", str(out), *overrides]) == 0
    groups_path = Path(f"{out}.comm_groups.json")
    network = read_network(Path(f"{out}.network.yml"))
    results = simulate_astra(read_programs(out), read_system(Path(f"{out}.system.json")), network,
                             "unaware", read_comm_groups(groups_path, network.npus))
    groups = {int(g): tuple(m) for g, m in json.loads(groups_path.read_text()).items()}
    return float(max(r.finish_ns for r in results)), groups


@pytest.mark.slow
@pytest.mark.parametrize("extra", [
    [],
    ["parallel.cp=2"],
    ["parallel.zero_stage=1", "parallel.dp_overlap=false"],
    ["parallel.zero_stage=2", "system.num_gpus=16", "system.gpus_per_node=4"],
    ["parallel.cp=2", "system.gpus_per_node=2", "system.scaleout.kind=FullyConnected"],
    # non-default rank orders: TP over the scale-out NICs (stride 4 on 4-GPU nodes), and DP
    # innermost with the pipeline inside the node
    ["system.num_gpus=16", "system.gpus_per_node=4", "parallel.rank_order=dp-tp-cp-pp"],
    ["parallel.cp=2", "system.num_gpus=16", "system.gpus_per_node=4",
     "parallel.rank_order=dp-pp-tp-cp"],
])
def test_exported_3d_llm_reimports_with_the_direct_astra_fidelity_time(tmp_path: Path, extra: list[str]) -> None:
    """Export -> ``simsweep astra`` equals the direct simulation in ``fidelity=astra`` on a real network.

    Both sides use the same numbers (A100 node: NVSwitch 300 GB/s, 700 ns; 25 GB/s, 2.5 us between
    nodes): ASTRA-sim emulated event by event on the ET files, the direct engine with ASTRA-sim's
    closed forms (chunked comm-group rings, endpoint delay, reductions, GiB/s links, first-
    differing-dimension charging) and one in-order communication stream per rank. The merged
    stream follows ASTRA-sim's lowest-ready-id issue order as a static topological order; where
    ASTRA-sim's dynamic choice differs (a ready op overtaking an earlier, not yet ready one) the
    direct time is later. ZeRO-3 is off by +1.9% (one node) / +4.2% (four nodes), not yet traced
    node by node, most likely for that reason; these plans agree to the ns.
    """
    simulate = pytest.importorskip("search.commands.simulate")
    from search.config.build import build_specs
    from simcore.api import check_structure, simulate_batch
    from simcore.workloads.layout import RankLayout

    overrides = [*TINY_3D, *extra]
    model, parallel, system = build_specs(simulate.compose(overrides))
    par, reason = check_structure(model, parallel, system)
    assert par is not None, reason
    assert (par.tp, par.pp) == (2, 2) and par.dp_size * par.cp >= 2
    astra_ns, groups = _export_and_run_astra(tmp_path, overrides)
    direct = simulate_batch(model, parallel, [system], fidelity="astra")
    calibrated = simulate_batch(model, parallel, [system])
    direct_ns = float(direct.iteration_time_s[0]) * 1e9
    assert direct_ns == pytest.approx(astra_ns, rel=1e-12, abs=0.5)
    # a real network: the calibrated prediction is a different model, far from ASTRA-sim's
    assert abs(float(calibrated.iteration_time_s[0]) * 1e9 / astra_ns - 1) > 0.05
    # Megatron's tied embedding: rank 0 (first stage) all-reduces with the last stage's rank of
    # the same (tp, cp, dp) coordinates, for the default order t + tp (c + cp (d + dp s)), s = 1
    last = RankLayout.of(par, system.gpus_per_node).rank(0, 0, 0, par.pp - 1)
    assert par.rank_order != "tp-cp-dp-pp" or last == par.tp * par.cp * par.dp_size
    assert (0, last) in groups.values()


def test_a_job_smaller_than_a_node_exports_a_network_of_its_own_gpus(tmp_path: Path) -> None:
    """4 GPUs of an 8-GPU node (tp 2, pp 2): the network has 4 NPUs, one per trace written
    (it said 8, and ``simsweep astra`` on the export asked for a fifth trace), and the export
    runs to the direct ``fidelity=astra`` time."""
    from search.commands.simulate import compose
    from search.config.build import build_specs
    from simcore.api import simulate_batch
    from simcore.emulator.inputs import read_network

    overrides = [*TINY_3D[:-1], "system.num_gpus=4", "parallel.global_batch=8"]
    astra_ns, _ = _export_and_run_astra(tmp_path, overrides)
    assert read_network(tmp_path / "w.network.yml").npus == 4
    assert len(list(tmp_path.glob("w.*.et"))) == 4
    model, parallel, system = build_specs(compose(overrides))
    direct = simulate_batch(model, parallel, [system], fidelity="astra")
    # whole cycles on the emulated side: within a cycle (here 3,753,706.0000000005 vs 3,753,707)
    assert float(direct.iteration_time_s[0]) * 1e9 == pytest.approx(astra_ns, rel=1e-12, abs=1.0)


@needs_shared
def test_astra_sims_own_inputs_give_one_trace_per_npu_of_the_network() -> None:
    """The convention the sub-node export follows, on ASTRA-sim's real inputs (its generator's
    64-NPU trace, and the 256-NPU export ASTRA-sim ran on a 2-D and a 1-D network): the NPUs
    of the network file, multiplied over its dimensions, are exactly the trace files."""
    from simcore.emulator.inputs import read_network

    for folder, networks in ((GPT3_INPUTS, ("network.yml",)),
                             (SHARED / "astra-inputs" / "gpt3_175b_256npu_export",
                              ("network.yml", "network_1d.yml"))):
        traces = len(list(folder.glob("workload.*.et")))
        assert traces in (64, 256)
        for name in networks:
            assert read_network(folder / name).npus == traces, (folder.name, name)


@pytest.mark.slow
def test_whole_machine_data_parallel_runs_over_the_network_dimensions(tmp_path: Path) -> None:
    """DP over all 8 GPUs of 4 nodes: ASTRA-sim's hierarchical (not comm-group) collective path.

    A group holding every NPU runs localBWAware phases (reduce-scatter in the node, all-reduce
    across nodes, all-gather back) with chunks pipelined through per-dimension queues; the direct
    astra mode runs that collective alone through the same system layer, so the times agree.
    """
    simulate = pytest.importorskip("search.commands.simulate")
    from search.config.build import build_specs
    from simcore.api import simulate_batch

    overrides = ["workload=gpt_tiny", "parallel.tp=1", "parallel.pp=1", "system.num_gpus=8",
                 "system.gpus_per_node=2", "parallel.zero_stage=1"]
    model, parallel, system = build_specs(simulate.compose(overrides))
    astra_ns, groups = _export_and_run_astra(tmp_path, overrides)
    assert tuple(range(8)) in groups.values()
    direct = simulate_batch(model, parallel, [system], fidelity="astra")
    # whole cycles on the emulated side: within a cycle (here 3,753,706.0000000005 vs 3,753,707)
    assert float(direct.iteration_time_s[0]) * 1e9 == pytest.approx(astra_ns, rel=1e-12, abs=1.0)


@pytest.mark.slow
def test_astra_fidelity_is_vectorized_over_the_batch(tmp_path: Path) -> None:
    """One ``fidelity=astra`` batch of three networks equals ``simsweep astra`` on each export."""
    simulate = pytest.importorskip("search.commands.simulate")
    from search.config.build import build_specs
    from simcore.api import simulate_batch

    nets = [["system.scaleup.bandwidth_GBps=300"],
            ["system.scaleup.bandwidth_GBps=50", "system.scaleup.latency_ns=3000"],
            ["system.scaleup.bandwidth_GBps=1000", "system.accelerator.hbm_bandwidth_GBps=500"]]
    base = [*TINY_3D, "system.gpus_per_node=4"]
    specs = [build_specs(simulate.compose([*base, *n])) for n in nets]
    model, parallel = specs[0][0], specs[0][1]
    batch = simulate_batch(model, parallel, [s for _, _, s in specs], fidelity="astra")
    want = [_export_and_run_astra(tmp_path / str(k), [*base, *n])[0] for k, n in enumerate(nets)]
    assert len(set(want)) == 3
    np.testing.assert_allclose(batch.iteration_time_s * 1e9, want, rtol=1e-12)


def test_unknown_fidelity_is_an_input_error() -> None:
    simulate = pytest.importorskip("search.commands.simulate")
    from search.config.build import build_specs
    from simcore.api import simulate_batch

    model, parallel, system = build_specs(simulate.compose(TINY_3D))
    with pytest.raises(InputError, match="fidelity='exact'"):
        simulate_batch(model, parallel, [system], fidelity="exact")
    ring = build_specs(simulate.compose([*TINY_3D, "system.scaleup.kind=Ring"]))[2]
    with pytest.raises(InputError, match="system.scaleup.kind='Ring'"):
        simulate_batch(model, parallel, [ring], fidelity="astra")


def test_export_size_is_bounded_before_anything_is_written(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """ranks x nodes of a rank's stage is checked against ``export_nodes`` first: over it, one
    line naming system.num_gpus and no file written; under the default bound the export runs."""
    simulate = pytest.importorskip("search.commands.simulate")
    from search.config.build import build_specs
    from simcore.formats import write_workload

    model, parallel, system = build_specs(simulate.compose(TINY_3D))
    monkeypatch.setenv("SIMSWEEP_MAX_EXPORT_NODES", "100")
    with pytest.raises(InputError, match=r"system.num_gpus=8: exporting 8 ranks x .*limit export_nodes"):
        write_workload(str(tmp_path / "w"), model, parallel, system)
    assert not list(tmp_path.iterdir())
    monkeypatch.delenv("SIMSWEEP_MAX_EXPORT_NODES")
    paths, nodes, _ = write_workload(str(tmp_path / "w"), model, parallel, system)
    assert len(paths) == 8 and nodes > 100
