"""``simsweep astra`` end to end: output format, and malformed inputs -> one line, exit code 2."""

from __future__ import annotations

import csv
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from search.cli import main
from tests.shared_paths import SHARED, needs_shared
from tests.simcore.emulator._et_files import one_collective_node, write_workload

DATA = Path(__file__).parents[2] / "data" / "astra"
REPO = Path(__file__).parents[3]
LINE = re.compile(r"^sys\[(\d+)\] finished, (\d+) cycles, exposed communication (\d+) cycles$")


def _run(capsys: pytest.CaptureFixture[str], workload: str, system: Path, network: Path,
         *extra: str) -> tuple[int, str, str]:
    rc = main(["astra", "--workload", workload, "--system", str(system), "--network", str(network), *extra])
    out, err = capsys.readouterr()
    return rc, out, err


def test_allgather_microbenchmark_from_et_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prefix = write_workload(tmp_path, "all_gather", [one_collective_node(r, 2, 1 << 20) for r in range(16)])
    rc, out, err = _run(capsys, prefix, DATA / "Ring_4chunks.json", DATA / "Ring_16.yml",
                        "--remote-memory", str(DATA / "no_memory.json"), "--network-backend", "aware")
    assert rc == 0, err
    lines = [LINE.match(line) for line in out.splitlines()]
    assert all(lines) and len(lines) == 16
    assert {(int(m[2]), int(m[3])) for m in lines if m} == {(323_560, 323_560)}  # reference §5.1


def _assert_one_line_error(rc: int, err: str, *needles: str) -> None:
    assert rc == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    for needle in needles:
        assert needle in lines[0], lines[0]


def _good(tmp_path: Path) -> str:
    return write_workload(tmp_path, "w", [one_collective_node(r, 0, 1 << 20) for r in range(8)])


