"""Malformed Chakra ET input: every defect is an InputError naming the file and position."""

from __future__ import annotations

import contextlib
import gzip
import zlib
from pathlib import Path

import pytest
from chakra_testdata import DATA
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simcore.errors import InputError
from simcore.traces.chakra import decode
from simcore.traces.chakra.et import read_trace
from tests.shared_paths import GPT3_INPUTS, HAVE_SHARED

GOLDEN = (DATA / "v0.0.4_all_reduce.3.et").read_bytes()


def _read(tmp_path: Path, data: bytes) -> InputError:
    p = tmp_path / "bad.0.et"
    p.write_bytes(data)
    with pytest.raises(InputError) as info:
        read_trace(p, cache=False)
    assert str(p) in str(info.value)
    return info.value


def _with_node(node: bytes) -> bytes:
    meta = GOLDEN[: 1 + GOLDEN[0]]
    return meta + bytes((len(node),)) + node


def test_truncated_stream(tmp_path: Path) -> None:
    err = _read(tmp_path, GOLDEN[:-5])
    assert "runs past the end" in err.rule
    assert err.value == "byte 8"  # the node's length prefix


def test_length_prefix_cut_inside_a_varint(tmp_path: Path) -> None:
    err = _read(tmp_path, GOLDEN + b"\x80")
    assert "stream ends inside a message length" in err.rule


def test_bad_varint_inside_a_node(tmp_path: Path) -> None:
    err = _read(tmp_path, _with_node(b"\x08" + b"\xff" * 11))
    assert "varint" in err.rule


def test_wrong_wire_type_for_a_known_field(tmp_path: Path) -> None:
    err = _read(tmp_path, _with_node(b"\x0a\x01\x03"))  # id (field 1) as length-delimited
    assert "wire type" in err.rule


def test_wrong_wire_type_for_an_attribute_value(tmp_path: Path) -> None:
    attr = b"\x0a\x01x" + b"\x4a\x01\x00"  # int64_val (field 9) as length-delimited
    err = _read(tmp_path, _with_node(b"\x08\x01" + b"\x52" + bytes((len(attr),)) + attr))
    assert "wire type" in err.rule


def test_unknown_node_type_names_the_node_id(tmp_path: Path) -> None:
    err = _read(tmp_path, _with_node(b"\x08\x2a\x18\x09"))  # id 42, type 9
    assert err.key.endswith("bad.0.et") or "bad.0.et" in err.key
    assert err.value == "node id 42"
    assert "unknown node type value 9" in err.rule


def test_dangling_dependency_names_node_and_missing_id(tmp_path: Path) -> None:
    err = _read(tmp_path, _with_node(b"\x08\x07\x18\x04\x2a\x01\x63"))  # id 7 -> data dep 99
    assert err.value == "node id 7"
    assert "99" in err.rule


@pytest.mark.parametrize("inflater", ["isal", "zlib"])
def test_corrupt_and_truncated_gzip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, inflater: str) -> None:
    """Both inflaters (python-isal when installed, the standard library's zlib otherwise)."""
    if inflater == "zlib":
        monkeypatch.setattr(decode, "_INFLATE", zlib)
        monkeypatch.setattr(decode, "_INFLATE_ERRORS", (zlib.error,))
    elif decode._INFLATE is zlib:
        pytest.skip("python-isal is not installed")
    gz = gzip.compress(GOLDEN)
    assert "gzip" in _read(tmp_path, gz[:-12]).rule
    assert "gzip" in _read(tmp_path, gz[:10] + b"\x00" * 40).rule
    assert "gzip" in _read(tmp_path, gz[:-6] + b"\xff" * 6).rule  # bad CRC / length trailer
    two_members = gzip.compress(GOLDEN[:100]) + gzip.compress(GOLDEN[100:])
    assert decode.decompress(two_members, "x") == GOLDEN


def test_empty_file(tmp_path: Path) -> None:
    assert "empty trace" in _read(tmp_path, b"").rule


