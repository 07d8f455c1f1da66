"""MLflow over HTTP: a sweep while the server is down finishes on disk, ``simsweep sync`` logs it
once a server is up, and a sweep against a live ``mlflow server`` is found through its REST API
(``simsweep sync`` of that folder, to its recorded URI, then adds nothing).
"""

from __future__ import annotations

import json
import signal
import urllib.request

import polars as pl
import pytest

from search.cli import main as simsweep
from search.sweep.driver import run_sweep
from tests.search.mlflow_server import free_port, kill_server, start_server, wait_healthy

AXES = ("parallel.tp=1,2", "system.scaleout.bandwidth_GBps=25,50,100,200,400")
pytestmark = [pytest.mark.slow, pytest.mark.ray, pytest.mark.mlflow]


def _rest(base: str, path: str, body: dict | None = None, query: str = "") -> dict:
    """POST ``body`` (or GET with ``query``) to MLflow's REST API."""
    url = f"{base}/api/2.0/mlflow/{path}{'?' + query if query else ''}"
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read())


def _runs(base: str, experiment: str) -> list[dict]:
    exp = _rest(base, "experiments/get-by-name", query=f"experiment_name={experiment}")
    got = _rest(base, "runs/search", {"experiment_ids": [exp["experiment"]["experiment_id"]],
                                      "max_results": 1000})
    return got.get("runs", [])


def _tags(run: dict) -> dict[str, str]:
    return {t["key"]: t["value"] for t in run["data"].get("tags", [])}


def test_down_server_then_sync_and_live_server_via_rest(ray_local, plan_for, tmp_path):
    port, dead = free_port(), free_port()
    base = f"http://127.0.0.1:{port}"
    server = start_server(port, tmp_path)  # boots (slowly) while the first sweep runs
    try:
        down = plan_for(*AXES, "sweep.name=down", f"sweep.output_dir={tmp_path / 'down'}",
                        f"tracking.uri=http://127.0.0.1:{dead}")
        outcome = run_sweep(down, down.base_cfg)
        assert not outcome.tracking_ok and "unreachable" in outcome.tracking_error
        assert pl.read_parquet(tmp_path / "down" / "results.parquet").height == 10
        manifest = json.loads((tmp_path / "down" / "sweep.json").read_text())
        assert manifest["tracking_synced"] is False

        wait_healthy(server, base)
        assert simsweep(["sync", str(tmp_path / "down"), "--uri", base]) == 0
        assert simsweep(["sync", str(tmp_path / "down"), "--uri", base]) == 0  # idempotent
        runs = _runs(base, "sweep-down")
        kinds = [_tags(r).get("simsweep.kind") for r in runs]
        assert kinds.count("sweep") == 1 and kinds.count("point") == 10
        assert json.loads((tmp_path / "down" / "sweep.json").read_text())["tracking_synced"]

        live = plan_for(*AXES, "sweep.name=live", f"sweep.output_dir={tmp_path / 'live'}",
                        f"tracking.uri={base}")
        outcome = run_sweep(live, live.base_cfg)
        assert outcome.tracking_ok, outcome.tracking_error
        assert simsweep(["sync", str(tmp_path / "live")]) == 0  # the recorded URI; nothing new
        table = pl.read_parquet(tmp_path / "live" / "results.parquet")
        runs = _runs(base, "sweep-live")
        points = {_tags(r)["simsweep.point_hash"]: r for r in runs
                  if _tags(r).get("simsweep.kind") == "point"}
        assert len(runs) == 11 and set(points) == set(table["point_hash"].to_list())
        for row in table.iter_rows(named=True):
            metrics = {m["key"]: m["value"] for m in points[row["point_hash"]]["data"]["metrics"]}
            assert metrics["iteration_time_s"] == pytest.approx(row["iteration_time_s"], rel=1e-12)
        parent = next(r for r in runs if _tags(r).get("simsweep.kind") == "sweep")
        listing = _rest(base, "artifacts/list", query=f"run_id={parent['info']['run_id']}")
        files = {f["path"] for f in listing.get("files", [])}
        assert {"results.parquet", "config.yaml"} <= files
        assert {m["key"] for m in parent["data"]["metrics"]} >= {"sweep.num_points", "sweep.num_feasible"}
    finally:
        kill_server(server, signal.SIGTERM)
