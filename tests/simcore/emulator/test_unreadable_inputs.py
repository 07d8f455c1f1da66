"""Input files ``simsweep astra`` cannot read as text or as a trace: one line naming the file and
the rule, exit code 2 (no traceback): files saved as UTF-16 (JSON and YAML inputs are UTF-8) and an
empty (0-byte) workload file (a Chakra ET starts with its GlobalMetadata message, reference §4.2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from search.cli import main
from tests.cli_output import one_line_error as _one_line
from tests.simcore.emulator._et_files import one_collective_node, write_workload

DATA = Path(__file__).parents[2] / "data" / "astra"


def _argv(tmp_path: Path, **files: str) -> list[str]:
    prefix = write_workload(tmp_path, "w", [one_collective_node(r, 0, 1 << 20) for r in range(8)])
    argv = ["astra", "--workload", prefix, "--system", files.get("system", str(DATA / "Ring_4chunks.json")),
            "--network", files.get("network", str(DATA / "Ring_8.yml"))]
    if "memory" in files:
        argv += ["--remote-memory", files["memory"]]
    if "groups" in files:
        argv += ["--comm-group", files["groups"]]
    return argv


UTF16 = [(option, text.encode("utf-16")) for option, text in [
    ("system", (DATA / "Ring_4chunks.json").read_text()),
    ("network", (DATA / "Ring_8.yml").read_text()),
    ("memory", json.dumps({"memory-type": "NO_MEMORY_EXPANSION"})),
    ("groups", json.dumps({"1": [0, 1, 2, 3]})),
]]
LATIN1 = [("network", ("# r\u00e9seau\n" + (DATA / "Ring_8.yml").read_text()).encode("latin-1"))]


@pytest.mark.parametrize(("option", "raw"), UTF16 + LATIN1, ids=[f"{o}-utf16" for o, _ in UTF16] + ["network-latin1"])
def test_a_non_utf8_input_file_is_one_line_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                     option: str, raw: bytes) -> None:
    path = tmp_path / f"{option}.in"
    path.write_bytes(raw)
    rc = main(_argv(tmp_path, **{option: str(path)}))
    assert _one_line(rc, capsys.readouterr().err, str(path), "must be UTF-8 text")


@pytest.mark.parametrize("rank", [0, 5])
def test_an_empty_workload_file_is_one_line_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                      rank: int) -> None:
    argv = _argv(tmp_path)
    (tmp_path / f"w.{rank}.et").write_bytes(b"")
    assert _one_line(main(argv), capsys.readouterr().err, f"w.{rank}.et", "0 bytes", "no GlobalMetadata")


def test_all_workload_files_empty(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = _argv(tmp_path)
    for rank in range(8):
        (tmp_path / f"w.{rank}.et").write_bytes(b"")
    assert _one_line(main(argv), capsys.readouterr().err, "w.0.et", "no GlobalMetadata")
