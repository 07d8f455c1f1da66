"""Hostile / malformed ASTRA-sim, Chakra and MSCCL inputs -> one line naming the key, exit code 2.

Each case is an input a careless or adversarial user can write; before the limits layer
(simcore/limits.py) each ended in a traceback, a hang, or a silently wrong cycle count.
"""

from __future__ import annotations

import gzip
import json
import time
from pathlib import Path
from typing import Any

import pytest

from search.cli import main
from simcore.errors import InputError
from simcore.traces.msccl import msccl_to_traces
from tests.simcore.emulator._et_files import encode_trace, one_collective_node, write_workload

DATA = Path(__file__).parents[2] / "data" / "astra"
SYSTEM = json.loads((DATA / "Ring_4chunks.json").read_text())
NETWORK = "topology: [ Ring ]\nnpus_count: [ 4 ]\nbandwidth: [ 50.0 ]\nlatency: [ 500.0 ]\n"


def _astra(tmp_path: Path, capsys: pytest.CaptureFixture[str], *, system: str | None = None,
           network: str | None = None, nodes: list[list[dict[str, Any]]] | None = None,
           groups: str | None = None) -> tuple[int, str, str]:
    (tmp_path / "sys.json").write_text(system if system is not None else json.dumps(SYSTEM))
    (tmp_path / "net.yml").write_text(network if network is not None else NETWORK)
    per_rank = nodes if nodes is not None else [one_collective_node(r, 0, 1 << 20) for r in range(4)]
    prefix = write_workload(tmp_path, "w", per_rank)
    argv = ["astra", "--workload", prefix, "--system", str(tmp_path / "sys.json"),
            "--network", str(tmp_path / "net.yml")]
    if groups is not None:
        (tmp_path / "groups.json").write_text(groups)
        argv += ["--comm-group", str(tmp_path / "groups.json")]
    t0 = time.monotonic()
    rc = main(argv)
    assert time.monotonic() - t0 < 20, "a hostile input must fail in seconds"
    out, err = capsys.readouterr()
    return rc, out, err


def _system(**changes: Any) -> str:
    return json.dumps({**SYSTEM, **changes}).replace('"__NAN__"', "NaN").replace('"__INF__"', "Infinity")


def _net(line: str) -> str:
    key = line.split(":")[0]
    return "\n".join(line if row.startswith(key + ":") else row for row in NETWORK.splitlines()) + "\n"


BOMB = "a: &a [x,x,x,x,x,x,x,x,x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [" + ",".join([f"*{chr(97 + i)}"] * 9) + "]\n" for i in range(8)
) + NETWORK

CASES: list[tuple[str, dict[str, Any], str]] = [
    ("system JSON NaN", {"system": _system(**{"local-mem-bw": "__NAN__"})}, "local-mem-bw"),
    ("system JSON Infinity", {"system": _system(**{"peak-perf": "__INF__"})}, "peak-perf"),
    ("endpoint delay 1e30", {"system": _system(**{"endpoint-delay": 10**30})}, "endpoint-delay"),
    ("endpoint delay negative", {"system": _system(**{"endpoint-delay": -1})}, "endpoint-delay"),
    ("splits 1e9", {"system": _system(**{"preferred-dataset-splits": 10**9})}, "preferred-dataset-splits"),
    ("chunks 1e9", {"system": _system(**{"active-chunks-per-dimension": 10**9})}, "active-chunks-per-dimension"),
    ("deeply nested JSON", {"system": "[" * 100_000 + "]" * 100_000}, "sys.json"),
    ("network YAML .inf latency", {"network": _net("latency: [ .inf ]")}, "latency"),
    ("network YAML .nan bandwidth", {"network": _net("bandwidth: [ .nan ]")}, "bandwidth"),
    ("network npus 1e9", {"network": _net("npus_count: [ 1000000000 ]")}, "npus_count"),
    ("network npus float", {"network": _net("npus_count: [ 4.5 ]")}, "npus_count"),
    ("network latency 1e30", {"network": _net("latency: [ 1.0e+30 ]")}, "latency"),
    ("YAML alias bomb", {"network": BOMB}, "alias bomb"),
    ("duration 2^64-1", {"nodes": [[{"id": 0, "type": 4, "duration_micros": 2**64 - 1}]] * 4}, "duration_micros"),
    ("duplicate node ids", {"nodes": [[{"id": 1, "type": 4, "duration_micros": 5},
                                       {"id": 1, "type": 4, "duration_micros": 7}]] * 4}, "node id 1"),
    ("comm_size 2^64-1", {"nodes": [one_collective_node(r, 0, 2**64 - 1) for r in range(4)]}, "comm_size"),
    ("NPU outside its comm group", {
        "nodes": [[{"id": 0, "type": 7, "attrs": {"is_cpu_op": False, "comm_type": 0, "comm_size": 1 << 20,
                                                  "pg_name": "1"}}] for _ in range(4)],
        "groups": '{"1": [0, 1]}'}, "pg_name"),
]


