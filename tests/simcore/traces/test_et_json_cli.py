"""``simsweep chakra``: show (JSON like chakra_jsonizer, checked against protobuf's own
MessageToJson), collective, msccl and export through the CLI."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from chakra_testdata import DATA

from search.cli import main
from simcore.traces.chakra.et import read_trace, read_traces
from simcore.traces.chakra.json import trace_to_json
from tests.shared_paths import GPT3_INPUTS, needs_shared


def test_show_prints_the_reference_example(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["chakra", "show", str(DATA / "v0.0.4_all_reduce.3.et")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [json.loads(x) for x in lines] == [
        {"version": "0.0.4"},
        {"id": "3", "name": "all_reduce_8npus_1MB", "type": "COMM_COLL_NODE",
         "attr": [{"name": "is_cpu_op", "boolVal": False}, {"name": "comm_type", "int64Val": "0"},
                  {"name": "comm_size", "int64Val": "1048576"}]},
    ]


def _official_json(path: Path, limit: int) -> list[object]:
    pb = pytest.importorskip("chakra.schema.protobuf.et_def_pb2")
    protolib = pytest.importorskip("chakra.src.third_party.utils.protolib")
    from google.protobuf.json_format import MessageToJson

    fh = protolib.openFileRd(str(path))
    meta = pb.GlobalMetadata()
    protolib.decodeMessage(fh, meta)
    out: list[object] = [json.loads(MessageToJson(meta))]
    while len(out) <= limit:
        n = pb.Node()
        if not protolib.decodeMessage(fh, n):
            break
        out.append(json.loads(MessageToJson(n)))
    return out


def test_json_matches_message_to_json_on_every_attribute_kind(tmp_path: Path) -> None:
    from test_et_official import SAMPLES, _set, _write_official

    pb = pytest.importorskip("chakra.schema.protobuf.et_def_pb2")
    meta = pb.GlobalMetadata(version="1.0")
    nodes = []
    for i, (kind, value) in enumerate(SAMPLES):
        n = pb.Node(id=i, name=f"n{i}", type=1 + i % 7, start_time_micros=i, duration_micros=2 * i)
        n.ctrl_deps.extend(range(i)[-1:])
        _set(n.attr.add(name=f"k{kind}", doc_string="d" if i % 3 == 0 else ""), kind, value)
        if i % 4 == 0:
            n.inputs.values = "v"
            n.outputs.SetInParent()
        nodes.append(n)
    path = tmp_path / "all.0.et"
    _write_official(path, nodes, meta)
    ours = list(trace_to_json(read_trace(path, cache=False)))
    assert ours == _official_json(path, len(nodes))


@needs_shared
def test_json_matches_message_to_json_on_gpt3() -> None:
    path = GPT3_INPUTS / "workload.3.et"
    ours = list(itertools.islice(trace_to_json(read_trace(path, cache=False)), 301))
    assert ours == _official_json(path, 300)


def test_collective_and_msccl_commands_write_readable_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["chakra", "collective", "--algorithm", "ring", "--ranks", "4", "--size", "4096",
                 "--out", str(tmp_path / "ring")]) == 0
    assert [t.num_nodes for t in read_traces(tmp_path / "ring")] == [15] * 4
    assert main(["chakra", "msccl", str(DATA / "ring_allreduce_4gpu.xml"), "--size", "4096",
                 "--out", str(tmp_path / "ms")]) == 0
    assert len(read_traces(tmp_path / "ms")) == 4
    assert main(["chakra", "collective", "--algorithm", "nope", "--ranks", "4", "--size", "4096",
                 "--out", str(tmp_path / "x")]) == 2
    assert "collective.algorithm='nope'" in capsys.readouterr().err


@pytest.mark.slow
def test_export_writes_what_simsweep_astra_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = str(tmp_path / "gpt")
    assert main(["chakra", "export", "--out", out, "workload=gpt_tiny", "parallel.tp=2",
                 "parallel.pp=2", "system.num_gpus=16"]) == 0
    traces = read_traces(out)
    assert len(traces) == 16
    groups = json.loads(Path(f"{out}.comm_groups.json").read_text())
    # tp pairs, tied-embedding pairs (first and last stage), dp quads
    assert sorted(map(len, groups.values())) == [2] * 16 + [4] * 4
    printed = capsys.readouterr().out
    assert json.loads(Path(f"{out}.remote_memory.json").read_text()) == {"memory-type": "NO_MEMORY_EXPANSION"}
    astra_sim = printed[printed.index("AstraSim_Analytical"):].split()
    flags = dict(a.removeprefix("--").split("=", 1) for a in astra_sim[1:])
    assert set(flags) == {"workload-configuration", "system-configuration", "network-configuration",
                          "remote-memory-configuration", "comm-group-configuration"}  # ASTRA-sim's required flags
    assert all(Path(v).exists() for k, v in flags.items() if k != "workload-configuration")
    assert main(["astra", "--workload", out, "--system", f"{out}.system.json", "--network",
                 f"{out}.network.yml", "--remote-memory", f"{out}.remote_memory.json",
                 "--comm-group", f"{out}.comm_groups.json"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 16 and all(" finished, " in x for x in lines)
