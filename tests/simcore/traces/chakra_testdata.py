"""Path to the Chakra test data in tests/data/chakra."""

from __future__ import annotations

from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parents[2] / "data" / "chakra"



def read_official(path: Path | str) -> tuple[Any, list[Any]]:
    """(GlobalMetadata, nodes) of an ET file read by the official Chakra reader (mlc-chakra's
    protolib); the calling test is skipped when the package is missing."""
    import pytest

    pb = pytest.importorskip("chakra.schema.protobuf.et_def_pb2")
    protolib = pytest.importorskip("chakra.src.third_party.utils.protolib")
    fh = protolib.openFileRd(str(path))
    meta = pb.GlobalMetadata()
    protolib.decodeMessage(fh, meta)
    nodes = []
    while True:
        n = pb.Node()
        if not protolib.decodeMessage(fh, n):
            break
        nodes.append(n)
    fh.close()
    return meta, nodes
