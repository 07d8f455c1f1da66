"""``simsweep validate --cases F.csv --out P.csv``: predict published training runs, report errors.

Reads a cases file (schema: shared/validation/CASES.md; extra columns ignored), builds each
case's ModelSpec / ParallelSpec / SystemSpec (:mod:`search.config.cases`: the cluster preset of ``conf/system`` whose
accelerator is the case's ``gpu``, with the case's GPU count, GPUs per node and scale-out line
rate), runs ``simcore.api.simulate_batch`` and writes one prediction row per case. A bad row is
reported with ``status=error`` and its reason; it never stops the others. Columns a row leaves
out (``vp``, ``cp``, ``ep``, ``dp``, ``num_kv_heads``, a one-node run's scale-out rate, a
mixture-of-experts row's expert counts, ...) get the values of
:func:`search.config.cases.complete_row`, each case's named on a ``note:`` line.

When a measured file is given (``--measured``, default: the cases file's sibling
``*_measured.csv``) it prints the error per case, the mean absolute percentage error (MAPE) of iteration time, Spearman rank
correlation per (model, cluster) group, and the predicted vs measured ratio of case pairs that
differ only in recompute / sequence parallelism. The measured file is read only for reporting.

Several cases files may be given (each with its sibling measured file). An optional ``stack``
column names the software stack (``conf/stack``, default ``megatron_lm``). ``--logo`` adds the
out-of-sample report of :mod:`search.run.cross_validation` (every end-to-end parameter refitted
leave-one-group-out, per-regime MAPE and signed bias, conformal interval coverage);
``--intervals`` adds the 80% / 95% prediction-interval columns to ``--out``; ``--breakdown`` adds
where each predicted iteration goes (compute, exposed communication per kind, pipeline bubble;
the stage with the most compute, as ``simsweep simulate`` prints it) to ``--out`` and to the error
table, so a case that is off shows which part of the model it is off in.
"""

from __future__ import annotations

import argparse
import csv
import math
from pathlib import Path
from typing import Any

import numpy as np

from search.config.cases import (
    ATTENTION_IMPLS,
    FLASH_ERA_GPUS,
    MODEL_KEYS,
    PLAN_KEYS,
    attention_impl,
    build_case,
    cluster_for,
    complete_row,
)
from simcore.errors import InputError

__all__ = ["ATTENTION_IMPLS", "BREAKDOWN_COLUMNS", "FLASH_ERA_GPUS", "OUT_COLUMNS",
           "assumption_notes", "attention_impl", "build_case", "cluster_for", "main", "predict",
           "report", "spearman"]

OUT_COLUMNS = ("case_id", "iter_time_s", "model_tflops_per_gpu", "mfu", "peak_memory_gib",
               "fits_memory", "status", "error")
#: prediction-interval columns (``simcore/fidelity/intervals.py``); empty when not calibrated
INTERVAL_COLUMNS = ("iter_time_lo80_s", "iter_time_hi80_s", "iter_time_lo95_s",
                    "iter_time_hi95_s")
#: where the predicted iteration goes (``--breakdown``): ``simulate_batch``'s breakdown columns
BREAKDOWN_COLUMNS = ("compute_s", "exposed_comm_s", "exposed_comm_tp_s", "exposed_comm_dp_s",
                     "exposed_comm_pp_s", "exposed_comm_cp_s", "exposed_comm_ep_s", "bubble_s")


def predict(row: dict[str, str], attention: str = "auto", breakdown: bool = False
            ) -> dict[str, Any]:
    """One prediction row (never raises for a bad case: status/error say what went wrong); with
    ``breakdown`` also the :data:`BREAKDOWN_COLUMNS` (empty for a case that fails)."""
    from simcore.api import simulate_batch

    parts = BREAKDOWN_COLUMNS if breakdown else ()
    out: dict[str, Any] = {k: "" for k in OUT_COLUMNS + parts}
    out["case_id"] = (row.get("case_id") or "").strip()
    try:
        model, plan, system = build_case(row, attention)
        res = simulate_batch(model, plan, [system]).rows()[0]
    except (InputError, ValueError, TypeError, KeyError) as err:
        out.update(status="error", error=str(err).replace("\n", " "))
        return out
    for key in ("iter_time_s", "model_tflops_per_gpu", "mfu", "peak_memory_gib", *parts):
        value = res["iteration_time_s" if key == "iter_time_s" else key]
        out[key] = "" if not isinstance(value, float) or math.isnan(value) else f"{value:.6g}"
    if not res["feasible"] and not out["iter_time_s"]:
        # nothing simulated: the plan breaks a rule of the model or the cluster (a GPU count
        # that is not tp*pp*dp*cp, a batch that does not divide, ...); no memory verdict either
        out.update({k: "" for k in ("model_tflops_per_gpu", "mfu", "peak_memory_gib", *parts)})
        out.update(status="error", error=str(res["reason"]))
        return out
    out["fits_memory"] = str(bool(res["feasible"])).lower()
    out["status"] = "ok" if res["feasible"] else "infeasible"
    out["error"] = str(res["reason"])
    return out


