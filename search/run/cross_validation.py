"""Out-of-sample validation: leave-one-group-out refits, per-regime errors, conformal intervals.

The calibration has two kinds of parameters. Kernel- and collective-level ones are fitted on
microbenchmarks (``scripts/fit_calibration.py``: LLMCompass GEMMs, Echo's and vTrain's
nccl-tests), never on training runs, so holding a run out cannot change them. The end-to-end
ones are fitted on published training runs: the hardware's ``sustained_compute_fraction`` (on
the reference stack's runs) and each fitted stack's ``kernel_efficiency``
(``simcore/specs/stack.py``). Here they are refitted without each group of runs (a group: one
publication, the case-id prefix, or the optional ``group`` column), and the held-out group is
predicted with the refitted values: leave-one-group-out (LOGO).

Every case is simulated once, over a grid of effective compute fractions (one vectorized
``simulate_batch``: the grid is the batch axis); a fit is then an argmin of the mean squared log
error over log-log interpolated curves, so every fold refits exactly what the full fit fits.

Reported: MAPE and signed bias (mean of signed % errors) in sample and out of sample, overall and
per regime (ZeRO-3, fp8/fp4, small models < 16 B parameters, each non-reference stack, plain
Megatron 3D); split-conformal 80% / 95% half-widths from the LOGO log residuals
(``simcore/fidelity/intervals.py``) and their coverage, each case judged by the half-width of the
OTHER groups' residuals.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from simcore.fidelity.intervals import LEVELS, conformal_halfwidth

__all__ = ["FITTED_STACKS", "CrossValidation", "cross_validate", "curves", "fit", "group_of",
           "regimes_of"]

#: stacks whose kernel_efficiency is fitted on their own published runs; others are the reference
FITTED_STACKS = ("deepspeed",)
GRID = np.geomspace(0.3, 1.0, 15)
_FINE = np.geomspace(0.3, 1.0, 600)
_EFF = np.linspace(0.5, 1.3, 321)


def group_of(row: dict[str, str]) -> str:
    """The LOGO group of a case: its ``group`` column, else the case-id prefix (publication)."""
    return (row.get("group") or "").strip() or row["case_id"].split("_")[0]


def stack_of(row: dict[str, str]) -> str:
    return (row.get("stack") or "").strip() or "megatron_lm"


def regimes_of(row: dict[str, str]) -> list[str]:
    """Regime tags of a case (a case may have several)."""
    tags = []
    if (row.get("zero_stage") or "0").strip() == "3":
        tags.append("zero3")
    if (row.get("precision") or "").strip() in ("fp8", "fp4"):
        tags.append("fp8/fp4")
    h, layers = int(row["hidden_size"]), int(row["num_layers"])
    if 12 * layers * h * h < 16e9:
        tags.append("small<16B")
    if stack_of(row) != "megatron_lm":
        tags.append(f"stack:{stack_of(row)}")
    if not tags:
        tags.append("megatron_3d")
    return tags


def curves(rows: list[dict[str, str]], attention: str) -> dict[str, np.ndarray]:
    """case_id -> predicted seconds at every GRID effective compute fraction (NaN: no result)."""
    from search.config.cases import build_case
    from simcore.api import simulate_batch

    out: dict[str, np.ndarray] = {}
    for row in rows:
        try:
            model, plan, system = build_case(row, attention)
            systems = [replace(system, calibration=replace(
                system.calibration, sustained_compute_fraction=float(g))) for g in GRID]
            res = simulate_batch(model, plan, systems)
            out[row["case_id"]] = np.asarray(res.iteration_time_s, dtype=float)
        except (ValueError, TypeError, KeyError) as err:  # InputError is a ValueError
            print(f"{row['case_id']}: no curve ({err})")
            out[row["case_id"]] = np.full(len(GRID), np.nan)
    return out


def _at(curve: np.ndarray, fraction: np.ndarray) -> np.ndarray:
    f = np.clip(fraction, GRID[0], GRID[-1])
    return np.exp(np.interp(np.log(f), np.log(GRID), np.log(curve)))


def fit(rows: list[dict[str, str]], cur: dict[str, np.ndarray], measured: dict[str, float],
        defaults: dict[str, float]) -> dict[str, float]:
    """End-to-end parameters fitted on ``rows``: ``sustained_compute_fraction`` on the reference
    stack's runs, then each FITTED_STACKS ``kernel_efficiency`` on its runs (``defaults`` when a
    parameter has no run to fit on)."""
    params = dict(defaults)
    usable = [r for r in rows if r["case_id"] in measured
              and np.all(np.isfinite(cur[r["case_id"]]))]
    ref = [r for r in usable if stack_of(r) not in FITTED_STACKS]
    if ref:
        loss = sum(np.log(_at(cur[r["case_id"]], _FINE) / measured[r["case_id"]]) ** 2
                   for r in ref)
        params["sustained_compute_fraction"] = float(_FINE[int(np.argmin(loss))])
    scf = params["sustained_compute_fraction"]
    for name in FITTED_STACKS:
        mine = [r for r in usable if stack_of(r) == name]
        if mine:
            eff = np.minimum(scf * _EFF, 1.0)
            loss = sum(np.log(_at(cur[r["case_id"]], eff) / measured[r["case_id"]]) ** 2
                       for r in mine)
            params[f"stack:{name}"] = float(_EFF[int(np.argmin(loss))])
    return params


def predict_with(params: dict[str, float], row: dict[str, str], curve: np.ndarray) -> float:
    eff = params.get(f"stack:{stack_of(row)}", 1.0) if stack_of(row) in FITTED_STACKS else 1.0
    f = min(1.0, params["sustained_compute_fraction"] * eff)
    return float(_at(curve, np.array([f]))[0])


@dataclass
class CrossValidation:
    """Result of :func:`cross_validate` (errors in %, signed: predicted over measured - 1)."""

    in_sample: dict[str, float]
    out_of_sample: dict[str, float]
    params_all: dict[str, float]
    params_by_group: dict[str, dict[str, float]]
    halfwidths: dict[float, float]
    coverage: dict[float, float]
    regimes: dict[str, dict[str, float]]
    groups: dict[str, str]

    def summary(self) -> dict[str, Any]:
        ins, oos = list(self.in_sample.values()), list(self.out_of_sample.values())
        return {"mape_in_sample": float(np.mean(np.abs(ins))),
                "mape_logo": float(np.mean(np.abs(oos))),
                "bias_in_sample": float(np.mean(ins)), "bias_logo": float(np.mean(oos)),
                "n": len(oos), "halfwidths": self.halfwidths, "coverage": self.coverage,
                "regimes": self.regimes, "params_all": self.params_all}


def cross_validate(rows: list[dict[str, str]], cur: dict[str, np.ndarray],
                   measured: dict[str, float], defaults: dict[str, float]) -> CrossValidation:
    """In-sample and LOGO errors, per-regime statistics, conformal half-widths and coverage."""
    rows = [r for r in rows if r["case_id"] in measured
            and np.all(np.isfinite(cur[r["case_id"]]))]
    groups = {r["case_id"]: group_of(r) for r in rows}
    params_all = fit(rows, cur, measured, defaults)

    def err(params: dict[str, float], row: dict[str, str]) -> float:
        got = predict_with(params, row, cur[row["case_id"]])
        return 100.0 * (got / measured[row["case_id"]] - 1.0)

    ins = {r["case_id"]: err(params_all, r) for r in rows}
    by_group: dict[str, dict[str, float]] = {}
    oos: dict[str, float] = {}
    for g in sorted(set(groups.values())):
        train = [r for r in rows if groups[r["case_id"]] != g]
        by_group[g] = fit(train, cur, measured, defaults)
        for r in rows:
            if groups[r["case_id"]] == g:
                oos[r["case_id"]] = err(by_group[g], r)
    scores = {c: abs(math.log1p(e / 100.0)) for c, e in oos.items()}
    halfwidths = {lv: conformal_halfwidth(list(scores.values()), lv) for lv in LEVELS}
    coverage = {}
    for lv in LEVELS:
        hits = [scores[c] <= conformal_halfwidth(
            [s for o, s in scores.items() if groups[o] != groups[c]], lv) for c in scores]
        coverage[lv] = float(np.mean(hits)) if hits else math.nan
    regimes: dict[str, dict[str, float]] = {}
    for r in rows:
        for tag in regimes_of(r):
            regimes.setdefault(tag, {"n": 0, "in": [], "oos": []})  # type: ignore[dict-item]
            regimes[tag]["n"] += 1
            regimes[tag]["in"].append(ins[r["case_id"]])  # type: ignore[attr-defined]
            regimes[tag]["oos"].append(oos[r["case_id"]])  # type: ignore[attr-defined]
    stats = {tag: {"n": float(v["n"]),
                   "mape_in": float(np.mean(np.abs(v["in"]))), "bias_in": float(np.mean(v["in"])),
                   "mape_logo": float(np.mean(np.abs(v["oos"]))),
                   "bias_logo": float(np.mean(v["oos"]))} for tag, v in regimes.items()}
    return CrossValidation(ins, oos, params_all, by_group, halfwidths, coverage, stats, groups)


def print_report(cv: CrossValidation, measured: dict[str, float]) -> None:
    """The out-of-sample table, per-regime statistics, fitted values per fold and coverage."""
    print(f"\n{'case_id':<38} {'group':<14} {'in-sample_%':>12} {'LOGO_%':>8}")
    for cid, e in cv.out_of_sample.items():
        print(f"{cid:<38} {cv.groups[cid]:<14} {cv.in_sample[cid]:>12.2f} {e:>8.2f}")
    s = cv.summary()
    print(f"\nMAPE in sample {s['mape_in_sample']:.2f}% (bias {s['bias_in_sample']:+.2f}%), "
          f"leave-one-group-out {s['mape_logo']:.2f}% (bias {s['bias_logo']:+.2f}%) over "
          f"{s['n']} cases")
    print(f"{'regime':<22} {'n':>3} {'MAPE_in':>8} {'bias_in':>8} {'MAPE_LOGO':>10} "
          f"{'bias_LOGO':>10}")
    for tag, v in sorted(cv.regimes.items()):
        print(f"{tag:<22} {int(v['n']):>3} {v['mape_in']:>8.2f} {v['bias_in']:>+8.2f} "
              f"{v['mape_logo']:>10.2f} {v['bias_logo']:>+10.2f}")
    print("fitted end-to-end parameters: all cases "
          + ", ".join(f"{k}={v:.4f}" for k, v in cv.params_all.items()))
    for g, p in cv.params_by_group.items():
        print(f"  without {g}: " + ", ".join(f"{k}={v:.4f}" for k, v in p.items()))
    for lv in LEVELS:
        print(f"{round(100 * lv)}% conformal interval: x/÷ {math.exp(cv.halfwidths[lv]):.3f} "
              f"(log half-width {cv.halfwidths[lv]:.4f}); LOGO coverage "
              f"{100 * cv.coverage[lv]:.1f}% of {len(cv.out_of_sample)}")
