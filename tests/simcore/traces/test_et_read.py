"""Chakra ET reader: the reference's decoded example, gzip, the real GPT-3 inputs, the cache."""

from __future__ import annotations

import gzip
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from chakra_testdata import DATA, read_official

from simcore.traces.chakra import cache as et_cache
from simcore.traces.chakra.encode import encode_trace
from simcore.traces.chakra.et import AttrKind, NodeType, read_trace, read_traces, write_trace
from tests.shared_paths import GPT3_INPUTS, needs_shared

GOLDEN = DATA / "v0.0.4_all_reduce.3.et"


def test_reference_example_decodes_to_the_documented_fields() -> None:
    # reference §4.2: 83 bytes, GlobalMetadata{version:"0.0.4"},
    # Node{id:3, name:"all_reduce_8npus_1MB", type:7, attr:[is_cpu_op bool=0,
    # comm_type int64=0, comm_size int64=1048576]}
    assert GOLDEN.stat().st_size == 83
    t = read_trace(GOLDEN, cache=False)
    assert t.version == "0.0.4"
    assert t.num_nodes == 1
    assert int(t.ids[0]) == 3
    assert t.name(0) == "all_reduce_8npus_1MB"
    assert int(t.types[0]) == NodeType.COMM_COLL_NODE
    assert t.data_ptr.tolist() == [0, 0]
    table = t.attrs
    assert [table.names[c] for c in table.name] == ["is_cpu_op", "comm_type", "comm_size"]
    assert table.kind.tolist() == [AttrKind.BOOL, AttrKind.INT64, AttrKind.INT64]
    assert t.int_attr("comm_size")[0].tolist() == [1048576]
    assert t.int_attr("comm_type")[1].tolist() == [True]  # a zero oneof value is present
    assert t.int_attr("is_cpu_op")[0].tolist() == [0]
    assert t.int_attr("comm_priority", default=7) == (pytest.approx([7]), pytest.approx([False]))


def test_reference_example_writes_back_byte_identical(tmp_path: Path) -> None:
    t = read_trace(GOLDEN, cache=False)
    out = tmp_path / "x.0.et"
    write_trace(out, t)
    assert out.read_bytes() == GOLDEN.read_bytes()


def test_gzip_is_detected_by_content(tmp_path: Path) -> None:
    gz = tmp_path / "plain_name.0.et"  # no .gz suffix: detection is by the magic number
    gz.write_bytes(gzip.compress(GOLDEN.read_bytes()))
    t = read_trace(gz, cache=False)
    assert int(t.ids[0]) == 3
    write_trace(tmp_path / "c.0.et", t, compress=True)
    assert (tmp_path / "c.0.et").read_bytes()[:2] == b"\x1f\x8b"
    assert gzip.decompress((tmp_path / "c.0.et").read_bytes()) == GOLDEN.read_bytes()


def test_read_traces_orders_ranks_numerically(tmp_path: Path) -> None:
    for r in range(12):
        shutil.copy(GOLDEN, tmp_path / f"w.{r}.et")
    traces = read_traces(tmp_path / "w")
    assert [Path(t.path).name for t in traces] == [f"w.{r}.et" for r in range(12)]
    assert len(read_traces(tmp_path / "w", num_ranks=3)) == 3


def test_disk_cache_hit_equals_fresh_decode_and_tracks_changes(tmp_path: Path) -> None:
    p = tmp_path / "w.0.et"
    shutil.copy(GOLDEN, p)
    fresh = read_trace(p)
    et_cache.clear_memory()
    cached = read_trace(p)
    assert cached is not fresh
    assert cached.ids.tolist() == fresh.ids.tolist()
    assert cached.int_attr("comm_size")[0].tolist() == [1048576]
    assert encode_trace(cached) == GOLDEN.read_bytes()  # bulk is decoded again on demand
    # a changed file is a miss
    data = bytearray(GOLDEN.read_bytes())
    data[10] = 0x05  # id 3 -> 5
    p.write_bytes(bytes(data))
    os.utime(p, ns=(1, 1))
    assert int(read_trace(p).ids[0]) == 5


