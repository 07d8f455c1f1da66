"""Errors name the value the input gives: a negative peer is not reported as a missing one, a
missing comm_type is not reported as an unsupported -1, a ``*-implementation`` error names its key,
a directory in place of a trace file is named, and ``chakra show --limit`` refuses a negative count."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from search.cli import main
from tests.cli_output import one_line_error as _one_line
from tests.simcore.emulator._et_files import one_collective_node, write_workload

DATA = Path(__file__).parents[2] / "data" / "astra"


def _run(tmp_path: Path, per_rank: list[list[dict[str, Any]]], system: dict[str, Any] | None = None,
         network: str = "Ring_8.yml") -> list[str]:
    prefix = write_workload(tmp_path, "w", per_rank)
    sys_path = tmp_path / "sys.json"
    sys_path.write_text(json.dumps(system if system is not None
                                   else json.loads((DATA / "Ring_4chunks.json").read_text())))
    return ["astra", "--workload", prefix, "--system", str(sys_path), "--network", str(DATA / network)]


def _p2p(rank: int, attrs: dict[str, Any]) -> list[dict[str, Any]]:
    kind = 6 if rank == 0 else 5  # rank 0 receives, the others send to it
    return [{"id": 1, "type": kind, "attrs": {"comm_size": 64, "comm_tag": 3, **attrs}}]


@pytest.mark.parametrize(("attrs", "needle"), [
    ({"comm_src": -1}, "comm_src=-1: must be an NPU id >= 0"),
    ({}, "comm_src=None: send/recv needs its peer"),
])
def test_recv_peer_given_negative_or_missing(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                             attrs: dict[str, Any], needle: str) -> None:
    per_rank = [_p2p(0, attrs)] + [_p2p(r, {"comm_dst": 0}) for r in range(1, 8)]
    assert _one_line(main(_run(tmp_path, per_rank)), capsys.readouterr().err, "w.0.et:node 1:", needle)


def test_send_peer_given_negative(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    per_rank = [_p2p(0, {"comm_src": 1})] + [_p2p(r, {"comm_dst": -3 if r == 1 else 0}) for r in range(1, 8)]
    assert _one_line(main(_run(tmp_path, per_rank)), capsys.readouterr().err, "w.1.et:node 1:comm_dst=-3")


@pytest.mark.parametrize(("attrs", "needle"), [
    ({"comm_size": 1 << 20}, "comm_type=None: a collective needs comm_type"),
    ({"comm_type": -1, "comm_size": 1 << 20}, "comm_type=-1: unsupported collective comm type"),
    ({"comm_type": 3, "comm_size": 1 << 20}, "comm_type=3: unsupported collective comm type"),
    ({"comm_type": 0, "comm_size": -8}, "comm_size=-8: must be in [0"),
    ({"comm_type": 0}, "comm_size=None: a collective needs comm_size"),
])
def test_collective_attributes_given_or_missing(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                attrs: dict[str, Any], needle: str) -> None:
    per_rank = [[{"id": r, "type": 7, "attrs": {"is_cpu_op": False, **attrs}}] for r in range(8)]
    assert _one_line(main(_run(tmp_path, per_rank)), capsys.readouterr().err, needle)


@pytest.mark.parametrize("fold", [True, False])
@pytest.mark.parametrize(("change", "needle"), [
    ({"all-reduce-implementation": ["ring", "ring"]}, "all-reduce-implementation=['ring', 'ring']: lists more"),
    ({"all-reduce-implementation": None}, "all-reduce-implementation=None: is missing"),
])
def test_implementation_errors_name_the_key(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                            change: dict[str, Any], needle: str, fold: bool) -> None:
    system = {**json.loads((DATA / "Ring_4chunks.json").read_text()), **change}
    system = {k: v for k, v in system.items() if v is not None}
    argv = _run(tmp_path, [one_collective_node(r, 0, 1 << 20) for r in range(8)], system, "Switch_8.yml")
    assert _one_line(main(argv + ([] if fold else ["--no-fold"])), capsys.readouterr().err, needle)


def test_a_directory_in_place_of_a_trace_file_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = _run(tmp_path, [one_collective_node(r, 0, 1 << 20) for r in range(8)])
    (tmp_path / "w.3.et").unlink()
    (tmp_path / "w.3.et").mkdir()
    assert _one_line(main(argv), capsys.readouterr().err, f"{tmp_path / 'w.3.et'}: Is a directory")


def test_show_refuses_a_negative_limit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prefix = write_workload(tmp_path, "w", [one_collective_node(0, 0, 1 << 20)])
    assert _one_line(main(["chakra", "show", f"{prefix}.0.et", "--limit", "-1"]), capsys.readouterr().err,
              "--limit=-1", "must be >= 0")
    assert main(["chakra", "show", f"{prefix}.0.et", "--limit", "0"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 1  # the metadata only
