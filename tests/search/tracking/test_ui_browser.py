"""End to end in a real browser: ``simsweep ui`` on a temporary store holding a real sweep and a
real search, pages loaded in headless Chromium (Debian's package; skipped when absent) with every
host but 127.0.0.1 unresolvable, so a page that needs the network shows it. Checks, from the
rendered page: the printed links open the runs tables (the saved view of each sweep / study) with
every child run, its axis values and its metric values as columns; the sweep's and Optuna's
interactive plots draw inside MLflow's sandboxed artifact viewer (pixels of plotly's plot area
in the screenshot) and the PNGs show in the image viewer, with no request leaving 127.0.0.1
(Chromium's net log: every request a page initiated); the results table is previewed.
``SIMSWEEP_SCREENSHOTS=DIR`` keeps PNG screenshots (README: docs/).

Site isolation is off in the plot checks: MLflow's viewer puts the HTML in a
``sandbox="allow-scripts"`` iframe (an opaque origin, so an out-of-process frame), which
headless Chromium's one-shot screenshot does not paint (blank even though plotly drew)."""


from __future__ import annotations

import json
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
from typing import Any

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


def _chromium(url: str, profile: Path, screenshot: Path | None = None, dom: bool = True,
              one_process: bool = False, netlog: Path | None = None,
              budget_ms: int = 20000) -> str:
    """The rendered DOM of ``url`` (and a screenshot), network limited to 127.0.0.1, after
    ``budget_ms`` of Chromium's virtual time."""
    assert CHROMIUM is not None
    base = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--no-first-run", f"--user-data-dir={profile}", "--window-size=1500,950",
            "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
            f"--virtual-time-budget={budget_ms}"]
    if one_process:  # paint sandboxed (out-of-process) iframes in the screenshot
        base += ["--disable-site-isolation-trials",
                 "--disable-features=IsolateOrigins,site-per-process"]
    if netlog is not None:
        base.append(f"--log-net-log={netlog}")
    if screenshot is not None:
        subprocess.run([*base, f"--screenshot={screenshot}", url], capture_output=True,
                       timeout=180, check=False)
    if not dom:
        return ""
    done = subprocess.run([*base, "--dump-dom", url], capture_output=True, text=True,
                          timeout=180, check=False)
    return done.stdout


