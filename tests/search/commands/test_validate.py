"""``simsweep validate`` on the public cases: MAPE, pair directions, bad rows never fatal.

Measured iteration times are the published numbers in shared/validation/public_measured.csv
(golden data from the papers, not our output).
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from search.commands import validate
from tests.shared_paths import VALIDATION, needs_shared

CASES = VALIDATION / "public_cases.csv"
MEASURED = VALIDATION / "public_measured.csv"
pytestmark = needs_shared


def _read(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


# the public run builds ~20 pipeline graphs up to 64 stages x 512 micro-batches (about a minute
# of CPU), hence slow


@pytest.fixture(scope="module")
def predictions(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, str]]:
    out = tmp_path_factory.mktemp("validate") / "pred.csv"
    assert validate.main(["--cases", str(CASES), "--out", str(out)]) == 0
    return {r["case_id"]: r for r in _read(out)}


@pytest.mark.slow
def test_every_case_predicted_and_mape_within_10pct(predictions: dict[str, dict[str, str]]) -> None:
    measured = {r["case_id"]: float(r["iter_time_s"]) for r in _read(MEASURED)}
    assert set(predictions) == set(measured)
    errors = []
    for cid, meas in measured.items():
        row = predictions[cid]
        assert row["status"] == "ok", row
        assert list(row) == list(validate.OUT_COLUMNS)
        errors.append(abs(float(row["iter_time_s"]) - meas) / meas)
    assert sum(errors) / len(errors) <= 0.10
    assert max(errors) <= 0.20


@pytest.mark.slow
def test_full_recompute_vs_sp_selective_pairs(predictions: dict[str, dict[str, str]]) -> None:
    measured = {r["case_id"]: float(r["iter_time_s"]) for r in _read(MEASURED)}
    for size in ("22b", "175b", "530b", "1t"):
        full, sel = f"korthikanti22_{size}_full", f"korthikanti22_{size}_sp_selective"
        want = measured[full] / measured[sel]
        got = float(predictions[full]["iter_time_s"]) / float(predictions[sel]["iter_time_s"])
        assert got > 1.0
        assert got == pytest.approx(want, rel=0.08)


def test_bad_rows_are_reported_not_fatal(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = _read(CASES)[:1]
    good = dict(rows[0])
    bad_gpu = {**good, "case_id": "bad_gpu", "gpu": "tpu_v9"}
    bad_tp = {**good, "case_id": "bad_tp", "tp": "three"}
    bad_split = {**good, "case_id": "bad_split", "num_gpus": "48"}
    cases = tmp_path / "my_cases.csv"
    with cases.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(good))
        writer.writeheader()
        writer.writerows([bad_gpu, good, bad_tp, bad_split])
    out = tmp_path / "pred.csv"
    assert validate.main(["--cases", str(cases), "--out", str(out)]) == 0
    pred = {r["case_id"]: r for r in _read(out)}
    assert pred[good["case_id"]]["status"] == "ok"
    assert pred["bad_gpu"]["status"] == "error" and "gpu='tpu_v9'" in pred["bad_gpu"]["error"]
    assert pred["bad_tp"]["status"] == "error" and "tp='three'" in pred["bad_tp"]["error"]
    assert pred["bad_split"]["status"] == "error" and pred["bad_split"]["fits_memory"] == ""
    assert "num_gpus" in pred["bad_split"]["error"]


def test_spearman_ranks() -> None:
    assert validate.spearman([1.0, 2.0, 3.0], [10.0, 20.0, 30.0]) == pytest.approx(1.0)
    assert validate.spearman([1.0, 2.0, 3.0], [3.0, 2.0, 1.0]) == pytest.approx(-1.0)


def test_attention_auto_follows_the_software_era() -> None:
    row = _read(CASES)[0]  # A100, MHA, fp16 (Megatron-LM 2021)
    assert validate.attention_impl(row, "auto") == "unfused"
    assert validate.attention_impl({**row, "gpu": "h100_80g"}, "auto") == "flash"
    assert validate.attention_impl({**row, "num_kv_heads": "8"}, "auto") == "flash"
    # a gated MLP (LLaMA era, 2023+), said or read from a width other than 4h; 4h stays
    assert validate.attention_impl({**row, "mlp": "swiglu"}, "auto") == "flash"
    wide = str(int(row["hidden_size"]) * 8 // 3)
    assert validate.attention_impl({**row, "ffn_hidden_size": wide}, "auto") == "flash"
    assert validate.attention_impl({**row, "ffn_hidden_size": wide, "mlp": "gelu"},
                                   "auto") == "unfused"
    assert validate.attention_impl({**row, "attention": "unfused", "gpu": "h100_80g"},
                                   "auto") == "unfused"
    assert validate.attention_impl(row, "flash") == "flash"


def test_breakdown_columns_add_up_and_follow_the_plan(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """``--breakdown``: compute + exposed communication + bubble is the iteration time and the
    kinds sum to the exposed total; a run without pipeline stages has no bubble and one without
    tensor parallelism no exposed TP, where a tp 8 pp 8 run has both; a failing row stays blank.
    The error table shows the same parts."""
    rows = {r["case_id"]: r for r in _read(CASES)}
    flat = rows["narayanan21_t1_1.7b"]  # tp 1, pp 1
    deep = rows["korthikanti22_175b_sp_selective"]  # tp 8, pp 8
    assert (flat["tp"], flat["pp"], deep["tp"], deep["pp"]) == ("1", "1", "8", "8")
    bad = {**flat, "case_id": "bad_gpu", "gpu": "tpu_v9"}
    cases = tmp_path / "cases.csv"
    with cases.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(flat))
        writer.writeheader()
        writer.writerows([flat, deep, bad])
    out = tmp_path / "pred.csv"
    assert validate.main(["--cases", str(cases), "--measured", str(MEASURED), "--out", str(out),
                          "--breakdown"]) == 0
    pred = {r["case_id"]: r for r in _read(out)}
    assert list(pred["bad_gpu"]) == list(validate.OUT_COLUMNS + validate.BREAKDOWN_COLUMNS)
    assert all(pred["bad_gpu"][c] == "" for c in validate.BREAKDOWN_COLUMNS)
    for cid in (flat["case_id"], deep["case_id"]):
        p = {k: float(v) for k, v in pred[cid].items() if k in validate.BREAKDOWN_COLUMNS
             or k == "iter_time_s"}
        assert p["compute_s"] + p["exposed_comm_s"] + p["bubble_s"] == pytest.approx(
            p["iter_time_s"], rel=1e-5)
        kinds = sum(p[f"exposed_comm_{k}_s"] for k in ("tp", "dp", "pp", "cp", "ep"))
        assert kinds == pytest.approx(p["exposed_comm_s"], rel=1e-5, abs=1e-9)
    f, d = pred[flat["case_id"]], pred[deep["case_id"]]
    assert float(f["bubble_s"]) == 0.0 and float(f["exposed_comm_tp_s"]) == 0.0  # no residue
    assert float(d["bubble_s"]) > 0.0 and float(d["exposed_comm_tp_s"]) > 0.0
    table = capsys.readouterr().out
    assert "compute_s" in table and "bubble_s" in table
    line = next(ln for ln in table.splitlines() if ln.startswith(deep["case_id"]))
    assert f"{float(d['compute_s']):.3f}" in line