def assumption_notes(cases: list[dict[str, str]]) -> list[str]:
    """One line per case that leaves columns out, naming the values assumed for them
    (:func:`search.config.cases.complete_row`)."""
    notes = []
    for row in cases:
        assumed = complete_row(row)[1]
        if assumed:
            values = ", ".join(f"{k}={v}" for k, v in assumed.items())
            notes.append(f"note: case {row.get('case_id', '')!r} leaves out "
                         f"{', '.join(assumed)}: assumed {values}")
    return notes


def _ranks(x: np.ndarray) -> np.ndarray:
    order = np.argsort(x, kind="stable")
    ranks = np.empty(len(x))
    ranks[order] = np.arange(len(x), dtype=float)
    return ranks


def spearman(a: list[float], b: list[float]) -> float:
    """Spearman rank correlation (no ties expected); nan below two points."""
    if len(a) < 2:
        return float("nan")
    ra, rb = _ranks(np.asarray(a)), _ranks(np.asarray(b))
    if np.std(ra) == 0 or np.std(rb) == 0:
        return float("nan")
    return float(np.corrcoef(ra, rb)[0, 1])


def report(cases: list[dict[str, str]], preds: list[dict[str, Any]],
           measured: dict[str, float]) -> dict[str, Any]:
    """Print the error table, MAPE, per-group Spearman and pair ratios; return the summary."""
    parts = any(p.get("compute_s") for p in preds)  # --breakdown: where the prediction goes
    print(f"{'case_id':<34} {'measured_s':>11} {'predicted_s':>12} {'error_%':>8}  "
          + (f"{'compute_s':>10} {'exposed_s':>10} {'(tp/dp/pp/cp/ep)':<30} {'bubble_s':>9}  "
             if parts else "") + "status")
    errors: list[float] = []
    groups: dict[tuple[str, ...], list[tuple[float, float]]] = {}
    pairs: dict[tuple[str, ...], dict[str, tuple[float, float]]] = {}
    by_id = {p["case_id"]: p for p in preds}
    for row in cases:
        cid = row.get("case_id", "")
        pred = by_id.get(cid, {})
        meas = measured.get(cid)
        got = float(pred["iter_time_s"]) if pred.get("iter_time_s") else float("nan")
        err = 100.0 * (got - meas) / meas if meas and not math.isnan(got) else float("nan")
        print(f"{cid:<34} {meas if meas else float('nan'):>11.4g} {got:>12.4g} {err:>8.2f}  "
              + (_breakdown_cells(pred) if parts else "")
              + f"{pred.get('status', '')} {pred.get('error', '')}".rstrip())
        if math.isnan(err) or meas is None:
            continue
        errors.append(abs(err))
        model_key = tuple(row.get(k, "") for k in MODEL_KEYS)
        cluster_key = tuple(row.get(k, "") for k in ("gpu", "num_gpus", "scaleout_gbps_per_gpu"))
        groups.setdefault(model_key + cluster_key, []).append((meas, got))
        plan_key = tuple(row.get(k, "") for k in PLAN_KEYS if k not in
                         ("recompute", "sequence_parallel"))
        mode = f"{row.get('recompute', '')}/sp={row.get('sequence_parallel', '')}"
        pairs.setdefault(model_key + cluster_key + plan_key, {})[mode] = (meas, got)
    mape = float(np.mean(errors)) if errors else float("nan")
    print(f"\nMAPE of iteration time: {mape:.2f}% over {len(errors)} cases")
    rhos = [spearman([m for m, _ in v], [g for _, g in v]) for v in groups.values() if len(v) > 1]
    for rho, size in zip(rhos, [len(v) for v in groups.values() if len(v) > 1], strict=True):
        print(f"Spearman (model, cluster group of {size}): {rho:+.2f}")
    ratios = []
    for modes in pairs.values():
        if len(modes) == 2:
            (ma, ga), (mb, gb) = modes.values()
            names = list(modes)
            ratios.append((names, ma / mb, ga / gb))
            print(f"pair {names[0]} / {names[1]}: measured {ma / mb:.3f}, predicted {ga / gb:.3f}")
    return {"mape": mape, "n": len(errors), "spearman": rhos, "pairs": ratios}