def test_truncated_et(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prefix = _good(tmp_path)
    path = Path(f"{prefix}.3.et")
    path.write_bytes(path.read_bytes()[:-5])
    rc, _, err = _run(capsys, prefix, DATA / "Ring_4chunks.json", DATA / "Ring_8.yml")
    _assert_one_line_error(rc, err, "w.3.et")


def test_corrupt_et(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prefix = _good(tmp_path)
    Path(f"{prefix}.5.et").write_bytes(b"\x1f\x8b\x08garbage-not-gzip" * 3)
    rc, _, err = _run(capsys, prefix, DATA / "Ring_4chunks.json", DATA / "Ring_8.yml")
    _assert_one_line_error(rc, err, "w.5.et")


def test_unknown_topology_kind(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    net = tmp_path / "n.yml"
    net.write_text("topology: [ Torus ]\nnpus_count: [ 8 ]\nbandwidth: [ 50 ]\nlatency: [ 500 ]\n")
    rc, _, err = _run(capsys, _good(tmp_path), DATA / "Ring_4chunks.json", net)
    _assert_one_line_error(rc, err, "n.yml", "Torus")


def test_mismatched_list_lengths(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    net = tmp_path / "n.yml"
    net.write_text("topology: [ Ring, Switch ]\nnpus_count: [ 8 ]\nbandwidth: [ 50, 50 ]\nlatency: [ 500, 1 ]\n")
    rc, _, err = _run(capsys, _good(tmp_path), DATA / "Ring_4chunks.json", net)
    _assert_one_line_error(rc, err, "n.yml", "equal lengths")


def test_missing_required_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    system = tmp_path / "s.json"
    system.write_text('{"scheduling-policy": "LIFO", "collective-optimization": "baseline"}')
    rc, _, err = _run(capsys, _good(tmp_path), system, DATA / "Ring_8.yml")
    _assert_one_line_error(rc, err, "s.json", "preferred-dataset-splits", "required")


def _with_rank3(tmp_path: Path, nodes: list[dict]) -> str:
    ranks = [one_collective_node(r, 0, 1 << 20) for r in range(8)]
    ranks[3] = nodes
    return write_workload(tmp_path, "w", ranks)


def test_dependency_on_missing_node(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prefix = _with_rank3(tmp_path, [{"id": 1, "type": 4, "duration_micros": 5, "data_deps": [99]}])
    rc, _, err = _run(capsys, prefix, DATA / "Ring_4chunks.json", DATA / "Ring_8.yml")
    _assert_one_line_error(rc, err, "w.3.et", "99")


@pytest.mark.timeout(60)
def test_cyclic_graph(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prefix = _with_rank3(tmp_path, [
        {"id": 1, "type": 4, "duration_micros": 5, "data_deps": [2]},
        {"id": 2, "type": 4, "duration_micros": 5, "data_deps": [1]},
    ])
    rc, _, err = _run(capsys, prefix, DATA / "Ring_4chunks.json", DATA / "Ring_8.yml")
    _assert_one_line_error(rc, err, "w.3.et", "cycle")


@pytest.mark.timeout(120)
def test_unmatched_recv_is_an_error_not_a_hang(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prefix = _with_rank3(tmp_path, [{"id": 1, "type": 6, "attrs": {"comm_src": 0, "comm_size": 64, "comm_tag": 1}}])
    rc, _, err = _run(capsys, prefix, DATA / "Ring_4chunks.json", DATA / "Ring_8.yml")
    _assert_one_line_error(rc, err, "stalled")


@pytest.mark.timeout(120)
def test_subprocess_exit_code_and_single_line(tmp_path: Path) -> None:
    net = tmp_path / "n.yml"
    net.write_text("topology: [ Ring ]\nnpus_count: [ 1 ]\nbandwidth: [ 50 ]\nlatency: [ 500 ]\n")
    proc = subprocess.run(
        [sys.executable, "-m", "search.cli", "astra", "--workload", _good(tmp_path), "--system",
         str(DATA / "Ring_4chunks.json"), "--network", str(net)],
        capture_output=True, text=True, cwd=REPO, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
        timeout=110,
    )
    _assert_one_line_error(proc.returncode, proc.stderr, "npus_count", "> 1")


@pytest.mark.parametrize(
    ("attrs", "needles"),
    [
        ({"comm_type": 1, "comm_size": 64}, ("comm_type", "unsupported collective")),  # REDUCE
        ({"comm_type": 0, "comm_size": 64, "pg_name": "7"}, ("pg_name", "no such group")),
        ({"comm_type": 0, "comm_size": 64, "pg_name": "tp"}, ("pg_name", "group id")),
    ],
)
def test_bad_collective_attributes(tmp_path: Path, capsys: pytest.CaptureFixture[str], attrs: dict,
                                   needles: tuple[str, ...]) -> None:
    prefix = write_workload(tmp_path, "w", [[{"id": 4, "type": 7, "attrs": attrs}]] * 8)
    rc, _, err = _run(capsys, prefix, DATA / "Ring_4chunks.json", DATA / "Ring_8.yml")
    _assert_one_line_error(rc, err, "node 4", *needles)


def test_missing_trace_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prefix = _good(tmp_path)
    Path(f"{prefix}.6.et").unlink()
    rc, _, err = _run(capsys, prefix, DATA / "Ring_4chunks.json", DATA / "Ring_8.yml")
    _assert_one_line_error(rc, err, "w.6.et")


@needs_shared
def test_no_fold_simulates_every_npu_and_matches_astra_sim(capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """``--no-fold`` reaches the simulator (spied, the real one runs) and still prints ASTRA-sim's own
    numbers for the sequence-parallel export (shared/astra-inputs/gpt3_175b_64npu_sp_export)."""
    import search.commands.astra as command

    folds: list[bool] = []
    real = command.simulate_astra

    def spy(*args: Any, **kwargs: Any) -> Any:
        folds.append(kwargs.get("fold", True))
        return real(*args, **kwargs)

    monkeypatch.setattr(command, "simulate_astra", spy)
    folder = SHARED / "astra-inputs" / "gpt3_175b_64npu_sp_export"
    rc, out, err = _run(capsys, str(folder / "workload"), folder / "system.json", folder / "network.yml",
                        "--remote-memory", str(folder / "remote_memory.json"),
                        "--comm-group", str(folder / "comm_groups.json"), "--no-fold")
    assert rc == 0, err
    assert folds == [False]
    with open(folder / "expected_unaware.csv") as fh:
        want = {int(r["npu"]): (int(r["finish_cycles"]), int(r["exposed_comm_cycles"])) for r in csv.DictReader(fh)}
    got = {int(m[1]): (int(m[2]), int(m[3])) for m in (LINE.match(line) for line in out.splitlines()) if m}
    assert got == want
