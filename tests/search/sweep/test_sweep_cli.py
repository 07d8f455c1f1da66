"""The sweep-side CLI: bad input is one line and exit 2; `simsweep ui` targets the local store."""

from __future__ import annotations

from pathlib import Path

import pytest

from search.cli import main as simsweep
from search.commands.ui import ui_command


@pytest.mark.parametrize(("args", "needle"), [
    (["sweep", "sweep.batch_size=many"], "sweep.batch_size='many'"),
    (["sweep", "parallel.tp=1,2", "system.scaleout.bandwidth_GBps=0,25"],
     "system.scaleout.bandwidth_GBps=0"),
    (["sweep", "system=nope"], "system='nope'"),
    (["sweep", "a=interval(1,2)"], "sweep.mode=random"),
    (["sync", "/nonexistent/folder"], "not a sweep folder"),
])
def test_bad_input_is_one_line_on_stderr_and_exit_2(capsys, args, needle):
    assert simsweep(args) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1


def test_ui_serves_the_local_store_on_localhost(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cmd = ui_command([])
    assert cmd[cmd.index("--host") + 1] == "127.0.0.1" and cmd[cmd.index("--port") + 1] == "5000"
    store = cmd[cmd.index("--backend-store-uri") + 1]
    assert store == f"sqlite:///{Path(tmp_path).resolve() / '.simsweep' / 'mlflow.db'}"
    assert cmd[cmd.index("--default-artifact-root") + 1].endswith("/.simsweep/artifacts")
    other = ui_command(["--port=5050", "--uri", "http://example:5000"])
    assert "5050" in other and "--default-artifact-root" not in other


def test_sync_on_a_searchs_output_dir_or_a_folder_of_sweeps_points_to_the_folders_inside(
        capsys, tmp_path):
    study = tmp_path / "search-out" / "gpt-study"
    study.mkdir(parents=True)
    (study / "gpt-study.journal").write_text("")
    assert simsweep(["sync", str(tmp_path / "search-out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(study) in err and "search.resume=true" in err, err
    sweep = tmp_path / "outputs" / "sweep-default-1"
    sweep.mkdir(parents=True)
    (sweep / "sweep.json").write_text("{}")
    assert simsweep(["sync", str(tmp_path / "outputs")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"sweep folders inside: {sweep}" in err, err
