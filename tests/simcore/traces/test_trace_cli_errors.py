"""``simsweep trace`` option and file errors: one line naming the option (or file), the value and
the rule, exit code 2 (no traceback). Checked before PyTorch is imported, so no torch needed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from search.cli import main
from tests.cli_output import one_line_error as _one_line


@pytest.mark.parametrize("dtype", ["float7", "int64", "int32", ""])
def test_a_parameter_dtype_that_is_not_floating_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                           dtype: str) -> None:
    rc = main(["trace", "torchvision.models:resnet18", "--input-shape", "2x3x32x32", "--dtype", dtype,
               "--out", str(tmp_path / "r")])
    assert _one_line(rc, capsys.readouterr().err, f"--dtype={dtype!r}", "floating parameter dtype", "bfloat16")


@pytest.mark.parametrize("kwargs", ["[1,2]", '"str"', "null", "3", "true"])
def test_kwargs_must_be_a_json_object(tmp_path: Path, capsys: pytest.CaptureFixture[str], kwargs: str) -> None:
    rc = main(["trace", "torchvision.models:resnet18", "--input-shape", "2x3x32x32", "--kwargs", kwargs,
               "--out", str(tmp_path / "r")])
    assert _one_line(rc, capsys.readouterr().err, f"--kwargs={kwargs!r}", "must be a JSON object")


@pytest.mark.parametrize("option", ["--import-et", "--kineto"])
def test_a_utf16_trace_json_is_one_line_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                   option: str) -> None:
    et = tmp_path / "et.json"
    et.write_text(json.dumps({"nodes": [{"id": 1, "name": "[pytorch|profiler|execution_trace|thread]",
                                         "ctrl_deps": 1}]}))
    bad = tmp_path / "bad.json"
    bad.write_bytes(json.dumps({"nodes": [], "traceEvents": []}).encode("utf-16"))
    argv = ["trace", "--import-et", str(bad if option == "--import-et" else et), "--out", str(tmp_path / "x")]
    if option == "--kineto":
        argv += ["--kineto", str(bad)]
    assert _one_line(main(argv), capsys.readouterr().err, str(bad), "must be UTF-8 text")
