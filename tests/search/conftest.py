"""Shared fixtures of the sweep tests: the project's conf/ and one local Ray per module."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CONF = Path(__file__).resolve().parents[2] / "conf"


def _plan_for(*overrides: str) -> Any:
    from search.config.compose import compose_session
    from search.sweep.plan import make_plan

    compose, options = compose_session(CONF)
    return make_plan(compose, options, ["sweep.progress=false", *overrides])


@pytest.fixture
def plan_for() -> Any:
    """A function: overrides -> sweep plan on the project's conf/."""
    return _plan_for


@pytest.fixture(scope="module")
def ray_local() -> Iterator[Any]:
    """One local Ray with 2 CPUs for the whole test module (start-up is slow on 2 cores),
    started by the project's own :func:`search.run.workers.init_ray`: bound to 127.0.0.1 in a
    private (0700) temp dir, as a sweep starts it."""
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    import ray

    from search.run.workers import init_ray

    tmp = tempfile.mkdtemp(prefix="rs_", dir="/tmp")  # created 0700
    if ray.is_initialized():  # a Ray left by an earlier module of this process: start afresh
        ray.shutdown()
    assert init_ray(None, 2, tmp)
    yield ray
    ray.shutdown()
    shutil.rmtree(tmp, ignore_errors=True)
