"""``sweep.in_process=true``: the same sweep evaluated in the driver process, without Ray.

The table must equal the one a real local Ray pool writes for the same plan (every metric of
every point, bit for bit), resume must work across the two modes (the sweep hash ignores how a
sweep runs), and the command must not start or even import Ray.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from search.sweep.driver import run_sweep

ROOT = Path(__file__).resolve().parents[3]
AXES = ("parallel.tp=1,2", "system.scaleout.bandwidth_GBps=range(25,401,75)",
        "system.scaleup.bandwidth_GBps=150,600,1800")
#: columns that say where and when a point ran, not what it computed
PROVENANCE = ("batch_id", "worker_node", "eval_start_unix_s", "eval_wall_s")


def _table(folder: Path) -> pl.DataFrame:
    return pl.read_parquet(folder / "results.parquet").drop(PROVENANCE)


@pytest.mark.ray
def test_in_process_table_equals_the_ray_pools_and_resumes_across_modes(ray_local, plan_for,
                                                                       tmp_path):
    common = (*AXES, "tracking.enabled=false", "sweep.batch_size=4")
    on_ray = plan_for(*common, f"sweep.output_dir={tmp_path / 'ray'}")
    run_sweep(on_ray, on_ray.base_cfg)
    local = plan_for(*common, "sweep.in_process=true", f"sweep.output_dir={tmp_path / 'local'}")
    outcome = run_sweep(local, local.base_cfg)
    assert outcome.computed == local.num_points == 36 and outcome.retries == 0
    assert list(outcome.batches_per_node) == [f"local:{socket.gethostname()}"]
    mine, theirs = _table(tmp_path / "local"), _table(tmp_path / "ray")
    assert mine.columns == theirs.columns and mine.equals(theirs)
    written = pl.read_parquet(tmp_path / "local" / "results.parquet")
    assert set(written["worker_node"].to_list()) == {f"local:{socket.gethostname()}"}

    resumed = plan_for(*common, f"sweep.output_dir={tmp_path / 'local'}", "sweep.resume=true")
    again = run_sweep(resumed, resumed.base_cfg)  # on Ray now: nothing left to compute
    assert (again.computed, again.skipped) == (0, 36)


def test_the_command_in_process_neither_starts_nor_imports_ray(tmp_path):
    """A fresh interpreter runs the sweep command in process; afterwards ``ray`` is not among
    its modules, and the printed start-up line does not mention Ray workers."""
    probe = (
        "import sys\n"
        "from search.commands.sweep import main\n"
        f"code = main(['sweep.in_process=true', 'tracking.enabled=false', 'sweep.progress=false',"
        f" 'sweep.output_dir={tmp_path / 'out'}'])\n"
        "print('ray imported:', 'ray' in sys.modules)\n"
        "sys.exit(code)\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "ray imported: False" in done.stdout
    assert "evaluated 16 points" in done.stdout and "Ray workers" not in done.stdout
    assert pl.read_parquet(tmp_path / "out" / "results.parquet").height == 16


def test_blas_runs_one_thread_while_the_sweep_evaluates_in_process(plan_for, tmp_path):
    from threadpoolctl import threadpool_info

    def blas_threads() -> list[int]:
        return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]

    before = blas_threads()
    seen: list[list[int]] = []
    plan = plan_for(*AXES, "tracking.enabled=false", "sweep.in_process=true",
                    f"sweep.output_dir={tmp_path}")
    run_sweep(plan, plan.base_cfg, on_batch=lambda _: seen.append(blas_threads()))
    assert before and seen and all(threads == [1] * len(before) for threads in seen)
    assert blas_threads() == before  # restored once the sweep has run


@pytest.mark.mlflow
def test_a_short_sweep_reports_its_evaluation_without_the_mlflow_stores_creation(plan_for,
                                                                               tmp_path):
    """A new SQLite store takes seconds to create its tables, longer than 8 points take: the
    evaluation time (and the points/s printed from it) is the batches' own time, and the wait
    for the store is reported apart (it was counted as evaluation: ~2 s for ~0.05 s of work)."""
    plan = plan_for("parallel.tp=1,2", "system.scaleup.bandwidth_GBps=150,300,600,900",
                    "sweep.in_process=true", "sweep.progress=false",
                    f"tracking.uri=sqlite:///{tmp_path / 'mlflow.db'}",
                    f"sweep.output_dir={tmp_path / 'out'}")
    outcome = run_sweep(plan, plan.base_cfg)
    assert outcome.computed == 8 and outcome.tracking_ok
    batches = pl.read_parquet(tmp_path / "out" / "results.parquet")
    own = batches.unique("batch_id")["eval_wall_s"].sum()
    assert outcome.eval_s <= own + 0.5, (outcome.eval_s, own, outcome.tracking_wait_s)
    assert outcome.tracking_wait_s >= 0.0
