"""``simsweep search`` on the non-transformer families (ResNet-50, GNMT, DLRM), end to end.

The real command with a SQLite MLflow store in tmp_path, evaluated in process. Throughput is the
family's (samples per iteration = the global batch; GNMT's tokens = samples x 50 target tokens,
conf/workload/gnmt.yaml), the default space is the family's (batch per device, DDP bucket, DLRM
table placement), and the best trial's iteration time equals ``simsweep simulate`` of the same
point (another code path: one composed config, one simulation).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import optuna
import polars as pl
import pytest
from mlflow import MlflowClient

from search.cli import main

optuna.logging.set_verbosity(optuna.logging.WARNING)

_GLOBAL_BATCH = 256
_GNMT_TGT_LEN = 50  # conf/workload/gnmt.yaml: sequences padded to 50 tokens


def _search(tmp_path: Path, workload: str, *extra: str, num_gpus: int = 8,
            global_batch: int = _GLOBAL_BATCH) -> pl.DataFrame:
    out = tmp_path / "out"
    code = main(["search", f"workload={workload}", f"system.num_gpus={num_gpus}",
                 f"parallel.global_batch={global_batch}", f"search.output_dir={out}",
                 f"search.study_name={workload}", "search.n_trials=6", "search.batch_size=3",
                 "search.n_startup_trials=3", "search.in_process=true", "search.log_plots=false",
                 f"tracking.uri=sqlite:///{tmp_path / 'mlflow.db'}", *extra])
    assert code == 0
    return pl.read_parquet(out / workload / "results.parquet")


def _simulate(capsys: pytest.CaptureFixture[str], workload: str, params: dict[str, object]) -> float:
    capsys.readouterr()
    args = [f"{k}={v}" for k, v in params.items()]
    assert main(["simulate", f"workload={workload}", "system.num_gpus=8",
                 f"parallel.global_batch={_GLOBAL_BATCH}", *args, "--json"]) == 0
    return float(json.loads(capsys.readouterr().out.strip().splitlines()[-1])["iteration_time_s"])


def _child_metrics(tmp_path: Path, study: str) -> list[dict[str, float]]:
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    exp = client.get_experiment_by_name(f"search-{study}")
    assert exp is not None
    runs = client.search_runs([exp.experiment_id], max_results=100)
    return [r.data.metrics for r in runs if "mlflow.parentRunId" in r.data.tags]


@pytest.mark.mlflow
@pytest.mark.parametrize(("workload", "space"), [
    ("resnet50", {"parallel.micro_batch", "workload.bucket_mb"}),
    ("gnmt", {"parallel.micro_batch", "workload.bucket_mb"}),
    ("dlrm", {"parallel.micro_batch", "workload.bucket_mb", "parallel.ep"}),
])
def test_family_search_default_space(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                     workload: str, space: set[str]) -> None:
    frame = _search(tmp_path, workload)
    assert frame.height == 6
    assert space <= set(frame.columns)
    assert not {"parallel.tp", "parallel.pp"} & set(frame.columns)
    ok = frame.filter(pl.col("feasible"))
    assert ok.height >= 1
    for row in ok.iter_rows(named=True):
        assert row["samples_per_s"] * row["iteration_time_s"] == pytest.approx(_GLOBAL_BATCH)
        per_sample = _GNMT_TGT_LEN if workload == "gnmt" else 1
        assert row["tokens_per_s"] == pytest.approx(per_sample * row["samples_per_s"])
        assert row["parallel.micro_batch"] in (1, 2, 4, 8, 16, 32)  # divides 256 / 8 GPUs
    if workload == "dlrm":  # table placement: groups of ep ranks dividing dp=8, ep <= 26 tables
        assert set(ok["parallel.ep"].to_list()) <= {1, 2, 4, 8}
    best = ok.sort("iteration_time_s").row(0, named=True)
    point = {k: best[k] for k in space}
    assert _simulate(capsys, workload, point) == pytest.approx(best["iteration_time_s"], rel=1e-9)
    children = _child_metrics(tmp_path, workload)
    assert len(children) == 6
    logged = [m for m in children if m.get("feasible") == 1.0]
    assert logged and all(m["samples_per_s"] > 0 and math.isfinite(m["tokens_per_s"])
                          for m in logged)


@pytest.mark.mlflow
def test_batch_per_device_with_global_batch_following(tmp_path: Path) -> None:
    """ResNet-50: the batch per device searched, the global batch derived (8 GPUs x micro)."""
    frame = _search(tmp_path, "resnet50", "parallel.micro_batch=choice(32,64,128,256)",
                    "search.derived.parallel.global_batch=system.num_gpus * parallel.micro_batch",
                    "search.objectives=[samples_per_s]", "search.sampler=grid",
                    "search.train_samples=1.15e8")
    ok = frame.filter(pl.col("feasible"))
    assert sorted(ok["parallel.micro_batch"].to_list()) == [32, 64, 128, 256]
    for row in ok.iter_rows(named=True):
        assert row["samples_per_s"] * row["iteration_time_s"] == pytest.approx(
            8 * row["parallel.micro_batch"])
        assert row["time_to_train_days"] == pytest.approx(1.15e8 / row["samples_per_s"] / 86400)
    # larger per-device batches amortize the gradient all-reduce: throughput does not fall
    rates = ok.sort("parallel.micro_batch")["samples_per_s"].to_list()
    assert rates[-1] > rates[0]


@pytest.mark.mlflow
def test_bad_table_placement_is_an_infeasible_trial(tmp_path: Path) -> None:
    """DLRM: an ep that does not divide dp is infeasible with the rule; 32 > 26 tables too."""
    frame = _search(tmp_path, "dlrm", "parallel.ep=choice(3,8,32)", "parallel.micro_batch=32",
                    "search.sampler=grid", num_gpus=32, global_batch=1024)
    by_ep = {row["parallel.ep"]: row for row in frame.iter_rows(named=True)}
    assert set(by_ep) == {3, 8, 32}
    assert by_ep[8]["feasible"]
    assert not by_ep[3]["feasible"] and "parallel.ep" in by_ep[3]["reason"] \
        and "must divide dp=32" in by_ep[3]["reason"]
    assert not by_ep[32]["feasible"] and "workload.num_tables" in by_ep[32]["reason"]
