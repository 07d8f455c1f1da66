"""``simsweep ui``: a real MLflow server on 127.0.0.1 with a SQLite store in a tmp folder."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from search.commands.ui import ui_command
from simcore.errors import InputError
from tests.cli_output import one_line_error
from tests.search.mlflow_server import free_port, group_pids, kill_server, wait_healthy


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


@pytest.mark.slow
@pytest.mark.mlflow
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


@pytest.mark.parametrize(("args", "needle"), [
    (["--port"], "--port=None: needs a value"),
    (["--port", "--uri", "sqlite:////x.db"], "--port='--uri': needs a value"),
    (["--host="], "--host='': needs a value"),
    (["--uri"], "--uri=None: needs a value"),
    (["--port", "abc"], "--port='abc': must be a TCP port number in 1..65535"),
    (["--port=99999"], "--port='99999': must be a TCP port number in 1..65535"),
    (["--port", "0"], "--port='0': must be a TCP port number in 1..65535"),
    (["--bogus"], "option='--bogus': unknown; the options are --host, --port, --uri"),
])
def test_a_bad_option_is_refused_before_the_store_is_touched(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], needle: str) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError) as err:
        ui_command(args)
    assert str(err.value).startswith(needle)
    assert not (tmp_path / ".simsweep").exists()


@pytest.mark.parametrize(("uri", "needle"), [
    ("sqlite:///{tmp}/typo.db", "no such store: {tmp}/typo.db does not exist"),
    ("sqlite:///{tmp}/no/folder/mlflow.db", "no such store: {tmp}/no/folder/mlflow.db"),
    ("{tmp}/mlflow.db", "must be a tracking URI, e.g. sqlite:////abs/path/mlflow.db"),
])
def test_a_uri_naming_no_store_is_refused_not_created(tmp_path: Path, uri: str,
                                                       needle: str) -> None:
    with pytest.raises(InputError) as err:
        ui_command(["--uri", uri.format(tmp=tmp_path)])
    assert needle.format(tmp=tmp_path) in str(err.value)
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "mlflow.db").touch()  # an existing store is served as it is
    good = f"sqlite:///{tmp_path / 'mlflow.db'}"
    cmd = ui_command(["--uri", good])
    assert cmd[cmd.index("--backend-store-uri") + 1] == good


def test_a_port_in_use_is_one_line_and_exit_2_before_any_link(tmp_path: Path) -> None:
    """A second ``simsweep ui`` on a port another process listens on names the port (MLflow
    itself prints its links, fails to bind and exits 0)."""
    (tmp_path / "ui.db").touch()
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "search.cli", "ui", "--port", str(port),
             "--uri", f"sqlite:///{tmp_path / 'ui.db'}"],
            capture_output=True, text=True, timeout=120, start_new_session=True,
            env={**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true"})
    assert one_line_error(done.returncode, done.stderr, f"--port={port}",
                          "in use on 127.0.0.1", "another --port")
    assert done.stdout == ""
