"""Leave-one-group-out refits and conformal coverage (search/run/cross_validation.py).

Synthetic curves stand in for simulations (the simulator is not under test here): a case whose
time is ``c / f`` at effective compute fraction ``f`` and whose measured time is ``c / f_true``
(times a known per-case noise) must be fitted back to ``f_true``; a stack's efficiency must be
fitted on its own runs only, and a held-out group must be predicted with the values fitted
without it.
"""

from __future__ import annotations

import numpy as np
import pytest

from search.run.cross_validation import GRID, cross_validate, fit, group_of, regimes_of


def _row(cid: str, stack: str = "megatron_lm", **kw: str) -> dict[str, str]:
    row = {"case_id": cid, "stack": stack, "hidden_size": "12288", "num_layers": "96",
           "zero_stage": "1", "precision": "bf16"}
    row.update(kw)
    return row


def test_fit_recovers_the_fraction_and_the_stack_efficiency() -> None:
    rows = [_row(f"a_{i}") for i in range(4)] + [_row(f"d_{i}", "deepspeed") for i in range(3)]
    cur = {r["case_id"]: 10.0 / GRID for r in rows}
    measured = {r["case_id"]: 10.0 / 0.8 for r in rows if r["stack"] == "megatron_lm"}
    measured.update({r["case_id"]: 10.0 / (0.8 * 0.75) for r in rows if r["stack"] == "deepspeed"})
    params = fit(rows, cur, measured, {"sustained_compute_fraction": 0.5})
    assert params["sustained_compute_fraction"] == pytest.approx(0.8, rel=0.005)
    assert params["stack:deepspeed"] == pytest.approx(0.75, rel=0.005)


def test_logo_refits_without_the_group_and_reports_coverage() -> None:
    rng = np.random.default_rng(3)
    rows, measured, cur = [], {}, {}
    for g in range(6):
        for i in range(4):
            row = _row(f"g{g}_{i}")
            rows.append(row)
            cur[row["case_id"]] = 5.0 / GRID
            measured[row["case_id"]] = 5.0 / 0.8 * float(np.exp(rng.normal(0.0, 0.05)))
    cv = cross_validate(rows, cur, measured, {"sustained_compute_fraction": 0.5})
    assert set(cv.params_by_group) == {f"g{g}" for g in range(6)}
    for g, params in cv.params_by_group.items():  # each fold saw only the other groups
        others = [r for r in rows if group_of(r) != g]
        assert params == fit(others, cur, measured, {"sustained_compute_fraction": 0.5})
    s = cv.summary()
    assert s["mape_logo"] >= s["mape_in_sample"] - 1e-9
    assert 0.5 <= cv.coverage[0.8] <= 1.0 and cv.coverage[0.95] >= cv.coverage[0.8]
    assert cv.halfwidths[0.95] >= cv.halfwidths[0.8] > 0


def test_regime_tags() -> None:
    assert regimes_of(_row("x")) == ["megatron_3d"]
    tags = regimes_of(_row("y", "deepspeed", zero_stage="3", precision="fp8", hidden_size="2048",
                           num_layers="24"))
    assert tags == ["zero3", "fp8/fp4", "small<16B", "stack:deepspeed"]
