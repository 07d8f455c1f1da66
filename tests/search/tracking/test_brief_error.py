"""The console wording of a tracking failure: one short line from a real client failure."""

from __future__ import annotations

import socket

import pytest

from search.tracking.errors import brief_error


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again on exit: nothing listens there


def test_unreachable_server_error_is_one_short_line(monkeypatch):
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "2")
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"http://127.0.0.1:{_closed_port()}")
    with pytest.raises(Exception) as caught:
        client.get_experiment_by_name("anything")
    full = str(caught.value)
    line = brief_error(caught.value)
    assert len(full) > 200  # the raw text is the long retry chain this wording exists for
    assert "\n" not in line and len(line) <= 160
    assert line.startswith(type(caught.value).__name__ + ": ")
    assert "Connection refused" in line
    assert "0x" not in line  # no object reprs


def test_short_messages_pass_through_and_long_ones_are_cut():
    assert brief_error(ValueError("bad key")) == "ValueError: bad key"
    line = brief_error(RuntimeError("x" * 500), limit_chars=80)
    assert len(line) == 80 and line.endswith("…")
