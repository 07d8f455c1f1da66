"""Hostile / malformed settings on the command line -> one line naming the key, exit code 2.

Each case is a setting that, before the checks, was accepted silently (switching fault tolerance
off or producing a meaningless answer), started unbounded work, or ended in a traceback. All
fail before any Ray or MLflow work, in seconds.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import polars as pl
import pytest

from search.cli import main

CASES: list[tuple[list[str], str]] = [
    (["simulate", "system.scaleup.latency_ns=inf"], "system.scaleup.latency_ns"),
    (["simulate", "system.scaleout.bandwidth_GBps=nan"], "system.scaleout.bandwidth_GBps"),
    (["simulate", "system.num_gpus=1000000000"], "system.num_gpus"),
    (["simulate", "workload.num_layers=1000000000"], "workload.num_layers"),
    (["sweep", "ray.max_batch_retries=-1"], "ray.max_batch_retries"),
    (["sweep", "sweep.flush_interval_s=nan"], "sweep.flush_interval_s"),
    (["sweep", "sweep.flush_interval_s=inf"], "sweep.flush_interval_s"),
    (["sweep", "sweep.flush_interval_s=-1"], "sweep.flush_interval_s"),  # 0 (every batch) is valid
    (["sweep", "sweep.objective=bogus"], "sweep.objective"),
    (["sweep", "sweep.top_k=-1"], "sweep.top_k"),
    (["sweep", "tracking.request_timeout_s=0"], "tracking.request_timeout_s"),
    (["sweep", "system.scaleout.bandwidth_GBps=range(1,10,0)"], "range(start, stop, step) needs step != 0"),
    (["sweep", "system.scaleout.bandwidth_GBps=range(0,100000000)"], "limit points"),
    (["sweep", "sweep.mode=random", "sweep.num_points=100000000"], "sweep.num_points"),
    (["sweep", "system.scaleout.bandwidth_GBps=range(1,1000000)", "system.scaleup.bandwidth_GBps=range(1,1000000)"],
     "sweep.axes"),
    (["search", "search.train_tokens=-1"], "search.train_tokens"),
    (["search", "search.train_tokens=nan"], "search.train_tokens"),
    (["search", "search.storage=postgresql://u:secret@127.0.0.1:1/db"], "search.storage"),
    (["search", "search.storage=mysql://u@127.0.0.1:1/db"], "search.storage"),
]


@pytest.mark.parametrize(("argv", "needle"), CASES, ids=[" ".join(c[0]) for c in CASES])
def test_hostile_setting_is_one_line_naming_the_key(
    argv: list[str], needle: str, capsys: pytest.CaptureFixture[str], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    t0 = time.monotonic()
    rc = main(argv)
    assert time.monotonic() - t0 < 60
    err = capsys.readouterr().err
    lines = [line for line in err.strip().splitlines() if "error" in line]
    assert rc == 2, err
    assert "Traceback" not in err and len(lines) == 1, err
    assert needle in lines[0], lines[0]
    assert "secret" not in err


def test_graph_size_bound_is_checked_before_the_build(capsys: pytest.CaptureFixture[str]) -> None:
    """ZeRO-3 emits every layer's gathers as nodes: 32768 micro-batches x 96 layers is ~5e7
    nodes. Refused from the estimate (limit graph_nodes) in seconds, as the point's reason."""
    t0 = time.monotonic()
    rc = main(["simulate", "workload=gpt3_175b", "system.num_gpus=16", "parallel.tp=8",
               "parallel.zero_stage=3", "parallel.global_batch=65536"])
    assert time.monotonic() - t0 < 60
    out = capsys.readouterr()
    assert rc == 0 and "Traceback" not in out.out + out.err
    status = [line for line in out.out.splitlines() if line.strip().startswith("status")]
    assert len(status) == 1 and "INFEASIBLE" in status[0], out.out
    assert "parallel.global_batch=65536" in status[0] and "limit graph_nodes" in status[0]


def _fake_sweep_folder(out: Path, manifest: str | None = None) -> Path:
    (out / "results").mkdir(parents=True)
    pl.DataFrame({"point_id": [0, 1], "batch_id": [0, 0], "point_hash": ["a", "b"],
                  "feasible": [True, True], "reason": ["", ""], "parallel.tp": [1, 2],
                  "iteration_time_s": [1.0, 2.0], "mfu": [0.5, 0.4]}).write_parquet(out / "results" / "part-000000.parquet")
    (out / "config.yaml").write_text("sweep: {name: x}\n")
    data = {"sweep_hash": "h", "sweep_id": "id", "name": "x", "num_points": 2, "axes": ["parallel.tp"],
            "objective": "iteration_time_s", "direction": "minimize", "top_k": 3,
            "tracking": {"uri": None, "child_runs_max": 10, "best_child_runs": 2, "plots": False,
                         "request_timeout_s": 2}}
    (out / "sweep.json").write_text(manifest if manifest is not None else json.dumps(data))
    return out


def test_sync_with_the_server_down_is_a_clean_error_and_keeps_results(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _fake_sweep_folder(tmp_path / "out")
    t0 = time.monotonic()
    rc = main(["sync", str(out), "--uri", "http://127.0.0.1:9"])  # discard port: nothing listens
    err = capsys.readouterr().err
    assert rc == 2 and "tracking.uri" in err and "simsweep sync" in err and "Traceback" not in err, err
    assert time.monotonic() - t0 < 30
    assert (out / "results.parquet").is_file()  # the consolidated table is still written


@pytest.mark.parametrize(("damage", "needle"), [
    ("manifest", "sweep.json"), ("part", "part-000000.parquet"), ("keys", "sweep.json")])
def test_sync_on_a_damaged_folder_names_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: str, needle: str
) -> None:
    out = _fake_sweep_folder(tmp_path / "out", {"manifest": "{not json", "keys": "{}"}.get(damage))
    if damage == "part":
        (out / "results" / "part-000000.parquet").write_bytes(b"PAR1 garbage")
    rc = main(["sync", str(out)])
    err = capsys.readouterr().err
    assert rc == 2 and needle in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err


def test_unexpected_error_is_one_line_with_a_traceback_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import search.commands.simulate as simulate

    monkeypatch.setenv("SIMSWEEP_LOG_DIR", str(tmp_path / "logs"))

    def boom(argv: list[str]) -> int:
        print("partial result")
        raise RuntimeError("engine bug")

    monkeypatch.setattr(simulate, "main", boom)
    rc = main(["simulate"])
    out, err = capsys.readouterr()
    assert rc == 1 and "partial result" in out
    assert len(err.strip().splitlines()) == 1 and "RuntimeError: engine bug" in err, err
    logs = list((tmp_path / "logs").glob("simulate-*.log"))
    assert len(logs) == 1 and "Traceback" in logs[0].read_text() and str(logs[0]) in err


@pytest.mark.parametrize("command", ["sweep", "search"])
@pytest.mark.parametrize("under", ["afile", "afile/out"])
def test_an_output_dir_that_is_or_lies_under_a_file_names_the_key_and_the_file(
    command: str, under: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("")
    rc = main([command, f"{command}.output_dir={under}", f"{command}.in_process=true",
               "tracking.enabled=false"])
    err = capsys.readouterr().err
    lines = [line for line in err.strip().splitlines() if "error" in line]
    assert rc == 2 and "Traceback" not in err and len(lines) == 1, err
    assert f"{command}.output_dir=" in lines[0] and "must be a folder" in lines[0], lines[0]
    if under != "afile":
        assert f"under the file {tmp_path / 'afile'}" in lines[0], lines[0]
