"""A local sweep's Ray listens on loopback only, in a private temp dir (real subprocess, /proc).

Every TCP socket in LISTEN state owned by the ``simsweep sweep`` process tree (driver, GCS,
raylet, agents, workers) is sampled while the sweep runs; each must be on 127.0.0.0/8 or ::1.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.search.run.sockets import is_loopback, listeners_by_process

ROOT = Path(__file__).resolve().parents[3]
pytestmark = [pytest.mark.slow, pytest.mark.ray]


def test_local_sweep_listens_on_loopback_only(tmp_path: Path) -> None:
    temp = f"/tmp/rl_{os.getpid()}"
    args = ["parallel.tp=1,2", "system.scaleout.bandwidth_GBps=range(25,401,25)",
            "sweep.batch_size=2", "sweep.name=loopback", f"sweep.output_dir={tmp_path / 'out'}",
            "tracking.enabled=false", "sweep.progress=false", f"ray.temp_dir={temp}"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAY_USAGE_STATS_ENABLED": "0"}
    proc = subprocess.Popen([sys.executable, "-m", "search.cli", "sweep", *args], cwd=tmp_path, env=env,
                            start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    seen: set[tuple[str, str]] = set()
    mode = None
    deadline = time.monotonic() + 240
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            seen.update(listeners_by_process(proc.pid))
            if mode is None and os.path.isdir(temp):
                mode = stat.S_IMODE(os.stat(temp).st_mode)
            time.sleep(0.1)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
        _, err = proc.communicate()
    assert proc.returncode == 0, err.decode()[-2000:]
    processes = {name for name, _ in seen}
    assert any("gcs_server" in n for n in processes) and any("raylet" in n for n in processes), seen
    exposed = sorted((n, a) for n, a in seen if not is_loopback(a))
    assert not exposed, exposed
    assert mode == 0o700
    subprocess.run(["rm", "-rf", temp], check=False)


def test_the_test_suites_ray_listens_on_loopback_only(ray_local) -> None:
    """The ``ray_local`` fixture every Ray test uses starts Ray as a sweep does: loopback only."""
    ray_local.get(ray_local.remote(lambda: 1).remote())  # a worker process is up too
    seen = listeners_by_process(os.getpid())
    processes = {name for name, _ in seen}
    assert any("gcs_server" in n for n in processes) and any("raylet" in n for n in processes), seen
    exposed = sorted((n, a) for n, a in seen if not is_loopback(a))
    assert not exposed, exposed


def test_a_batch_sized_result_comes_back_inline_not_through_the_object_store(ray_local) -> None:
    """A local Ray started by init_ray returns a result of a 2,048-point batch's size (~250 KB,
    over Ray's default 100 KiB) in the reply, not via the shared-memory store: no node holds it."""
    import numpy as np

    from search.run.workers import INLINE_OBJECT_MAX_B

    size_b = 16 * 2048 * 8
    assert 100 * 1024 < size_b < INLINE_OBJECT_MAX_B
    ref = ray_local.remote(lambda: np.zeros(size_b // 8)).remote()
    assert ray_local.get(ref).nbytes == size_b
    where = ray_local.experimental.get_object_locations([ref])[ref]
    assert where["node_ids"] == [] and where["object_size"] >= size_b
