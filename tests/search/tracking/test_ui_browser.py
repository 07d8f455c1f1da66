"""End to end in a real browser: ``simsweep ui`` on a temporary store holding a real sweep and a
real search, pages loaded in headless Chromium (Debian's package; skipped when absent) with every
host but 127.0.0.1 unresolvable, so a page that needs the network shows it. Checks, from the
rendered DOM: the printed link lists the child runs by their axis values; a child's page shows
its metric values; the sweep's and Optuna's plot pages draw their SVG offline; the results
table is previewed. ``SIMSWEEP_SCREENSHOTS=DIR`` keeps PNG screenshots (README: docs/)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from search.cli import main as simsweep
from search.sweep.driver import run_sweep

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [pytest.mark.slow, pytest.mark.ray, pytest.mark.mlflow,
              pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed")]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _chromium(url: str, profile: Path, screenshot: Path | None = None, dom: bool = True) -> str:
    """The rendered DOM of ``url`` (and a screenshot), network limited to 127.0.0.1."""
    assert CHROMIUM is not None
    base = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--no-first-run", f"--user-data-dir={profile}", "--window-size=1500,950",
            "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
            "--virtual-time-budget=20000"]
    if screenshot is not None:
        subprocess.run([*base, f"--screenshot={screenshot}", url], capture_output=True,
                       timeout=180, check=False)
    if not dom:
        return ""
    done = subprocess.run([*base, "--dump-dom", url], capture_output=True, text=True,
                          timeout=180, check=False)
    return done.stdout


def _text(dom: str) -> str:
    body = re.sub(r"<script.*?</script>|<style.*?</style>", " ", dom, flags=re.S)
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", body))


def _start_ui(db: str, port: int) -> tuple[subprocess.Popen, dict[str, str]]:
    proc = subprocess.Popen([sys.executable, "-m", "search.cli", "ui", "--port", str(port),
                             "--uri", db], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True, start_new_session=True,
                            env={**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true"})
    assert proc.stdout is not None
    links: dict[str, str] = {}
    first = proc.stdout.readline()
    assert first.startswith("MLflow UI on http://127.0.0.1:"), first
    while len(links) < 2:
        line = proc.stdout.readline()
        assert line, "simsweep ui printed no experiment link"
        name, _, link = line.strip().partition(": ")
        links[name] = link
    deadline = time.monotonic() + 180
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                if r.status == 200:
                    return proc, links
        except OSError:
            pass
        assert proc.poll() is None and time.monotonic() < deadline, "mlflow ui did not start"
        time.sleep(1)


def test_runs_plots_and_tables_render_in_chromium(ray_local, plan_for, tmp_path):
    from mlflow import MlflowClient

    db = f"sqlite:///{tmp_path / 'mlflow.db'}"
    plan = plan_for("parallel.tp=1,2", "system.scaleup.bandwidth_GBps=150,600", "sweep.name=ui",
                    f"sweep.output_dir={tmp_path / 'sw'}", f"tracking.uri={db}")
    assert run_sweep(plan, plan.base_cfg).tracking_ok
    assert simsweep(["search", "workload=gpt_tiny", "system.num_gpus=16",
                     "parallel.global_batch=32", f"search.output_dir={tmp_path / 'st'}",
                     "search.study_name=ui", "search.n_trials=10", "search.batch_size=5",
                     "search.in_process=true", "search.objectives=[iteration_time_s,capex_usd]",
                     f"tracking.uri={db}", "parallel.tp=choice(1,2,4)",
                     "system.scaleout.bandwidth_GBps=tag(log, interval(5,200))"]) == 0
    client = MlflowClient(db)
    runs = {e.name: client.search_runs([e.experiment_id], max_results=100)
            for e in client.search_experiments()}
    sweep_parent = next(r for r in runs["sweep-ui"] if r.data.tags["simsweep.kind"] == "sweep")
    child = next(r for r in runs["sweep-ui"] if r.info.run_name == "tp=2 bandwidth_GBps=600")
    study_parent = next(r for r in runs["search-ui"] if "simsweep.study" in r.data.tags)
    shots = Path(os.environ.get("SIMSWEEP_SCREENSHOTS") or tmp_path)
    port = _free_port()
    proc, links = _start_ui(db, port)
    try:
        base = f"http://127.0.0.1:{port}"
        assert set(links) == {"sweep-ui", "search-ui"}
        text = _text(_chromium(links["sweep-ui"], tmp_path / "p1", shots / "ui-runs.png"))
        for tp in (1, 2):  # the runs table lists every child run by its axis values
            for bw in (150, 600):
                assert f"tp={tp} bandwidth_GBps={bw}" in text
        exp = child.info.experiment_id
        page = f"{base}/#/experiments/{exp}/runs/{child.info.run_id}?workflowType=machine_learning"
        text = _text(_chromium(page, tmp_path / "p2"))
        value = child.data.metrics["iteration_time_s"]
        assert "iteration_time_s" in text and re.search(rf"{str(value)[:5]}\d*", text)
        for run, path, png, shot in (
                (sweep_parent, "plots/sweep.html", "plots/pareto_time_cost.png", "ui-sweep-plot.png"),
                (study_parent, "plots/optuna.html", "plots/pareto_front.png", "ui-optuna-plot.png")):
            # the page as MLflow serves it, drawn with no network (the UI shows it in an iframe)
            url = f"{base}/get-artifact?path={path}&run_uuid={run.info.run_id}"
            with urllib.request.urlopen(url, timeout=60) as resp:
                local = tmp_path / shot.replace(".png", ".html")
                local.write_bytes(resp.read())
            dom = _chromium(local.as_uri(), tmp_path / f"p-{shot}")
            assert dom.count('class="main-svg"') >= 2, f"{path} drew no plot offline"
            viewer = (f"{base}/#/experiments/{run.info.experiment_id}/runs/{run.info.run_id}/"
                      f"artifacts/{png}?workflowType=machine_learning")  # the static image
            _chromium(viewer, tmp_path / f"v-{shot}", shots / shot, dom=False)
        page = (f"{base}/#/experiments/{exp}/runs/{sweep_parent.info.run_id}/artifacts/"
                f"results.csv?workflowType=machine_learning")
        text = _text(_chromium(page, tmp_path / "p3", shots / "ui-results.png"))
        assert "point_hash" in text and "iteration_time_s" in text
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
