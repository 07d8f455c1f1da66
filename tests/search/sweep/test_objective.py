"""``sweep.objective`` may be any metric column of the results, throughput included, ranked in
its own direction unless ``sweep.direction`` says otherwise."""

from __future__ import annotations

import json

import polars as pl
import pytest

from search.sweep.driver import run_sweep
from simcore.errors import InputError

AXES = ("workload=gpt_1b", "system.num_gpus=8", "parallel.global_batch=512",
        "parallel.tp=1,2,4", "system.scaleup.bandwidth_GBps=75,600")


@pytest.mark.parametrize(("objective", "direction", "expected"), [
    ("tokens_per_s", None, "maximize"),
    ("samples_per_s", None, "maximize"),
    ("mfu", None, "maximize"),
    ("iteration_time_s", None, "minimize"),
    ("tokens_per_s", "minimize", "minimize"),
])
def test_throughput_objectives_rank_in_their_direction(plan_for, tmp_path, objective, direction,
                                                       expected):
    extra = () if direction is None else (f"sweep.direction={direction}",)
    plan = plan_for(*AXES, f"sweep.objective={objective}", *extra, "sweep.in_process=true",
                    "tracking.enabled=false", "sweep.top_k=6",
                    f"sweep.output_dir={tmp_path / 'sw'}")
    outcome = run_sweep(plan, plan.base_cfg)
    manifest = json.loads((tmp_path / "sw" / "sweep.json").read_text())
    assert manifest["objective"] == objective and manifest["direction"] == expected
    table = pl.read_parquet(tmp_path / "sw" / "results.parquet").filter(pl.col("feasible"))
    values = table[objective]
    best = values.max() if expected == "maximize" else values.min()
    assert values.n_unique() > 1  # the direction decides which point is best
    assert f"best 6 by {objective} ({expected})" in outcome.summary_text
    assert f"{objective} = {best:.4g}" in outcome.summary_text  # the finding's best plan


def test_an_unknown_objective_is_refused_naming_the_columns(plan_for):
    with pytest.raises(InputError) as err:
        plan_for("sweep.objective=tokens", "sweep.in_process=true")
    assert err.value.key == "sweep.objective" and err.value.value == "tokens"
    assert "tokens_per_s" in err.value.rule and "samples_per_s" in err.value.rule