def _breakdown_cells(pred: dict[str, Any]) -> str:
    """The error table's breakdown cells of one prediction (blank when it failed)."""
    if not pred.get("compute_s"):
        return f"{'':>10} {'':>10} {'':<30} {'':>9}  "
    kinds = "/".join(f"{float(pred[f'exposed_comm_{k}_s']):.3f}"
                     for k in ("tp", "dp", "pp", "cp", "ep"))
    return (f"{float(pred['compute_s']):>10.3f} {float(pred['exposed_comm_s']):>10.3f} "
            f"{kinds:<30} {float(pred['bubble_s']):>9.3f}  ")


def _read_csv(path: Path, option: str, required: tuple[str, ...]) -> list[dict[str, str]]:
    """The rows of a CSV file as written by hand, pandas or a spreadsheet: a UTF-8 byte-order
    mark (Excel's "CSV UTF-8") is dropped, and spaces around column names and after commas too
    (every row had lost its ``case_id`` to the mark); rows with every cell empty are skipped.

    Raises:
        InputError: (naming ``option`` and the file) the file is not UTF-8 text, has no header,
            or its header lacks a ``required`` column (a file of another schema, or not
            comma-separated).
    """
    try:
        with path.open(newline="", encoding="utf-8-sig") as fh:
            reader = csv.DictReader(fh, skipinitialspace=True)
            header = [name.strip() for name in reader.fieldnames or ()]
            rows = [{key.strip(): value for key, value in row.items() if key is not None}
                    for row in reader]
    except UnicodeDecodeError as err:
        raise InputError(option, str(path), f"not UTF-8 text (byte {err.start})") from None
    missing = [c for c in required if c not in header]
    if missing:
        raise InputError(option, str(path), f"a comma-separated file whose header names "
                         f"{', '.join(required)}; its header {header} lacks {', '.join(missing)}")
    return [r for r in rows if any((v or "").strip() for v in r.values() if isinstance(v, str))]


def _unique_ids(rows: list[dict[str, str]], where: list[str], option: str) -> None:
    """Refuse two rows of one ``case_id`` (CASES.md: unique; the report joins on it)."""
    seen: dict[str, str] = {}
    for row, place in zip(rows, where, strict=True):
        cid = (row.get("case_id") or "").strip()
        if cid in seen:
            raise InputError(option, cid, f"case_id must be unique: {seen[cid]} and {place} "
                             "both use it")
        seen[cid] = place


def _read_measured(path: Path) -> dict[str, float]:
    """case_id -> measured iteration time (rows with an empty time are skipped).

    Raises:
        InputError: the file is missing or not of the measured schema, or a time is not a
            positive number (named by file, case and column).
    """
    if not path.is_file():
        raise InputError("--measured", str(path), "no such file")
    out: dict[str, float] = {}
    rows = _read_csv(path, "--measured", ("case_id", "iter_time_s"))
    places = _places(path, rows)
    for place, row in zip(places, rows, strict=True):
        raw = (row.get("iter_time_s") or "").strip()
        if not raw:
            continue
        try:
            value = float(raw)
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or value <= 0:
            raise InputError(f"iter_time_s of {place}", raw, "must be a positive number of "
                             "seconds")
        out[(row.get("case_id") or "").strip()] = value
    _unique_ids(rows, places, "--measured")
    return out


def _places(path: Path, rows: list[dict[str, str]]) -> list[str]:
    """Where each row is, for messages: the file and its case_id."""
    return [f"{path.name}:{(r.get('case_id') or '').strip()!r}" for r in rows]


def _measured_for(path: Path, explicit: Path | None) -> dict[str, float]:
    """The measured times of one cases file: ``explicit`` (it must exist), else its sibling
    ``*_measured.csv`` when there is one."""
    if explicit is not None:
        return _read_measured(explicit)
    sibling = path.with_name(path.name.replace("cases", "measured"))
    if not sibling.is_file() or sibling == path:
        return {}
    return _read_measured(sibling)


