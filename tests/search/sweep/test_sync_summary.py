"""``simsweep sync`` rewrites ``summary.txt`` with the same best-points table the sweep printed:
the axes, the objective and the summary metrics (it used to keep the axis columns only)."""

from __future__ import annotations

import pytest

from search.cli import main as simsweep
from search.sweep.driver import run_sweep

pytestmark = [pytest.mark.slow, pytest.mark.ray, pytest.mark.mlflow]


def test_sync_keeps_objective_and_metrics_in_summary(ray_local, plan_for, tmp_path):
    out = tmp_path / "sw"
    db = f"sqlite:///{tmp_path / 'mlflow.db'}"
    plan = plan_for("parallel.tp=1,2", "system.scaleout.bandwidth_GBps=50,400", "sweep.name=sync",
                    f"sweep.output_dir={out}", f"tracking.uri={db}", "tracking.plots=false")
    outcome = run_sweep(plan, plan.base_cfg)
    assert outcome.tracking_ok, outcome.tracking_error
    printed = (out / "summary.txt").read_text()
    table = printed.split("best 4 by iteration_time_s (minimize):", 1)[1]
    for column in ("parallel.tp", "iteration_time_s", "mfu", "cost_usd_per_iter"):
        assert column in table
    (out / "summary.txt").write_text("stale\n")
    assert simsweep(["sync", str(out), "--uri", db]) == 0
    assert (out / "summary.txt").read_text() == printed
