"""A traced step as one Chakra ET: read by the official reader, read back here, run by the CLI."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from chakra_testdata import read_official

from search.cli import main as cli
from simcore.errors import InputError
from simcore.traces.pytorch.api import read_step, trace_model, write_step

GPT = "tests.simcore.traces.pytorch.gpt:GPT"


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SIMSWEEP_CACHE_DIR", str(tmp_path / "et-cache"))


def test_official_reader_reads_the_traced_step(tmp_path: Path) -> None:
    step = trace_model(GPT, ["2x64:int64"])
    path = Path(write_step(tmp_path / "gpt", step))
    assert path.name == "gpt.0.et"
    _, nodes = read_official(path)
    assert len(nodes) == len(step.ops)
    for i, (n, op) in enumerate(zip(nodes, step.ops, strict=True)):
        attrs = {a.name: a for a in n.attr}
        assert (n.id, n.name, n.type) == (i, op.name, 4)  # COMP_NODE
        assert attrs["num_ops"].int64_val == int(op.flops)
        assert attrs["tensor_size"].uint64_val == op.bytes_read + op.bytes_written
        assert attrs["is_cpu_op"].bool_val is False
        assert list(n.data_deps) == list(op.deps)
        assert n.outputs.types == f"[{op.dtype}]"


def test_step_round_trips_through_the_et_file(tmp_path: Path) -> None:
    step = trace_model(GPT, ["2x64:int64"], optimizer="sgd")
    back = read_step(write_step(tmp_path / "gpt", step))
    assert back == step


def test_cli_traces_and_prints_a_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = cli(["trace", GPT, "--input-shape", "2x32:int64", "--kwargs", '{"layers": 1}',
                "--out", str(tmp_path / "g")])
    out = capsys.readouterr().out
    assert code == 0 and (tmp_path / "g.0.et").exists()
    assert "parameters" in out and "FLOPs forward" in out


@pytest.mark.parametrize("model,shape,needle", [
    ("no_such_package.models:net", "2x8", "cannot import module 'no_such_package.models'"),
    ("torchvision.models:no_such_net", "2x8", "has no attribute 'no_such_net'"),
    ("torchvision.models", "2x8", "must be an import path package.module:factory"),
    ("tests.simcore.traces.pytorch.gpt:broken", "2x5", "fails on these inputs: RuntimeError"),
    ("tests.simcore.traces.pytorch.gpt:broken", "2xq", "must be dimensions like"),
])
def test_bad_input_is_one_clear_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                     model: str, shape: str, needle: str) -> None:
    code = cli(["trace", model, "--input-shape", shape, "--out", str(tmp_path / "x")])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("simsweep trace: error:") and needle in err


def test_without_torch_the_error_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    from simcore.traces.pytorch.torch_import import require_torch

    monkeypatch.setitem(sys.modules, "torch", None)  # import torch -> ImportError
    with pytest.raises(InputError, match=r"pip install 'simsweep\[trace\]'"):
        require_torch()