@pytest.mark.slow
@needs_shared
def test_gpt3_inputs_match_the_official_parser_and_round_trip() -> None:
    path = str(GPT3_INPUTS / "workload.5.et")
    t = read_trace(path, cache=False)
    _, nodes = read_official(path)
    assert t.num_nodes == len(nodes) == 7772
    assert t.ids.tolist() == [n.id for n in nodes]
    assert t.types.tolist() == [n.type for n in nodes]
    assert t.node_names()[:50] == [n.name for n in nodes[:50]]
    deps = [list(n.data_deps) for n in nodes]
    assert t.data_ptr.tolist() == np.cumsum([0] + [len(d) for d in deps]).tolist()
    assert t.data_deps.tolist() == [d for ds in deps for d in ds]
    for name in ("comm_size", "num_ops", "tensor_size", "comm_dst", "comm_tag", "is_cpu_op"):
        want = [next((getattr(a, a.WhichOneof("value")) for a in n.attr if a.name == name), None)
                for n in nodes]
        values, present = t.int_attr(name)
        assert present.tolist() == [w is not None for w in want]
        assert values[present].tolist() == [int(w) for w in want if w is not None]
    pg = t.str_attr("pg_name")
    want_pg = [next((a.string_val for a in n.attr if a.name == "pg_name"), None) for n in nodes]
    assert [pg.value(i) for i in range(t.num_nodes)] == want_pg
    assert encode_trace(t) == gzip.decompress(Path(path).read_bytes())


def test_trace_paths_errors(tmp_path: Path) -> None:
    from simcore.errors import InputError

    with pytest.raises(InputError, match="no files named"):
        read_traces(tmp_path / "none")
    for r in (0, 1, 3):
        shutil.copy(GOLDEN, tmp_path / f"w.{r}.et")
    with pytest.raises(InputError, match="ranks are not 0..2"):
        read_traces(tmp_path / "w")
    with pytest.raises(InputError, match="missing trace file"):
        read_traces(tmp_path / "w", num_ranks=3)


def test_show_on_a_malformed_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from search.cli import main

    bad = tmp_path / "bad.0.et"
    bad.write_bytes(GOLDEN.read_bytes()[:-3])
    assert main(["chakra", "show", str(bad)]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and "runs past the end" in err


def test_memory_cache_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for r in range(6):
        shutil.copy(GOLDEN, tmp_path / f"w.{r}.et")
    size = et_cache._footprint(read_trace(tmp_path / "w.0.et", cache=False))
    limit = 3 * size
    monkeypatch.setattr(et_cache, "_MEMORY_MAX_BYTES", limit)
    et_cache.clear_memory()
    read_traces(tmp_path / "w")
    assert 0 < len(et_cache._MEMORY) <= 3  # the oldest were dropped
    assert 0 < et_cache._memory_bytes[0] <= limit
    assert "w.0.et" not in " ".join(et_cache._MEMORY)
    assert read_trace(tmp_path / "w.0.et").ids.tolist() == [3]  # still served, from disk


def test_read_traces_caches_a_workload_in_one_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv("SIMSWEEP_CACHE_DIR", str(cache))
    for r in range(5):
        shutil.copy(GOLDEN, tmp_path / f"w.{r}.et")
    fresh = read_traces(tmp_path / "w")
    assert [p.suffix for p in cache.iterdir()] == [".etb"]  # one bundle, no per-file entries
    et_cache.clear_memory()
    cached = read_traces(tmp_path / "w")
    assert [t.path for t in cached] == [t.path for t in fresh]
    assert all(c is not f and c.ids.tolist() == f.ids.tolist() for c, f in zip(cached, fresh, strict=True))
    assert encode_trace(cached[3]) == GOLDEN.read_bytes()  # bulk decoded again on demand
    data = bytearray(GOLDEN.read_bytes())
    data[10] = 0x05  # id 3 -> 5 in rank 2's file: the bundle no longer applies
    (tmp_path / "w.2.et").write_bytes(bytes(data))
    os.utime(tmp_path / "w.2.et", ns=(1, 1))
    et_cache.clear_memory()
    assert [int(t.ids[0]) for t in read_traces(tmp_path / "w")] == [3, 3, 5, 3, 3]
