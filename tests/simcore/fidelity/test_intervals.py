"""Split-conformal prediction intervals (simcore/fidelity/intervals.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from simcore.fidelity.intervals import conformal_halfwidth, interval_columns, prediction_interval


def test_halfwidth_is_the_conformal_order_statistic() -> None:
    scores = [0.01 * i for i in range(1, 20)]  # n = 19
    # ceil((19 + 1) * 0.8) = 16th smallest; ceil(20 * 0.95) = 19th
    assert conformal_halfwidth(scores, 0.8) == pytest.approx(0.16)
    assert conformal_halfwidth(scores, 0.95) == pytest.approx(0.19)
    assert math.isinf(conformal_halfwidth(scores[:5], 0.95))  # too few scores: no finite bound


def test_coverage_holds_on_exchangeable_data() -> None:
    rng = np.random.default_rng(7)
    hits = {0.8: 0, 0.95: 0}
    trials = 400
    for _ in range(trials):
        calib = np.abs(rng.normal(0.0, 0.05, 30))
        new = abs(rng.normal(0.0, 0.05))
        for level in hits:
            hits[level] += new <= conformal_halfwidth(calib.tolist(), level)
    assert hits[0.8] / trials == pytest.approx(0.8 + 0.2 / 31, abs=0.05)
    assert hits[0.95] / trials >= 0.93


def test_interval_columns() -> None:
    lo, hi = prediction_interval(10.0, math.log(1.1))
    assert (lo, hi) == pytest.approx((10.0 / 1.1, 11.0))
    assert all(math.isnan(x) for x in prediction_interval(10.0, 0.0))  # not calibrated
    cols = interval_columns(2.0, {0.8: 0.1, 0.95: 0.2})
    assert set(cols) == {"iter_time_lo80_s", "iter_time_hi80_s", "iter_time_lo95_s",
                         "iter_time_hi95_s"}
    assert cols["iter_time_lo95_s"] < cols["iter_time_lo80_s"] < 2.0 < cols["iter_time_hi80_s"]
