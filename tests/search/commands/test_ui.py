"""``simsweep ui``: a real MLflow server on 127.0.0.1 with a SQLite store in a tmp folder."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.search.mlflow_server import free_port, group_pids, kill_server, wait_healthy

pytestmark = [pytest.mark.slow, pytest.mark.mlflow]


def _command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _start_ui(tmp_path: Path, port: int) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_SERVER_ENABLE_JOB_EXECUTION"}
    return subprocess.Popen(
        [sys.executable, "-m", "search.cli", "ui", "--port", str(port),
         "--uri", f"sqlite:///{tmp_path / 'ui.db'}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        env={**env, "MLFLOW_DISABLE_TELEMETRY": "true"})


def test_one_server_process_and_sigint_to_its_pid_ends_them_all(tmp_path: Path) -> None:
    """The MLflow CLI, its one uvicorn worker and nothing else (no job runner and its queue
    consumers); SIGINT to the PID the user started (not its group) stops every one."""
    port = free_port()
    (tmp_path / "ui.db").touch()
    server = _start_ui(tmp_path, port)
    try:
        wait_healthy(server, f"http://127.0.0.1:{port}")
        lines = [_command_line(pid) for pid in group_pids(server.pid)]
        assert len(lines) == 2, lines
        assert sum(" -m uvicorn " in line for line in lines) == 1, lines
        assert not any("job" in line or "huey" in line for line in lines), lines
        server.send_signal(signal.SIGINT)
        deadline = time.monotonic() + 30
        while group_pids(server.pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert group_pids(server.pid) == []
        assert server.wait(timeout=5) == 0
    finally:
        kill_server(server)
