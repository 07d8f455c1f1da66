"""Test-session settings shared by every test: nothing is written outside temporary folders."""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest

_CACHE_DIR: str | None = None


def pytest_configure(config: pytest.Config) -> None:
    """Point the ET decode cache at a temporary folder and keep Ray's usage stats off."""
    global _CACHE_DIR
    _CACHE_DIR = tempfile.mkdtemp(prefix="simsweep-test-cache-")
    os.environ["SIMSWEEP_CACHE_DIR"] = _CACHE_DIR
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"


def pytest_unconfigure(config: pytest.Config) -> None:
    """Remove the temporary cache folder."""
    if _CACHE_DIR:
        shutil.rmtree(_CACHE_DIR, ignore_errors=True)
