"""Reading a workload by templates and patches gives every rank exactly its own decoded trace.

Checked against decoding each file on its own (:func:`read_trace`, the previous code path): on
simsweep's 256-NPU GPT-3 export and ASTRA-sim's 64-NPU generator trace (every rank), and on
copies of export files with bytes changed at seeded random positions (a changed byte outside a
peer / communicator value must not be patched over).
"""

from __future__ import annotations

import gzip
import random
from pathlib import Path

import numpy as np
import pytest

from simcore.errors import InputError
from simcore.traces.chakra.et import EtTrace, read_trace
from simcore.traces.chakra.patch import RankTraces, read_rank_traces
from tests.shared_paths import GPT3_INPUTS, SHARED, needs_shared

EXPORT256 = SHARED / "astra-inputs" / "gpt3_175b_256npu_export"


def _assert_same(a: EtTrace, b: EtTrace) -> None:
    for name in ("ids", "types", "start_time_micros", "duration_micros", "data_ptr", "data_deps", "ctrl_ptr",
                 "ctrl_deps"):
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype and np.array_equal(x, y), name
    assert (a.path, a.version) == (b.path, b.version)
    assert list(a.ints) == list(b.ints)
    for name in a.ints:
        for x, y in zip(a.ints[name], b.ints[name], strict=True):
            assert x.dtype == y.dtype and np.array_equal(x, y), name
    assert list(a.strs) == list(b.strs)
    for name in a.strs:  # categories are per decoding pass; the value of each node is the trace's
        assert [a.strs[name].value(i) for i in range(a.num_nodes)] == \
            [b.strs[name].value(i) for i in range(b.num_nodes)], name
    assert list(a.lists) == list(b.lists)
    for name in a.lists:
        for x, y in zip(a.lists[name], b.lists[name], strict=True):
            assert np.array_equal(x, y), name


@needs_shared
@pytest.mark.parametrize(("folder", "ranks", "most_templates"), [(EXPORT256, 256, 16), (GPT3_INPUTS, 64, 8)])
def test_every_rank_equals_its_own_decoding(folder: Path, ranks: int, most_templates: int) -> None:
    traces = read_rank_traces(folder / "workload", ranks, cache=False)
    assert isinstance(traces, RankTraces) and len(traces) == ranks
    assert len(traces.decoded) <= most_templates  # decoded in full: one file per layout
    for r in range(ranks):
        _assert_same(traces[r], read_trace(folder / f"workload.{r}.et", cache=False))
    bulk = traces[ranks - 1].bulk  # a patched rank's bulk is its own file's
    assert bulk.attrs.num_rows == read_trace(folder / f"workload.{ranks - 1}.et", cache=False).attrs.num_rows


@needs_shared
@pytest.mark.parametrize("seed", range(12))
def test_changed_bytes_are_never_patched_over(tmp_path: Path, seed: int) -> None:
    """Ranks 0-7 of one stage (one layout); one byte of one file changed: every rank still reads
    as its own file decodes (or both raise the same InputError)."""
    rng = random.Random(seed)
    datas = [bytearray(gzip.decompress((EXPORT256 / f"workload.{r}.et").read_bytes())) for r in range(8)]
    victim = rng.randrange(1, 8)
    at = rng.randrange(len(datas[victim]))
    datas[victim][at] ^= 1 << rng.randrange(8)
    for r, data in enumerate(datas):
        (tmp_path / f"w.{r}.et").write_bytes(bytes(data))
    try:
        own = [read_trace(tmp_path / f"w.{r}.et", cache=False) for r in range(8)]
    except InputError as err:
        with pytest.raises(InputError) as got:
            read_rank_traces(tmp_path / "w", 8, cache=False)
        assert str(got.value) == str(err)
        return
    traces = read_rank_traces(tmp_path / "w", 8, cache=False)
    for r in range(8):
        _assert_same(traces[r], own[r])


@needs_shared
@pytest.mark.parametrize("bit", [0, 7])
def test_a_peer_value_is_patched_only_while_its_length_is_kept(tmp_path: Path, bit: int) -> None:
    """Bit 0 of a peer varint byte is a new peer (patched); bit 7 changes the varint's length
    (the file parses differently, so it is not patched)."""
    datas = [bytearray(gzip.decompress((EXPORT256 / f"workload.{r}.et").read_bytes())) for r in range(8)]
    for r, data in enumerate(datas):
        (tmp_path / f"w.{r}.et").write_bytes(bytes(data))
    at = int(read_rank_traces(tmp_path / "w", 8, cache=False).batches[0].template.int_pos["comm_src"][0])
    datas[5][at] ^= 1 << bit
    (tmp_path / "w.5.et").write_bytes(bytes(datas[5]))
    try:
        own = read_trace(tmp_path / "w.5.et", cache=False)
    except InputError as err:
        with pytest.raises(InputError, match=str(err.args[0]) if err.args else None):
            read_rank_traces(tmp_path / "w", 8, cache=False)
        return
    traces = read_rank_traces(tmp_path / "w", 8, cache=False)
    assert (5 in traces.decoded) == (bit == 7)  # decoded in full (before any access)
    _assert_same(traces[5], own)


@needs_shared
def test_a_second_read_loads_the_same_traces_from_the_cache() -> None:
    first = read_rank_traces(EXPORT256 / "workload", 256)
    second = read_rank_traces(EXPORT256 / "workload", 256)
    assert all(b.template.data.size == 0 for b in second.batches)  # loaded: nothing compared
    assert sorted(second.decoded) == sorted(first.decoded)
    for r in range(256):
        _assert_same(second[r], read_trace(EXPORT256 / f"workload.{r}.et", cache=False))
