"""Stage 2 of scripts/fit_calibration.py: end-to-end fit over all public validation cases at once.

Fits the one hardware-level parameter no microbenchmark in the references pins down,
``sustained_compute_fraction`` (GEMM / attention throughput sustained in a long training step
relative to the boost-clock microbenchmarks), by minimising the mean squared log error of
predicted vs measured iteration time over ALL cases together (one value per accelerator
generation; there is no per-case constant). Every case is evaluated at every grid point in one
vectorized ``simulate_batch`` call (the grid is the batch axis), then the grid is refined around
the best point.
"""

from __future__ import annotations

import csv
from dataclasses import replace
from pathlib import Path

import numpy as np

from search.commands.validate import build_case
from simcore.specs.system import CalibrationSpec

KEY = "sustained_compute_fraction"


def _loss(cases: list[tuple], calib: CalibrationSpec, grid: np.ndarray) -> np.ndarray:
    """Mean squared log error of every grid point (G,) over the cases."""
    from simcore.api import simulate_batch

    total = np.zeros(len(grid))
    for model, plan, system, measured in cases:
        systems = [replace(system, calibration=replace(calib, **{KEY: float(g)})) for g in grid]
        pred = simulate_batch(model, plan, systems).iteration_time_s
        total += np.log(pred / measured) ** 2
    return total / len(cases)


def fit_end_to_end(calibs: dict[str, CalibrationSpec], cases_csv: Path, measured_csv: Path
                   ) -> tuple[dict[str, CalibrationSpec], list[str]]:
    """Fit on the A100 cases; carry the values to the other generations (no data for them)."""
    with measured_csv.open(newline="") as fh:
        measured = {r["case_id"]: float(r["iter_time_s"]) for r in csv.DictReader(fh)}
    with cases_csv.open(newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r["case_id"] in measured]
    cases = []
    for row in rows:
        model, plan, system = build_case(row, "auto")
        cases.append((model, plan, system, measured[row["case_id"]]))
    base = calibs["a100"]
    lo, hi = 0.5, 1.0
    for _ in range(2):
        grid = np.linspace(lo, hi, 21)
        loss = _loss(cases, base, grid)
        best = float(grid[int(np.argmin(loss))])
        step = (hi - lo) / 20
        lo, hi = max(0.3, best - 2 * step), min(1.0, best + 2 * step)
    rmsle = float(np.sqrt(loss.min()))
    out = {name: replace(c, **{KEY: round(best, 4)}) for name, c in calibs.items()}
    log = [f"end to end over {len(cases)} public A100 cases (Megatron's unfused attention): "
           f"{KEY}={best:.4f}; rms log error {rmsle:.3f}; carried to H100/H800 (no data)"]
    return out, log
