"""A derived expression with no value at some samples fails those trials; the study goes on.

The expression has a value at the first or last tp the check before the study evaluates, so the
study starts; at one tp it has none (past the expression limits, a division by zero, a complex
result): that trial's config cannot be built, so it is told FAIL (not counted toward
``n_trials``) with its reason, and a one-line warning names the key, the value and the sampled
value; the other trials complete. Before, a result past the limits stopped the whole study, and
a division by zero or a complex result were told COMPLETE as infeasible (the complex one with a
multi-line OmegaConf error as its reason). Real Optuna journal, the real simulator (gpt_tiny).
"""

from __future__ import annotations

import logging
from pathlib import Path

import optuna
import polars as pl
import pytest
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig
from optuna.trial import TrialState

from search.study.driver import prepare_search, run_search

optuna.logging.set_verbosity(optuna.logging.WARNING)
CONF = Path(__file__).resolve().parents[3] / "conf"


def _cfg(tmp_path: Path) -> DictConfig:
    overrides = ["workload=gpt_tiny", "system.num_gpus=8", "parallel.global_batch=16",
                 f"search.output_dir={tmp_path}", "search.study_name=d", "search.n_trials=12",
                 "search.batch_size=4", "search.sampler=random", "search.log_plots=false"]
    with initialize_config_dir(config_dir=str(CONF), version_base=None):
        return compose("config", overrides=overrides)


@pytest.mark.parametrize(("expression", "failing_tp", "says"), [
    ("system.num_gpus / parallel.tp * 10 ** (400 * (parallel.tp // 8))", 8,
     "='10 ** 400': result beyond 1e+300 (limit expr_magnitude) at parallel.tp=8"),
    ("system.num_gpus / parallel.tp + 0 / (parallel.tp - 2)", 2,
     "='0 / 0': division by zero at parallel.tp=2"),
    ("system.num_gpus / parallel.tp + 0 * (parallel.tp - 2) ** 0.5", 1,
     "='6.12e-17+1j': not a real number at parallel.tp=1"),
])
def test_trials_whose_derived_value_has_no_value_fail_and_the_study_goes_on(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, expression: str, failing_tp: int,
        says: str) -> None:
    setup = prepare_search(_cfg(tmp_path), extra_space={"parallel.tp": "choice(1,2,4,8)"},
                           extra_derived={"parallel.dp": expression})
    with caplog.at_level(logging.WARNING, logger="search.study.ask_tell"):
        outcome = run_search(setup)
    trials = setup.study.trials
    failed = [t for t in trials if t.state == TrialState.FAIL]
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    assert len(complete) == 12 and len(trials) == 12 + len(failed)
    assert failed and outcome.stats.n_failed == len(failed)
    assert {t.params["parallel.tp"] for t in failed} == {failing_tp}
    assert failing_tp not in {t.params["parallel.tp"] for t in complete}
    assert any(t.user_attrs["feasible"] for t in complete)  # the other trials were simulated
    for t in failed:
        assert t.user_attrs["reason"] == f"search.derived.parallel.dp{says}"
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == len(failed)
    for trial, line in zip(failed, warned, strict=True):
        assert line == (f"trial #{trial.number} failed (its config cannot be built; the study "
                        f"goes on): search.derived.parallel.dp{says}")
    table = pl.read_parquet(outcome.table_path)  # the table keeps the failed trials' reasons
    assert table.filter(pl.col("state") == "FAIL")["reason"].to_list() == \
        [t.user_attrs["reason"] for t in failed]
