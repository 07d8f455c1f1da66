"""MSCCL-IR XML -> per-rank Chakra ET graphs, by the converter rules of reference §4.4."""

from __future__ import annotations

from pathlib import Path

import pytest
from chakra_testdata import DATA

from simcore.errors import InputError
from simcore.network.collectives.et_graphs import write_collective
from simcore.traces.chakra.et import NodeType, read_traces
from simcore.traces.msccl import msccl_to_traces

S, R, C = NodeType.COMM_SEND_NODE, NodeType.COMM_RECV_NODE, NodeType.COMP_NODE


def _deps(t, i: int) -> list[int]:  # type: ignore[no-untyped-def]
    return t.data_deps[t.data_ptr[i] : t.data_ptr[i + 1]].tolist()


def test_ring_allreduce_like_the_shipped_example() -> None:
    # §4.4: the shipped 8-NPU ring example has per rank 14 SEND, 14 RECV and 7 COMP nodes,
    # each a chain link; with n = 4: 6 SEND, 6 RECV, 3 COMP; comm_size = 1 MiB / 4
    traces = msccl_to_traces(DATA / "ring_allreduce_4gpu.xml", 1 << 20)
    assert len(traces) == 4
    for g, t in enumerate(traces):
        types = t.types.tolist()
        assert (types.count(S), types.count(R), types.count(C)) == (6, 6, 3)
        assert t.ids.tolist() == list(range(15))
        assert [_deps(t, i) for i in range(15)] == [[]] + [[i] for i in range(14)]  # one chain
        size, present = t.int_attr("comm_size")
        assert set(size[present].tolist()) == {262144}
        dst = t.int_attr("comm_dst")[0][t.types == S]
        src = t.int_attr("comm_src")[0][t.types == R]
        assert set(dst.tolist()) == {(g + 1) % 4} and set(src.tolist()) == {(g - 1) % 4}
        assert set(t.int_attr("comm_tag")[0][t.types != C].tolist()) == {0}
        # rrc -> RECV then COMP (data dep on the RECV); 3*262144 B / 50 GB/s = 15.7 us -> 15
        comp = [i for i in range(15) if types[i] == C]
        assert all(types[_deps(t, i)[0]] == R for i in comp)
        assert t.duration_micros[comp].tolist() == [15, 15, 15]


def test_comp_duration_of_the_shipped_8npu_example() -> None:
    # §4.4: comm_size 131072 (1 MiB / 8) and duration_micros = 7 on the COMP nodes
    xml = (DATA / "ring_allreduce_4gpu.xml").read_text().replace('i_chunks="4"', 'i_chunks="8"')
    t = msccl_to_traces(xml, 1 << 20)[0]
    assert set(t.duration_micros[t.types == C].tolist()) == {7}
    assert set(t.int_attr("comm_size")[0][t.types != C].tolist()) == {131072}


def test_cross_threadblock_deps_and_nop_elision(tmp_path: Path) -> None:
    traces = msccl_to_traces(DATA / "two_tb_exchange_2gpu.xml", 2000)
    t = traces[0]
    names = t.node_names()
    # nodes: send s0 (tb0), recv+reduce (tb1 s0), send s2 (tb0, waits via the nop on tb1 s0's
    # reduce and on tb0's previous step), recv (tb1 s1, after tb1 s0)
    kinds = dict(zip(names, t.types.tolist(), strict=True))
    assert sorted(kinds.values()) == sorted([S, R, C, S, R])
    idx = {n: i for i, n in enumerate(names)}
    send2 = idx["exchange_2_gpu0_tb0_s2_send"]
    assert sorted(_deps(t, send2)) == sorted([idx["exchange_2_gpu0_tb0_s0_send"],
                                              idx["exchange_2_gpu0_tb1_s0_reduce"]])
    assert _deps(t, idx["exchange_2_gpu0_tb1_s1_recv"]) == [idx["exchange_2_gpu0_tb1_s0_reduce"]]
    assert set(t.int_attr("comm_size")[0][t.types != C].tolist()) == {1000}
    # ids are a topological order and the files read back
    write_collective(tmp_path / "x", traces)
    back = read_traces(tmp_path / "x")
    assert [b.num_nodes for b in back] == [5, 5]
    for b in back:
        for i in range(b.num_nodes):
            assert all(d < int(b.ids[i]) for d in _deps(b, i))


@pytest.mark.parametrize(
    ("xml", "rule"),
    [
        ("<algo ngpus='1'><gpu id='0'><tb id='0' send='-1' recv='-1' chan='0'>"
         "<step s='0' type='xyz'/></tb></gpu></algo>", "must be one of"),
        ("<algo ngpus='2'><gpu id='0'/></algo>", "must be 0..1"),
        ("<algo ngpus='1'><gpu id='0'><tb id='0' send='-1' recv='-1' chan='0'>"
         "<step s='0' type='s'/></tb></gpu></algo>", "send peer"),
        ("<algo ngpus='1'><gpu id='0'><tb id='0' send='-1' recv='-1' chan='0'>"
         "<step s='0' type='nop' depid='3' deps='0'/></tb></gpu></algo>", "names no step"),
        ("<algo ngpus='1'><gpu id='0'><tb id='0' send='-1' recv='-1' chan='0'>"
         "<step s='0' type='nop' depid='0' deps='1'/><step s='1' type='nop'/></tb></gpu></algo>",
         "cycle"),
        ("<algo ngpus='x'/>", "integer"),
        ("<algo", "well-formed"),
        ("<notalgo/>", "<algo>"),
    ],
)
def test_malformed_msccl_is_an_input_error(xml: str, rule: str) -> None:
    with pytest.raises(InputError, match=rule):
        msccl_to_traces(xml, 1024)


def test_fused_instructions_expand_into_chains() -> None:
    xml = ("<algo name='f' ngpus='2' nchunksperloop='2'>"
           "<gpu id='0' i_chunks='2'><tb id='0' send='1' recv='1' chan='3'>"
           "<step s='0' type='s'/><step s='1' type='rrs'/><step s='2' type='rcs'/></tb></gpu>"
           "<gpu id='1' i_chunks='2'><tb id='0' send='0' recv='0' chan='3'>"
           "<step s='0' type='rrcs'/><step s='1' type='r'/><step s='2' type='s'/></tb></gpu></algo>")
    t0, t1 = msccl_to_traces(xml, 2048)
    assert t0.types.tolist() == [S, R, C, S, R, S]
    assert t1.types.tolist() == [R, C, S, R, S]
    assert [_deps(t0, i) for i in range(6)] == [[], [0], [1], [2], [3], [4]]
    assert set(t0.int_attr("comm_tag")[0][t0.types != C].tolist()) == {3}
    assert set(t1.int_attr("comm_size")[0][t1.types != C].tolist()) == {1024}
