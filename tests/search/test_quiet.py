"""Third-party deprecation notices stay off the terminal; simsweep's own warnings still show."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

from search.quiet import server_warning_env, silence_third_party_warnings

ROOT = Path(__file__).resolve().parents[2]


def test_library_deprecations_are_ignored_and_ours_are_not():
    with warnings.catch_warnings(record=True) as seen:
        warnings.resetwarnings()
        warnings.simplefilter("always")
        silence_third_party_warnings()
        for module in ("mlflow.server.fastapi_app", "ray._private.worker", "starlette"):
            warnings.warn_explicit("old api", DeprecationWarning, "x.py", 1, module=module)
        warnings.warn_explicit("starlette.middleware.wsgi is deprecated", UserWarning, "x.py",
                               1, module="mlflow.server.fastapi_app")
        warnings.warn_explicit("old api", DeprecationWarning, "x.py", 1, module="search.sweep")
        warnings.warn_explicit("real problem", UserWarning, "x.py", 1, module="mlflow.tracking")
    assert [(str(w.message), w.category) for w in seen] == [
        ("old api", DeprecationWarning), ("real problem", UserWarning)]


def test_the_server_environment_extends_pythonwarnings():
    env = server_warning_env({"PYTHONWARNINGS": "error::ResourceWarning"})
    rules = env["PYTHONWARNINGS"].split(",")
    assert rules[0] == "error::ResourceWarning" and "ignore::DeprecationWarning" in rules
    assert "ignore:starlette.:UserWarning" in rules


def test_a_command_prints_no_deprecation_warning():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("PYTHONWARNINGS", None)
    done = subprocess.run([sys.executable, "-m", "search.cli", "simulate", "workload=gpt_tiny"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT, env=env)
    assert done.returncode == 0, done.stderr
    assert "Warning" not in done.stderr, done.stderr
