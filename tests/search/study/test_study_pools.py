"""A study that buys devices and splits work: Optuna searches the device pool sizes
(``system.pools.<i>.count``, ``num_gpus`` following) and the work split between pools
(``parallel.work_split``, ``parallel.work_shares.<i>``) on HAP's V100 + P100 cluster."""

from __future__ import annotations

from pathlib import Path

import optuna
import polars as pl
import pytest
from hydra import compose, initialize_config_dir

from search.config.build import build_specs
from search.study.driver import prepare_search, run_search
from simcore.api import simulate_batch

optuna.logging.set_verbosity(optuna.logging.WARNING)
CONF = Path(__file__).resolve().parents[3] / "conf"
BASE = ["system=mixed_v100_p100", "workload=gpt_tiny", "parallel.precision=fp16",
        "parallel.global_batch=192", "parallel.micro_batch=1"]
SPACE = {"system.pools.0.count": "range(16,33,16)", "system.pools.1.count": "range(16,33,16)",
         "parallel.work_split": "choice(even,balanced,explicit)",
         "parallel.work_shares.0": "choice(1.0)",
         "parallel.work_shares.1": "choice(0.25,0.5)"}


def _compose(*overrides: str):  # noqa: ANN202 - a DictConfig
    with initialize_config_dir(config_dir=str(CONF), version_base=None):
        return compose("config", overrides=[*BASE, *overrides])


def _direct(row: dict) -> float:
    """The iteration time of a trial's point composed from scratch and simulated alone."""
    over = [f"system.pools.0.count={row['system.pools.0.count']}",
            f"system.pools.1.count={row['system.pools.1.count']}",
            f"++parallel.work_split={row['parallel.work_split']}"]
    if row["parallel.work_split"] == "explicit":
        over.append(f"++parallel.work_shares=[1.0,{row['parallel.work_shares.1']}]")
    model, parallel, system = build_specs(_compose(*over))
    assert system.num_gpus == row["system.pools.0.count"] + row["system.pools.1.count"]
    return float(simulate_batch(model, parallel.resolve(system.num_gpus), [system]).iteration_time_s[0])


def test_study_searches_pool_sizes_and_work_shares(tmp_path: Path) -> None:
    cfg = _compose(f"search.output_dir={tmp_path}", "search.n_trials=24", "search.batch_size=8",
                   "search.sampler=grid", "search.in_process=true", "search.log_plots=false",
                   "search.objectives=[iteration_time_s,capex_usd]")
    setup = prepare_search(cfg, extra_space=SPACE)
    assert set(SPACE) <= set(setup.space.distributions)
    out = run_search(setup)
    table = pl.read_parquet(out.table_path)
    assert table.height == 24
    assert table["feasible"].all(), table["reason"].to_list()
    assert set(zip(table["system.pools.0.count"], table["system.pools.1.count"], strict=True)) \
        == {(16, 16), (16, 32), (32, 16), (32, 32)}
    rows = list(table.iter_rows(named=True))
    for row in rows:
        assert row["iteration_time_s"] == pytest.approx(_direct(row), rel=1e-12)
    # capex summed over pools: 16 more V100 cost 16 x (8,000 - 5,000) USD more than 16 more P100
    capex = {(r["system.pools.0.count"], r["system.pools.1.count"]): r["capex_usd"] for r in rows}
    assert capex[32, 16] - capex[16, 32] == pytest.approx(16 * 3000.0)
    # the shares reach the engine: on the same cluster, explicit 1 : 0.25 and 1 : 0.5 differ
    at = {(r["parallel.work_split"], r["parallel.work_shares.1"]): r["iteration_time_s"]
          for r in rows if (r["system.pools.0.count"], r["system.pools.1.count"]) == (16, 32)}
    assert at["explicit", 0.25] != at["explicit", 0.5]
    assert at["even", 0.25] == at["even", 0.5]  # shares ignored outside explicit
    assert at["balanced", 0.25] < at["even", 0.25]  # HAP: balanced beats the even split (DP-EV)
