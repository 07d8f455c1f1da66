"""Prediction intervals of iteration time: split-conformal on out-of-sample log residuals.

Model (Vovk et al.'s split conformal prediction, applied to the log ratio of predicted to
measured time): the scores are ``|log(predicted / measured)|`` of published runs, each
predicted **out of sample** (leave-one-group-out: every end-to-end parameter refitted without
the run's group; ``search/run/cross_validation.py``). For a level ``L`` the half-width is the
``ceil((n + 1) L)``-th smallest of the ``n`` scores (infinite when that exceeds ``n``), and the
interval of a new prediction ``t`` is ``[t e^-q, t e^q]``: if new runs err like the published ones
(exchangeability), it covers the measured time with probability at least ``L``.

The half-widths are hardware-generation calibration values (``CalibrationSpec.
interval80_log_halfwidth`` / ``interval95_log_halfwidth``, written by
``scripts/fit_end_to_end.py``); 0 means no interval is known (NaN bounds).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["LEVELS", "conformal_halfwidth", "interval_columns", "prediction_interval"]

#: nominal coverage levels carried by every prediction
LEVELS = (0.8, 0.95)


def conformal_halfwidth(abs_log_residuals: Sequence[float], level: float) -> float:
    """Split-conformal half-width (natural log units) at ``level`` from out-of-sample scores."""
    scores = sorted(float(r) for r in abs_log_residuals if math.isfinite(r))
    n = len(scores)
    k = math.ceil((n + 1) * level)
    return scores[k - 1] if 0 < k <= n else math.inf


def prediction_interval(time_s: float, halfwidth: float) -> tuple[float, float]:
    """(low, high) seconds around ``time_s``; NaN when no half-width is calibrated (0)."""
    if not halfwidth > 0 or not math.isfinite(time_s):
        return math.nan, math.nan
    return time_s * math.exp(-halfwidth), time_s * math.exp(halfwidth)


def interval_columns(time_s: float, halfwidths: dict[float, float]) -> dict[str, float]:
    """``iter_time_lo80_s``, ``iter_time_hi80_s``, ... for every level in ``halfwidths``."""
    out: dict[str, float] = {}
    for level, q in halfwidths.items():
        lo, hi = prediction_interval(time_s, q)
        tag = f"{round(100 * level)}"
        out[f"iter_time_lo{tag}_s"], out[f"iter_time_hi{tag}_s"] = lo, hi
    return out
