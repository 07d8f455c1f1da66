"""Workload graph -> per-rank Chakra ET: a small hand-made graph, and the LLM generator's 3D
workload re-imported through the ASTRA-sim engine against the direct simulation."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from chakra_testdata import DATA

from simcore.errors import InputError
from simcore.traces.et import AttrKind, NodeType, read_traces
from simcore.traces.et_export import graph_to_traces, write_comm_groups, write_traces
from simcore.workload.graph import CommType, GraphBuilder, NodeKind


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


ZERO_COST = [  # a network that costs nothing in both models
    "system.scaleup.bandwidth_GBps=1e9", "system.scaleup.latency_ns=0",
    "system.scaleout.bandwidth_GBps=1e9", "system.scaleout.latency_ns=0",
    "system.calibration.collective_base_latency_us=0",
    "system.calibration.overlap_compute_slowdown=0",
]


@pytest.mark.slow
@pytest.mark.parametrize("extra", [[], ["parallel.cp=2"], ["parallel.zero_stage=1", "parallel.dp_overlap=false"]])
def test_exported_3d_llm_reimports_with_the_direct_iteration_time(tmp_path: Path, extra: list[str]) -> None:
    simulate = pytest.importorskip("search.commands.simulate")
    from search.build import build_specs
    from simcore.api import check_structure, compiled_workload
    from simcore.astra.load import read_programs
    from simcore.astra.run import simulate_astra
    from simcore.engine.evaluate import evaluate_times, template_durations
    from simcore.hardware import SystemBatch
    from simcore.traces.astra_inputs import read_comm_groups, read_network, read_system
    from simcore.traces.et_export_llm import transformer_to_traces

    cfg = simulate.compose(["workload=gpt_tiny", "parallel.tp=2", "parallel.pp=2",
                            "system.num_gpus=8", *extra, *ZERO_COST])
    model, parallel, system = build_specs(cfg)
    par, reason = check_structure(model, parallel, system)
    assert par is not None, reason
    cw = compiled_workload(model, parallel, system)
    # the direct simulation with every duration on the ET's 1 us grid
    micros = np.round(template_durations(cw, SystemBatch.from_specs([system]), par.precision)[:, 0] * 1e6)
    direct_ns = float(evaluate_times(cw, (micros * 1e-6)[:, None]).iteration_time_s[0]) * 1e9
    traces, groups = transformer_to_traces(cw.workload, par, micros)
    assert len(traces) == 8 and (par.tp, par.pp, par.dp_size * par.cp) == (2, 2, 2)
    write_traces(tmp_path / "w", [traces[r] for r in range(8)])
    write_comm_groups(tmp_path / "g.json", groups)
    # Megatron's tied embedding: rank 0 (first stage) all-reduces with the last stage's rank
    # of the same (tp, cp, dp) coordinates: t + tp (c + cp (d + dp s)) = 4 for s = 1 (cp*dp = 2)
    tied = [i for i, name in enumerate(traces[0].names) if name.startswith("embedding_tied")]
    assert tied
    assert {groups[int(traces[0].str_attr("pg_name").value(i) or 0)] for i in tied} == {(0, 4)}
    results = simulate_astra(
        read_programs(tmp_path / "w"), read_system(DATA / "astra" / "zero_cost.json"),
        read_network(DATA / "astra" / "zero_cost_FullyConnected_8.yml"), "unaware",
        read_comm_groups(tmp_path / "g.json", 8))
    astra_ns = max(r.finish_ns for r in results)
    # the only cost ASTRA-sim adds on this network: a communicator-group ring spends a fixed
    # 10 cycles per step plus 10 before the first (reference §1.2 item 5): <= 40 ns each
    n_coll = int((traces[0].types == NodeType.COMM_COLL_NODE).sum())
    assert 0 <= astra_ns - direct_ns <= 40 * n_coll
    assert astra_ns - direct_ns < 2e-3 * direct_ns