def _page_requests(netlog: Path) -> set[str]:
    """Origins of every request a page initiated (Chromium's own background requests, whose
    initiator is "not an origin", excluded)."""
    data = json.loads(netlog.read_text())
    start = data["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    out = set()
    for event in data["events"]:
        params = event.get("params") or {}
        if event["type"] == start and params.get("initiator") not in (None, "not an origin"):
            out.add("/".join(str(params["url"]).split("/")[:3]))
    return out


def _plot_area_share(png: Path, box: tuple[int, int, int, int]) -> float:
    """Share of pixels of ``box`` (left, top, right, bottom) in plotly's plot-area colour
    (#E5ECF6, its default template): 0 for a blank frame, tens of % for a drawn plot."""
    import numpy as np
    from PIL import Image

    pixels = np.asarray(Image.open(png).convert("RGB").crop(box), dtype=np.int16)
    return float((np.abs(pixels - np.array([229, 236, 246])).max(axis=2) <= 2).mean())


def _shows_png(shot: Path, png: bytes, box: tuple[int, int, int, int]) -> int:
    """Pixels of ``box`` in the screenshot ``shot`` that have the most frequent saturated
    colour of the image ``png`` (its plot marks, e.g. the Pareto front's red): 0 when the
    viewer shows nothing or something else."""
    import io

    import numpy as np
    from PIL import Image

    src = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"), dtype=np.int16).reshape(-1, 3)
    marks = src[(src.max(axis=1) - src.min(axis=1)) > 80]
    assert len(marks), "the image has no coloured marks to look for"
    values, counts = np.unique(marks, axis=0, return_counts=True)
    colour = values[counts.argmax()]
    pixels = np.asarray(Image.open(shot).convert("RGB").crop(box), dtype=np.int16)
    return int((np.abs(pixels - colour).max(axis=2) <= 24).sum())  # scaled: blended edges


def _text(dom: str) -> str:
    body = re.sub(r"<script.*?</script>|<style.*?</style>", " ", dom, flags=re.S)
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", body))


def _start_ui(db: str, port: int, stderr: Any) -> tuple[subprocess.Popen, dict[str, str]]:
    proc = subprocess.Popen([sys.executable, "-m", "search.cli", "ui", "--port", str(port),
                             "--uri", db], stdout=subprocess.PIPE, stderr=stderr,
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
    err_path = tmp_path / "ui.stderr"
    err_file = err_path.open("w")
    proc, links = _start_ui(db, port, err_file)
    try:
        base = f"http://127.0.0.1:{port}"
        assert set(links) == {"sweep-ui", "search-ui"}
        assert "viewStateShareKey=" in links["sweep-ui"]  # the saved view, not the bare table
        text = _text(_chromium(links["sweep-ui"], tmp_path / "p1", shots / "ui-runs.png"))
        children = [r for r in runs["sweep-ui"]
                    if r.data.tags.get("mlflow.parentRunId") == sweep_parent.info.run_id]
        assert len(children) == 4
        # the axes and the metrics are columns of the table, with every child's values
        for column in ("parallel.tp", "system.scaleup.bandwidth_GBps", "iteration_time_s", "mfu"):
            assert column in text, column
        for run in children:
            assert run.info.run_name in text  # e.g. "tp=2 bandwidth_GBps=600"
            assert repr(run.data.metrics["iteration_time_s"]) in text, run.info.run_name
            assert repr(run.data.metrics["mfu"]) in text, run.info.run_name
            assert f"{float(run.data.params['system.scaleup.bandwidth_GBps']):.1f}" in text
            assert run.info.end_time > run.info.start_time  # a duration, not 0 ms
        text = _text(_chromium(links["search-ui"], tmp_path / "p1s"))
        trials = [r for r in runs["search-ui"]
                  if r.data.tags.get("mlflow.parentRunId") == study_parent.info.run_id]
        assert len(trials) == 10 and "capex_usd" in text and "parallel.tp" in text
        for run in trials:  # the view lists the feasible trials (filter metrics.feasible = 1)
            feasible = run.data.metrics["feasible"] == 1
            assert (run.info.run_name in text) == feasible, run.info.run_name
            if feasible and "capex_usd" in run.data.metrics:
                assert repr(run.data.metrics["capex_usd"]) in text, run.info.run_name
        exp = child.info.experiment_id
        page = f"{base}/#/experiments/{exp}/runs/{child.info.run_id}?workflowType=machine_learning"
        text = _text(_chromium(page, tmp_path / "p2"))
        value = child.data.metrics["iteration_time_s"]
        assert "iteration_time_s" in text and re.search(rf"{str(value)[:5]}\d*", text)
        viewer_box = (440, 200, 1090, 900)  # the artifact preview beside the file tree
        for run, path, png, shot in (
                (sweep_parent, "plots/sweep.html", "plots/pareto_time_cost.png", "ui-sweep-plot.png"),
                (study_parent, "plots/optuna.html", "plots/pareto_front.png", "ui-optuna-plot.png")):
            for name, kind in ((path, "html"), (png, "png")):
                viewer = (f"{base}/#/experiments/{run.info.experiment_id}/runs/{run.info.run_id}/"
                          f"artifacts/{name}?workflowType=machine_learning")
                image = (shots / shot) if kind == "html" else tmp_path / f"{kind}-{shot}"
                # a one-shot headless screenshot of a multi-MB plotly page can fire before the
                # sandboxed frame paints on a loaded machine (once blank in all of three loads
                # at load ~5): up to four fresh loads, each with more virtual time and each
                # checked for foreign requests; the plot must show in one of them
                for attempt in range(4):
                    netlog = tmp_path / f"net-{kind}-{shot}-{attempt}.json"
                    _chromium(viewer, tmp_path / f"v-{kind}-{shot}-{attempt}", image, dom=False,
                              one_process=True, netlog=netlog, budget_ms=20000 * (attempt + 1))
                    requests = _page_requests(netlog)
                    assert requests and requests <= {base}, requests  # nothing left 127.0.0.1
                    if kind != "html" or _plot_area_share(image, viewer_box) > 0.05:
                        break
                if kind == "html":  # plotly drew its plot area inside the sandboxed iframe
                    assert _plot_area_share(image, viewer_box) > 0.05, f"{name} drew no plot"
                else:  # the image viewer shows the PNG's own plot marks
                    url = f"{base}/get-artifact?path={name}&run_uuid={run.info.run_id}"
                    with urllib.request.urlopen(url, timeout=60) as resp:
                        assert _shows_png(image, resp.read(), viewer_box) > 50, name
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
        err_file.close()
    # the server's third-party deprecation notices are silenced (search.quiet)
    assert "DeprecationWarning" not in err_path.read_text()
