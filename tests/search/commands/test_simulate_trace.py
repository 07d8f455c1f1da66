"""``simsweep simulate --trace``: the timeline is the schedule of the configured fidelity."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from search.cli import main

PLAN = ["workload=gpt_tiny", "parallel.tp=2", "parallel.pp=2", "system.num_gpus=8",
        "system.gpus_per_node=4"]


@pytest.mark.parametrize("fidelity", ["calibrated", "astra"])
def test_last_trace_event_ends_at_the_printed_iteration_time(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], fidelity: str) -> None:
    path = tmp_path / "t.json"
    assert main(["simulate", *PLAN, f"fidelity={fidelity}", "--json", f"--trace={path}"]) == 0
    row = json.loads(capsys.readouterr().out)
    events = json.loads(path.read_text())["traceEvents"]
    end_us = max(e["ts"] + e["dur"] for e in events if e["ph"] == "X")
    assert end_us * 1e-6 == pytest.approx(row["iteration_time_s"], rel=1e-9)
    threads = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    # astra: one merged communication stream per stage (ASTRA-sim's one op in flight per NPU)
    assert ({"s0.comm", "s1.comm"} <= threads) == (fidelity == "astra")


def test_astra_and_calibrated_traces_differ(tmp_path: Path) -> None:
    ends = []
    for fidelity in ("calibrated", "astra"):
        path = tmp_path / f"{fidelity}.json"
        assert main(["simulate", *PLAN, f"fidelity={fidelity}", f"--trace={path}"]) == 0
        events = json.loads(path.read_text())["traceEvents"]
        ends.append(max(e["ts"] + e["dur"] for e in events if e["ph"] == "X"))
    assert ends[0] != pytest.approx(ends[1], rel=1e-3)
