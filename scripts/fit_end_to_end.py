"""Stage 2 of scripts/fit_calibration.py: end-to-end parameters, fitted once on published runs.

Fits, on ALL published runs together (shared/validation/public_cases.csv and
tests/data/validation/extra_cases.csv with their measured files):

* ``sustained_compute_fraction`` (GEMM / attention throughput sustained in a long training step
  relative to the boost-clock microbenchmarks) on the reference stack's runs (Megatron-LM);
* each fitted stack's ``kernel_efficiency`` (conf/stack/deepspeed.yaml: the Megatron-DeepSpeed
  runs, MT-NLG and BLOOM) given that fraction and the deepspeed stack's
  ``kernel_launch_floor_us``, fitted before it on vTrain's single-node runs
  (scripts/fit_launch_floor.py) at that fraction x the stack's efficiency fitted without the
  floor (one fixed-point pass);
* the split-conformal 80% / 95% interval half-widths from the leave-one-group-out residuals
  (every parameter above refitted without each publication; search/run/cross_validation.py).

Minimises the mean squared log error of iteration time; there is no per-case constant. Every case
is simulated once over a grid of compute fractions (the grid is the batch axis of
``simulate_batch``). Only A100 runs exist, so the values are carried to the other generations
(said in each file's header), except a compute fraction stage 1 took from a generation's own runs
(Blackwell: SimuMax's fit on B200 runs).
"""

from __future__ import annotations

import csv
import importlib.util
from dataclasses import replace
from pathlib import Path
from types import ModuleType

from search.run.cross_validation import (
    FITTED_STACKS,
    cross_validate,
    curves,
    fit,
    print_report,
    stack_of,
)
from simcore.specs.system import CalibrationSpec

KEY = "sustained_compute_fraction"
STACK_DIR = Path(__file__).resolve().parents[1] / "conf" / "stack"


def _read(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def _short(path: Path) -> str:
    """``path`` from the repo root, or from ``shared/`` for the shared data."""
    parts = path.resolve().parts
    if "shared" in parts:
        return "/".join(parts[parts.index("shared"):])
    return str(path.resolve().relative_to(STACK_DIR.parents[1]))


def _set_stack_key(name: str, key: str, value: str) -> None:
    path = STACK_DIR / f"{name}.yaml"
    lines = [ln for ln in path.read_text().splitlines() if not ln.startswith(f"{key}:")]
    path.write_text("\n".join([*lines, f"{key}: {value}"]) + "\n")


def _write_stack(name: str, efficiency: float, note: str) -> None:
    _set_stack_key(name, "kernel_efficiency", f"{efficiency:.4f}")
    _set_stack_key(name, "fitted", f'"{note}"')


def _script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{name}.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fit_end_to_end(calibs: dict[str, CalibrationSpec], case_files: list[tuple[Path, Path]],
                   own_fraction: frozenset[str] = frozenset()
                   ) -> tuple[dict[str, CalibrationSpec], list[str]]:
    """Fit on the A100 runs; carry the values to the other generations (no runs for them),
    except the compute fraction of the presets in ``own_fraction`` (set from their own
    generation's runs by stage 1)."""
    rows: list[dict[str, str]] = []
    measured: dict[str, float] = {}
    for cases, meas in case_files:
        got = {r["case_id"]: float(r["iter_time_s"]) for r in _read(meas)}
        rows += [r for r in _read(cases) if r["case_id"] in got]
        measured.update(got)
    defaults = {KEY: calibs["a100"].sustained_compute_fraction}
    cur = curves(rows, "auto")
    # the Megatron-LM fraction does not depend on the DeepSpeed floor: fit it, fit the floor at
    # it (x the stack's current efficiency), then re-simulate the DeepSpeed runs with the floor
    first = fit(rows, cur, measured, defaults)
    eff = first.get("stack:deepspeed", 1.0)
    floor_us, fstats = _script("fit_launch_floor").fit_launch_floor(
        "deepspeed", fraction=min(1.0, first[KEY] * eff))
    _set_stack_key("deepspeed", "kernel_launch_floor_us", f"{floor_us:g}")
    cur.update(curves([r for r in rows if stack_of(r) == "deepspeed"], "auto"))
    cv = cross_validate(rows, cur, measured, defaults)
    print_report(cv, measured)
    s = cv.summary()
    best = round(cv.params_all[KEY], 4)
    q80, q95 = (round(cv.halfwidths[lv], 4) for lv in (0.8, 0.95))
    out = {name: replace(c, **{KEY: c.sustained_compute_fraction if name in own_fraction else best,
                               "interval80_log_halfwidth": q80, "interval95_log_halfwidth": q95})
           for name, c in calibs.items()}
    sources = ", ".join(_short(c) for c, _ in case_files)
    log = [f"end to end over {s['n']} published A100 runs ({sources}): {KEY}={best:.4f} on the "
           f"Megatron-LM runs; in-sample MAPE {s['mape_in_sample']:.2f}%, leave-one-group-out "
           f"MAPE {s['mape_logo']:.2f}% (bias {s['bias_logo']:+.2f}%); carried to other GPUs"
           + (f" except {', '.join(sorted(own_fraction))} (above)" if own_fraction else ""),
           f"conformal log half-widths from the LOGO residuals: 80% {q80}, 95% {q95} (coverage "
           f"{100 * cv.coverage[0.8]:.0f}% / {100 * cv.coverage[0.95]:.0f}%)"]
    log.append(f"stack deepspeed: kernel_launch_floor_us={floor_us:g} on vTrain's single-node "
               f"Megatron-DeepSpeed runs ({int(fstats['n'])} rows): MAPE {fstats['mape']:.1f}% "
               f"(bias {fstats['bias']:+.1f}%), without a floor {fstats['mape_no_floor']:.1f}% "
               f"({fstats['bias_no_floor']:+.1f}%)")
    # evidence, not a parameter: the same single-node runs at the stack efficiency 1 (is the
    # large-run residual a kernel property? vTrain's runs say no when this MAPE is lower)
    floor1, fstats1 = _script("fit_launch_floor").fit_launch_floor(
        "deepspeed", fraction=min(1.0, cv.params_all[KEY]))
    log.append(f"  (check: the same vTrain runs at kernel_efficiency 1: floor {floor1:g} us, MAPE "
               f"{fstats1['mape']:.1f}% (bias {fstats1['bias']:+.1f}%); not written)")
    for name in FITTED_STACKS:
        key = f"stack:{name}"
        if key in cv.params_all:
            eff = cv.params_all[key]
            note = (f"scripts/fit_end_to_end.py on the {name} runs of {sources} given "
                    f"{KEY}={best:.4f}")
            _write_stack(name, eff, note)
            log.append(f"stack {name}: kernel_efficiency={eff:.4f}")
    return out, log