def _with_intervals(pred: dict[str, Any], row: dict[str, str], attention: str) -> dict[str, Any]:
    """The prediction row plus its 80% / 95% interval columns (the calibration's conformal
    half-widths, ``simcore/fidelity/intervals.py``)."""
    from simcore.api import interval_columns

    out = {**pred, **{c: "" for c in INTERVAL_COLUMNS}}
    if not pred.get("iter_time_s"):
        return out
    try:
        calib = build_case(row, attention)[2].calibration
    except (InputError, ValueError, TypeError, KeyError):
        return out
    cols = interval_columns(float(pred["iter_time_s"]),
                            {0.8: calib.interval80_log_halfwidth,
                             0.95: calib.interval95_log_halfwidth})
    out.update({k: "" if math.isnan(v) else f"{v:.6g}" for k, v in cols.items()})
    return out


def main(argv: list[str]) -> int:
    """Entry point of ``simsweep validate``."""
    parser = argparse.ArgumentParser(prog="simsweep validate", description=__doc__.splitlines()[0])
    parser.add_argument("--cases", required=True, type=Path, nargs="+",
                        help="one or more cases files (CASES.md schema)")
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--measured", type=Path, default=None,
                        help="measured file, joined on case_id with every cases file "
                             "(default: the sibling *_measured.csv of each cases file)")
    parser.add_argument("--attention", choices=["auto", *sorted(ATTENTION_IMPLS)], default="auto",
                        help="attention implementation of the runs (auto: flash on H100-era "
                             "GPUs, GQA or fp8; else Megatron-LM's unfused core of 2021-22)")
    parser.add_argument("--intervals", action="store_true",
                        help="add 80%% / 95%% prediction-interval columns to --out (beyond the "
                             "CASES.md schema)")
    parser.add_argument("--breakdown", action="store_true",
                        help="add where each predicted iteration goes (compute, exposed "
                             "communication per kind, pipeline bubble) to --out and the error "
                             "table (beyond the CASES.md schema)")
    parser.add_argument("--logo", action="store_true",
                        help="also refit the end-to-end parameters leave-one-group-out and "
                             "report out-of-sample errors, per-regime bias and interval coverage")
    args = parser.parse_args(argv)
    cases: list[dict[str, str]] = []
    places: list[str] = []
    measured: dict[str, float] = {}
    for path in args.cases:  # every file is read and checked before any case is simulated
        if not path.is_file():
            raise InputError("--cases", str(path), "no such file")
        rows = _read_csv(path, "--cases", ("case_id", "gpu"))
        cases += rows
        places += _places(path, rows)
        if args.measured is None:
            measured.update(_measured_for(path, None))
    if args.measured is not None:
        measured = _read_measured(args.measured)
    _unique_ids(cases, places, "--cases")
    preds = [predict(row, args.attention, args.breakdown) for row in cases]
    for note in assumption_notes(cases):
        print(note)
    columns: tuple[str, ...] = OUT_COLUMNS
    if args.intervals:
        preds = [_with_intervals(p, row, args.attention) for p, row in zip(preds, cases,
                                                                            strict=True)]
        columns = OUT_COLUMNS + INTERVAL_COLUMNS
    if args.breakdown:
        columns += BREAKDOWN_COLUMNS
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=columns)
        writer.writeheader()
        writer.writerows(preds)
    if measured:
        report(cases, preds, measured)
    predicted = sum(1 for p in preds if p["status"] == "ok" and p["case_id"] in measured)
    if args.logo and measured and predicted < 2:
        print(f"no leave-one-group-out report: it refits on predicted cases with a measured "
              f"time, and {predicted} of {len(preds)} are")
    elif args.logo and measured:
        from search.run.cross_validation import cross_validate, curves, print_report

        defaults = {"sustained_compute_fraction": _reference_fraction(cases)}
        cv = cross_validate(cases, curves(cases, args.attention), measured, defaults)
        print_report(cv, measured)
    print(f"wrote {len(preds)} predictions to {args.out}")
    return 0


def _reference_fraction(cases: list[dict[str, str]]) -> float:
    """The checked-in sustained_compute_fraction of the first case whose accelerator has a
    cluster preset (the LOGO fallback when a fold has no reference-stack run); 1.0 if none."""
    for row in cases:
        try:
            system = cluster_for((row.get("gpu") or "").strip().lower())
        except InputError:
            continue
        return float(system.get("calibration", {}).get("sustained_compute_fraction", 1.0))
    return 1.0
