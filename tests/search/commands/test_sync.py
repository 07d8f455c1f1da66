"""``simsweep sync``: its arguments are checked before anything is logged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from search.cli import main as simsweep
from search.sweep.driver import run_sweep
from tests.cli_output import one_line_error
from tests.search.mlflow_server import free_port


@pytest.mark.parametrize(("args", "needles"), [
    (["--uri"], ["--uri=None: needs a value"]),
    (["--uri="], ["--uri='': needs a value"]),
    (["{folder}", "--uri"], ["--uri=None: needs a value"]),
    (["{folder}", "--uri", "--force"], ["--uri='--force': needs a value"]),
    (["{folder}", "--bogus"], ["option='--bogus': unknown", "--uri URI"]),
    (["--uri", "sqlite:////x.db"], ["output_dir=None: needs at least one sweep folder"]),
])
def test_a_bad_argument_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str],
                                               tmp_path: Path, args: list[str],
                                               needles: list[str]) -> None:
    rc = simsweep(["sync", *(a.format(folder=tmp_path) for a in args)])
    out, err = capsys.readouterr()
    assert one_line_error(rc, err, *needles) and out == ""


@pytest.mark.ray
@pytest.mark.mlflow
def test_every_folder_is_checked_before_any_is_logged(ray_local, plan_for, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """A sweep that ran while its server was down, then a typo: nothing is logged, so the
    corrected command logs each point once."""
    plan = plan_for("parallel.tp=1,2", "sweep.name=down", f"sweep.output_dir={tmp_path / 'down'}",
                    f"tracking.uri=http://127.0.0.1:{free_port()}", "tracking.request_timeout_s=2")
    assert not run_sweep(plan, plan.base_cfg).tracking_ok
    store = tmp_path / "store.db"
    uri = f"sqlite:///{store}"
    rc = simsweep(["sync", str(tmp_path / "down"), str(tmp_path / "dwon"), "--uri", uri])
    out, err = capsys.readouterr()
    assert one_line_error(rc, err, f"output_dir='{tmp_path / 'dwon'}'", "not a sweep folder")
    assert out == "" and not store.exists()
    assert json.loads((tmp_path / "down" / "sweep.json").read_text())["tracking_synced"] is False
    assert simsweep(["sync", str(tmp_path / "down"), "--uri", uri]) == 0
    assert "logged 2 child runs" in capsys.readouterr().out


@pytest.mark.ray
@pytest.mark.mlflow
def test_a_store_that_fails_while_logging_is_named_with_its_reason(
        ray_local, plan_for, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """MLflow refuses its file store (a reachable store that fails): the line says why, not
    that the store is unreachable."""
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)
    plan = plan_for("parallel.tp=1,2", "sweep.name=down", f"sweep.output_dir={tmp_path / 'down'}",
                    f"tracking.uri=http://127.0.0.1:{free_port()}", "tracking.request_timeout_s=2")
    assert not run_sweep(plan, plan.base_cfg).tracking_ok
    capsys.readouterr()
    rc = simsweep(["sync", str(tmp_path / "down"), "--uri", (tmp_path / "mlruns").as_uri()])
    line = one_line_error(rc, capsys.readouterr().err, "failed while logging (MlflowException: ",
                          "filesystem tracking backend", "run `simsweep sync` again")
    assert "unreachable" not in line