def _fuzz_once(tmp_path: Path, data: bytes) -> None:
    """The reader returns or raises InputError; anything else fails the test (a hang trips the
    test's timeout: no wall-clock assertion, which would be flaky on a shared machine)."""
    p = tmp_path / "fuzz.0.et"
    p.write_bytes(data)
    with contextlib.suppress(InputError):
        read_trace(p, cache=False)


@pytest.mark.timeout(600)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=400))
def test_fuzz_random_bytes_return_or_raise_input_error(tmp_path: Path, data: bytes) -> None:
    _fuzz_once(tmp_path, data)


@pytest.mark.timeout(600)
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    edits=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), min_size=1, max_size=6),
    cut=st.integers(0, 10**6),
    gz=st.booleans(),
)
def test_fuzz_mutated_real_traces(
    tmp_path: Path, edits: list[tuple[int, int]], cut: int, gz: bool
) -> None:
    base = bytearray(_real_sample())
    for pos, byte in edits:
        base[pos % len(base)] = byte
    data = bytes(base[: max(1, cut % (len(base) + 1))])
    _fuzz_once(tmp_path, gzip.compress(data) if gz else data)


_SAMPLE: list[bytes] = []


def _real_sample() -> bytes:
    """The first ~60 nodes of a real GPT-3 rank (or the golden file if not available)."""
    if not _SAMPLE:
        if not HAVE_SHARED:
            _SAMPLE.append(GOLDEN)
        else:
            raw = gzip.decompress((GPT3_INPUTS / "workload.0.et").read_bytes())
            pos, count = 0, 0
            while count < 60:
                length, shift, at = 0, 0, pos
                while True:
                    b = raw[at]
                    length |= (b & 0x7F) << shift
                    at += 1
                    shift += 7
                    if b < 0x80:
                        break
                pos = at + length
                count += 1
            _SAMPLE.append(raw[:pos])
    return _SAMPLE[0]


def _all_kinds_trace() -> bytes:
    from simcore.traces.chakra.build import EtTraceBuilder
    from simcore.traces.chakra.encode import encode_trace
    from simcore.traces.chakra.schema import AttrKind

    b = EtTraceBuilder(metadata={"schema": "fuzz"})
    values = {AttrKind.DOUBLE: -1.5, AttrKind.FLOAT: 2.5, AttrKind.SINT64: -9, AttrKind.FIXED32: 7,
              AttrKind.SFIXED64: -3, AttrKind.BYTES: b"\x00\x01", AttrKind.STRING: "pg",
              AttrKind.INT32_LIST: [1, -2], AttrKind.DOUBLE_LIST: [0.5], AttrKind.BOOL_LIST: [True],
              AttrKind.STRING_LIST: ["a", "b"], AttrKind.FIXED64_LIST: [9]}
    for i in range(6):
        b.add_node(i + 1, f"n{i}", 4 + i % 4, data_deps=[i] if i else [], duration_micros=i,
                   attrs=[(f"k{int(k)}", k, v) for k, v in values.items()],
                   inputs={"values": "x"} if i % 2 else None)
    return encode_trace(b.build())


@pytest.mark.timeout(600)
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edits=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), min_size=1, max_size=4),
       cut=st.integers(0, 10**6))
def test_fuzz_mutated_traces_with_every_attribute_kind(
    tmp_path: Path, edits: list[tuple[int, int]], cut: int
) -> None:
    base = bytearray(_all_kinds_trace())
    for pos, byte in edits:
        base[pos % len(base)] = byte
    _fuzz_once(tmp_path, bytes(base[: max(1, cut % (len(base) + 1))]))


def test_malformed_list_attribute_names_file_and_node(tmp_path: Path) -> None:
    attr = b"\x0a\x01x" + b"\xe2\x01\x03\x0a\x05\x01"  # bool_list whose packed values run short
    err = _read(tmp_path, _with_node(b"\x08\x01" + b"\x52" + bytes((len(attr),)) + attr))
    assert err.value.startswith("node #0 byte ")
    assert "attribute x" in err.rule
