"""A real ``mlflow server`` for tests: 127.0.0.1, a free port, a SQLite store in a tmp folder.

The server runs in its own process group (uvicorn and its worker below it); :func:`kill_server`
ends that group by the leader's PID (SIGKILL: a crash, SIGTERM: a clean stop). MLflow's job
runner is switched off (``MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false``): it is not used here and
its consumers slow the start-up.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

__all__ = ["free_port", "group_pids", "kill_server", "logged_children", "start_server",
           "wait_healthy"]


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(port: int, folder: Path) -> subprocess.Popen[bytes]:
    """Start ``mlflow server`` on 127.0.0.1:``port`` with its store ``folder/srv.db``."""
    return subprocess.Popen(
        [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port),
         "--workers", "1", "--backend-store-uri", f"sqlite:///{folder / 'srv.db'}",
         "--artifacts-destination", str(folder / "srv-art")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        env={**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true",
             "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"})


def wait_healthy(server: subprocess.Popen[bytes], base: str, timeout_s: float = 180) -> None:
    """Block until ``base``/health answers 200 (the server must stay alive meanwhile)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(f"{base}/health", timeout=2) as resp:
                if resp.status == 200:
                    return
        except OSError:
            pass
        assert server.poll() is None and time.monotonic() < deadline, "mlflow server down"
        time.sleep(0.25)


def group_pids(pgid: int) -> list[int]:
    """PIDs of the live processes of process group and session ``pgid`` (from /proc)."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and int(fields[3]) == pgid and fields[0] != "Z":
                out.append(int(entry.name))
    return out


def kill_server(server: subprocess.Popen[bytes], sig: int = signal.SIGKILL) -> None:
    """Send ``sig`` to the server's process group, reap the leader, then SIGKILL any member of
    that group still alive (by its PID)."""
    if server.poll() is None:
        os.killpg(server.pid, sig)
    try:
        server.wait(timeout=20)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()
    deadline = time.monotonic() + 10
    while (left := group_pids(server.pid)) and time.monotonic() < deadline:
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.1)


def logged_children(db: Path) -> int:
    """Runs carrying a ``simsweep.point_hash`` tag in the store, read straight from SQLite."""
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1) as conn:
            row = conn.execute("SELECT count(*) FROM tags WHERE key = 'simsweep.point_hash'")
            return int(row.fetchone()[0])
    except sqlite3.Error:
        return 0
