"""``simsweep search`` killed with SIGKILL mid-batch resumes without losing or repeating trials.

The driver is a real subprocess (the CLI, in-process evaluation, MLflow SQLite store); it is
killed while a batch is RUNNING; the resumed search re-runs exactly those trials under their own
numbers, keeps every trial finished before the kill, and logs each trial to MLflow once.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import polars as pl
import pytest
from mlflow import MlflowClient
from optuna.trial import TrialState

from search.study.storage import make_storage

optuna.logging.set_verbosity(optuna.logging.WARNING)
ROOT = Path(__file__).resolve().parents[3]

def _cmd(out: Path, resume: bool) -> list[str]:
    return [sys.executable, "-m", "search.cli", "search", "workload=gpt_1b",
            "system.num_gpus=32", "parallel.global_batch=64", f"search.output_dir={out}",
            "search.study_name=k", "search.n_trials=16", "search.batch_size=4",
            "search.log_plots=false", "search.in_process=true",
            f"search.resume={str(resume).lower()}", f"tracking.uri=sqlite:///{out}/mlflow.db",
            "parallel.tp=choice(1,2,4,8)", "parallel.pp=choice(1,2,4,8)",
            "search.space.parallel.micro_batch=choice(1,2,4)"]


def _study(out: Path) -> optuna.Study:
    return optuna.load_study(study_name="k", storage=make_storage("journal", out / "k", "k"))


@pytest.mark.slow
def test_sigkilled_search_resumes_exactly(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(_cmd(tmp_path, False), env=env, cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    journal = tmp_path / "k" / "k.journal"
    deadline = time.monotonic() + 240
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
    assert running and len(before) < 16

    resume = subprocess.run(_cmd(tmp_path, True), env=env, cwd=tmp_path, capture_output=True,
                            timeout=300)
    assert resume.returncode == 0, resume.stderr.decode()[-2000:]
    trials = _study(tmp_path).trials
    assert [t.number for t in trials] == list(range(len(trials)))
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    assert len(complete) == 16  # the budget counts every trial once
    assert all(t.state == TrialState.COMPLETE for t in trials if t.number in running)
    for number, values in before.items():  # trials finished before the kill were not re-run
        assert trials[number].values == values
    table = pl.read_parquet(tmp_path / "k" / "results.parquet")
    assert sorted(table.filter(pl.col("state") == "COMPLETE")["trial_number"]) == sorted(
        t.number for t in complete)
    client = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    exp = client.get_experiment_by_name("search-k")
    assert exp is not None
    runs = client.search_runs([exp.experiment_id], max_results=1000,
                              filter_string="tags.`simsweep.kind` = 'trial'")
    hashes = [r.data.tags["simsweep.point_hash"] for r in runs]
    assert sorted(hashes) == sorted(f"trial-{t.number}" for t in complete)  # each once


@pytest.mark.slow
def test_two_drivers_share_one_study(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "search.cli", "search", "workload=gpt_tiny",
           "system.num_gpus=16", "parallel.global_batch=32", f"search.output_dir={tmp_path}",
           "search.study_name=shared", "search.storage=journal_shared", "search.n_trials=12",
           "search.batch_size=2", "search.in_process=true", "tracking.enabled=false",
           "search.log_plots=false", "parallel.tp=choice(1,2,4)", "parallel.pp=choice(1,2,4)",
           "system.scaleout.bandwidth_GBps=interval(10,100)"]
    procs = [subprocess.Popen(cmd, env=env, cwd=tmp_path, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE) for _ in range(2)]
    for proc in procs:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err.decode()[-2000:]
    storage = make_storage("journal_shared", tmp_path / "shared", "shared")
    trials = optuna.load_study(study_name="shared", storage=storage).trials
    assert [t.number for t in trials] == list(range(len(trials)))
    assert all(t.state == TrialState.COMPLETE for t in trials)
    assert 12 <= len(trials) <= 12 + 2  # overshoot at most (drivers - 1) x batch_size