@pytest.mark.parametrize(("case", "inputs", "needle"), CASES, ids=[c[0] for c in CASES])
def test_hostile_astra_input_is_one_line_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str, inputs: dict[str, Any], needle: str
) -> None:
    rc, out, err = _astra(tmp_path, capsys, **inputs)
    lines = err.strip().splitlines()
    assert rc == 2, (case, out, err)
    assert len(lines) == 1 and "Traceback" not in err, err
    assert needle in lines[0], lines[0]


def test_gzip_bomb_stops_at_the_trace_byte_limit(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SIMSWEEP_MAX_TRACE_BYTES", str(1 << 20))
    rc, _, _ = _astra(tmp_path, capsys)
    assert rc == 0
    bomb = gzip.compress(encode_trace(one_collective_node(0, 0, 1 << 20)) + bytes(8 << 20))
    assert len(bomb) < 64 << 10
    (tmp_path / "w.0.et").write_bytes(bomb)
    rc = main(["astra", "--workload", str(tmp_path / "w"), "--system", str(tmp_path / "sys.json"),
               "--network", str(tmp_path / "net.yml")])
    err = capsys.readouterr().err
    assert rc == 2 and "trace_bytes" in err and len(err.strip().splitlines()) == 1, err


def test_cache_serves_new_content_after_a_same_size_same_mtime_replacement(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``cp -p`` / ``rsync -t``: same path, size and mtime, other bytes -> the new trace is read."""
    import os

    from simcore.traces.chakra import cache
    from simcore.traces.chakra.et import read_trace

    monkeypatch.setenv("SIMSWEEP_CACHE_DIR", str(tmp_path / "cache"))
    cache.clear_memory()
    path = tmp_path / "t.0.et"
    path.write_bytes(encode_trace([{"id": 1, "type": 4, "duration_micros": 5}]))
    st = os.stat(path)
    assert int(read_trace(path).duration_micros[0]) == 5
    path.write_bytes(encode_trace([{"id": 1, "type": 4, "duration_micros": 7}]))  # same length
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert os.stat(path).st_size == st.st_size and os.stat(path).st_mtime_ns == st.st_mtime_ns
    assert int(read_trace(path).duration_micros[0]) == 7  # memory cache
    cache.clear_memory()
    assert int(read_trace(path).duration_micros[0]) == 7  # disk cache
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # new mtime, same bytes: still a hit
    cache.clear_memory()
    assert cache.load(str(path)) is not None


MSCCL_GOOD = Path(__file__).parents[2] / "data" / "chakra" / "ring_allreduce_4gpu.xml"


@pytest.mark.parametrize(("edit", "needle"), [
    (("ngpus=\"4\"", "ngpus=\"0\""), "ngpus"),
    (("ngpus=\"4\"", "ngpus=\"-4\""), "ngpus"),
    (("nchunksperloop=\"4\"", "nchunksperloop=\"0\""), "nchunksperloop"),
    (("cnt=\"1\"", "cnt=\"-5\""), "cnt"),
    (("i_chunks=\"4\"", "i_chunks=\"-1\""), "i_chunks"),
    (("send=\"1\"", "send=\"99\""), "send"),
])
def test_msccl_bad_counts_are_errors_not_negative_sizes(edit: tuple[str, str], needle: str) -> None:
    text = MSCCL_GOOD.read_text()
    assert edit[0] in text, edit
    with pytest.raises(InputError, match=needle):
        msccl_to_traces(text.replace(edit[0], edit[1], 1), 1 << 20)


@pytest.mark.parametrize("size", [-1, 0, 2**64])
def test_msccl_collective_size_in_range(size: int) -> None:
    with pytest.raises(InputError, match="coll_size"):
        msccl_to_traces(MSCCL_GOOD.read_text(), size)
