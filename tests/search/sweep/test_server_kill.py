"""A real ``mlflow server`` killed (SIGKILL) while a sweep logs its child runs, then restarted.

The server runs on 127.0.0.1 on a free port with a SQLite store in tmp_path; a watcher thread
kills its process group once a few child runs landed. The sweep (``simsweep sweep``, in this
process, on the test module's local Ray) must keep every result on disk and end with a one-line
note pointing to ``simsweep sync``. ``simsweep sync`` while the server is still down is a clean
one-line error with a non-zero exit; after a restart on the same store and port, ``sync`` leaves
every point exactly one FINISHED child run carrying every metric of its row in the table.
"""

from __future__ import annotations

import json
import math
import threading
import time

import polars as pl
import pytest
from mlflow import MlflowClient

from search.cli import main as simsweep
from search.tracking.publish import point_metric_columns
from tests.search.mlflow_server import (
    free_port,
    kill_server,
    logged_children,
    start_server,
    wait_healthy,
)

AXES = ("parallel.tp=1,2", "system.scaleout.bandwidth_GBps=range(25,401,25)",
        "system.scaleup.bandwidth_GBps=150,300")
N = 64
KILL_AT = 6  # child runs logged before the server is killed
pytestmark = [pytest.mark.slow, pytest.mark.ray, pytest.mark.mlflow]


@pytest.fixture(scope="module")
def booting_server(tmp_path_factory):
    """A server started before the module's Ray (named first), so the two boot together."""
    folder = tmp_path_factory.mktemp("srv")
    port = free_port()
    server = start_server(port, folder)
    yield server, port, folder
    kill_server(server)


def test_server_killed_mid_logging_then_sync_after_restart(booting_server, ray_local, tmp_path,
                                                           capsys):
    server, port, store = booting_server
    base, db, out = f"http://127.0.0.1:{port}", store / "srv.db", tmp_path / "out"
    killed_at: list[int] = []

    def kill_mid_logging() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and server.poll() is None:
            if (n := logged_children(db)) >= KILL_AT:
                kill_server(server)
                killed_at.append(n)
                return
            time.sleep(0.02)

    try:
        wait_healthy(server, base)
        watcher = threading.Thread(target=kill_mid_logging, daemon=True)
        watcher.start()
        code = simsweep(["sweep", *AXES, "sweep.name=srvkill", f"sweep.output_dir={out}",
                         "sweep.batch_size=4", "sweep.progress=false", f"tracking.uri={base}"])
        watcher.join(timeout=130)
        got = capsys.readouterr()
        assert code == 0, got.err
        assert killed_at and killed_at[0] < N, killed_at  # the kill landed while logging
        assert "Traceback" not in got.out + got.err
        note = [ln for ln in got.out.splitlines() if ln.startswith("MLflow not updated")]
        assert len(note) == 1 and f"simsweep sync {out}" in note[0], got.out
        table = pl.read_parquet(out / "results.parquet")  # every result kept on disk
        assert table["point_id"].to_list() == list(range(N))
        assert json.loads((out / "sweep.json").read_text())["tracking_synced"] is False

        # sync while the server is down: one clean line, non-zero exit, nothing lost
        assert simsweep(["sync", str(out)]) != 0
        got = capsys.readouterr()
        lines = got.err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("simsweep sync: error:"), got.err
        assert "unreachable" in lines[0] and "Traceback" not in got.out + got.err
        assert json.loads((out / "sweep.json").read_text())["tracking_synced"] is False

        server = start_server(port, store)  # the same store and port
        wait_healthy(server, base)
        assert simsweep(["sync", str(out)]) == 0
        assert json.loads((out / "sweep.json").read_text())["tracking_synced"] is True

        client = MlflowClient(base)
        exp = client.get_experiment_by_name("sweep-srvkill")
        runs = client.search_runs([exp.experiment_id], max_results=5000)
        parents = [r for r in runs if r.data.tags.get("simsweep.kind") == "sweep"]
        assert len(parents) == 1 and parents[0].info.status == "FINISHED"
        children = [r for r in runs if r.info.run_id != parents[0].info.run_id]
        by_point: dict[str, list] = {}
        for run in children:  # no untagged leftover of a cut-off run either
            by_point.setdefault(run.data.tags.get("simsweep.point_hash", ""), []).append(run)
        assert set(by_point) == set(table["point_hash"].to_list())
        metrics = point_metric_columns(table, ["iteration_time_s"])
        for row in table.iter_rows(named=True):
            (run,) = by_point[row["point_hash"]]  # exactly one per point
            assert run.info.status == "FINISHED"
            assert run.data.tags["mlflow.parentRunId"] == parents[0].info.run_id
            want = {k: float(row[k]) for k in metrics
                    if row[k] is not None and not math.isnan(float(row[k]))}
            assert set(run.data.metrics) == set(want), (row["point_hash"], run.data.metrics)
            for key, value in want.items():
                assert run.data.metrics[key] == pytest.approx(value, rel=1e-12), key
    finally:
        kill_server(server)
