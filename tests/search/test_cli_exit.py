"""The console script (search/cli.py ``run``): exit code and output of the command, whole."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_missing_module_of_simsweep_says_reinstall_not_pip_install(tmp_path):
    """An import of one of simsweep's own modules that fails (a checkout newer than the install)
    is no third-party package to pip-install; a third-party one is."""
    for module, want in (("search.study.groups", "reinstall it"), ("optuna", "pip install optuna")):
        code = (f"import sys; sys.modules[{module!r}] = None; from search.cli import main; "
                "sys.exit(main(['search', 'workload=gpt_tiny', 'search.n_trials=1']))")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             cwd=tmp_path, check=False, timeout=120)
        assert out.returncode == 2, out.stderr
        assert module in out.stderr and want in out.stderr, out.stderr
        assert "Traceback" not in out.stderr


def test_the_console_script_is_run():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["scripts"]["simsweep"] == "search.cli:run"


def test_run_exits_with_the_command_code_and_its_whole_output(tmp_path):
    # stdout to a file (block-buffered, not a tty): what is still buffered at exit must land
    out = tmp_path / "out.json"
    with out.open("w") as sink:
        ok = subprocess.run([sys.executable, "-m", "search.cli", "simulate", "--json"],
                            stdout=sink, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                            check=False, timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert json.loads(out.read_text())["iteration_time_s"] > 0
    bad = subprocess.run([sys.executable, "-m", "search.cli", "nosuch"], capture_output=True,
                         text=True, cwd=tmp_path, check=False, timeout=120)
    assert bad.returncode == 2 and "unknown command 'nosuch'" in bad.stderr
