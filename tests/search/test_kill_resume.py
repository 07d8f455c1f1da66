"""A search driver killed with SIGKILL mid-batch resumes without losing or repeating trials."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import optuna
import polars as pl
import pytest
from optuna.trial import TrialState

from search.study import make_storage

optuna.logging.set_verbosity(optuna.logging.WARNING)
ROOT = Path(__file__).resolve().parents[2]

DRIVER = textwrap.dedent("""
    import sys
    from hydra import compose, initialize_config_dir
    from search.study_driver import prepare_search, run_search
    with initialize_config_dir(config_dir=sys.argv[1], version_base=None):
        cfg = compose("config", overrides=sys.argv[2:])
    run_search(prepare_search(cfg))
""")


def _overrides(out: Path, resume: bool) -> list[str]:
    return ["workload=gpt_1b", "system.num_gpus=64", "parallel.global_batch=128",
            f"search.output_dir={out}", "search.study_name=k", "search.n_trials=24",
            "search.batch_size=4", "search.log_plots=false", f"search.resume={str(resume).lower()}",
            "+search.space.parallel.tp='choice(1,2,4,8)'",
            "+search.space.parallel.pp='choice(1,2,4,8)'",
            "+search.space.parallel.micro_batch='choice(1,2,4)'"]


def _study(out: Path) -> optuna.Study:
    return optuna.load_study(study_name="k", storage=make_storage("journal", out / "k", "k"))


@pytest.mark.slow
def test_sigkilled_search_resumes_exactly(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-c", DRIVER, str(ROOT / "conf"), *_overrides(tmp_path, False)]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    journal = tmp_path / "k" / "k.journal"
    deadline = time.monotonic() + 120
    running: list[int] = []
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
            if not journal.exists() or journal.stat().st_size == 0:
                continue
            trials = _study(tmp_path).trials
            done = [t for t in trials if t.state == TrialState.COMPLETE]
            running = [t.number for t in trials if t.state == TrialState.RUNNING]
            if len(done) >= 4 and running:
                proc.send_signal(signal.SIGKILL)
                break
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read().decode() if proc.stderr else ""
    before = {t.number: t.values for t in _study(tmp_path).trials if t.state == TrialState.COMPLETE}
    assert running and len(before) < 24

    resume = subprocess.run([sys.executable, "-c", DRIVER, str(ROOT / "conf"),
                             *_overrides(tmp_path, True)], env=env, capture_output=True,
                            timeout=300)
    assert resume.returncode == 0, resume.stderr.decode()[-2000:]
    trials = _study(tmp_path).trials
    assert [t.number for t in trials] == list(range(len(trials)))
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    assert len(complete) == 24  # the budget counts every trial once
    assert all(t.state == TrialState.COMPLETE for t in trials if t.number in running)
    for number, values in before.items():  # trials finished before the kill were not re-run
        assert trials[number].values == values
    table = pl.read_parquet(tmp_path / "k" / "results.parquet")
    assert sorted(table.filter(pl.col("state") == "COMPLETE")["trial_number"]) == sorted(
        t.number for t in complete)
