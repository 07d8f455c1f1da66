"""Shared fixtures for the Chakra trace tests: an isolated trace cache per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from simcore.traces.chakra import cache as et_cache


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("SIMSWEEP_CACHE_DIR", str(tmp_path / "et-cache"))
    et_cache.clear_memory()
    yield
    et_cache.clear_memory()
