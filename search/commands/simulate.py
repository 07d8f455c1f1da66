"""``simsweep simulate [overrides] [--json] [--trace FILE]``: one design point.

Composes the Hydra config (``conf/config.yaml``, overrides in Hydra's grammar) with the compose
API (:mod:`search.config.compose`), builds the specs (:mod:`search.config.build`) and calls :func:`simcore.api.simulate_batch` on a
batch of one. Prints iteration time, breakdown, memory per GPU and MFU, or one JSON object;
``--trace FILE`` writes a Chrome-trace (Perfetto) timeline of the representative ranks, as the
configured fidelity schedules them (its last event ends at the printed iteration time).
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from collections.abc import Hashable
from pathlib import Path
from typing import Any

from search.config.build import build_specs
from search.config.compose import compose
from simcore.api import check_structure, interval_columns, simulate_batch, stage_layer_counts
from simcore.errors import InputError
from simcore.formats import chrome_trace
from simcore.specs.parallel import ParallelSpec


def _parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="simsweep simulate", description=__doc__.splitlines()[0])
    p.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. parallel.tp=8")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--trace", metavar="FILE", help="write a Chrome-trace JSON timeline")
    return p.parse_args(argv)


def _format(row: dict[str, Any], header: str, layers: str | None = None) -> str:
    t = float(row["iteration_time_s"])
    lines = [header]
    if layers is not None:  # how a plan split the layers unevenly
        lines.append(f"  layers per stage    {layers}")
    lines.append(f"  iteration time      {t:10.4f} s")
    for tag in ("80", "95"):
        lo, hi = row.get(f"iter_time_lo{tag}_s", t), row.get(f"iter_time_hi{tag}_s", t)
        if lo == lo and hi == hi:  # not NaN: the calibration carries an interval
            lines.append(f"    {tag}% interval      {lo:10.4f} - {hi:.4f} s")
    lines.append(f"  compute             {row['compute_s']:10.4f} s")
    lines.append(f"  exposed comm        {row['exposed_comm_s']:10.4f} s")
    for kind in ("tp", "dp", "pp", "cp", "ep"):
        v = float(row.get(f"exposed_comm_{kind}_s", 0.0))
        if v > 0:
            lines.append(f"    {kind:<17} {v:10.4f} s")
    lines.append(f"  pipeline bubble     {row['bubble_s']:10.4f} s")
    lines.append(f"  memory per GPU      {row['peak_memory_gib']:10.2f} GiB")
    lines.append(f"  model TFLOP/s/GPU   {row['model_tflops_per_gpu']:10.1f}")
    lines.append(f"  MFU                 {100 * row['mfu']:10.1f} %")
    status = "fits" if row["feasible"] else f"INFEASIBLE: {row['reason']}"
    lines.append(f"  status              {status}")
    return "\n".join(lines)


def stage_layers_text(model: Hashable, parallel: ParallelSpec) -> str | None:
    """``7, 8 x 14, 7``: transformer layers on each pipeline stage (runs of equal counts
    folded) when the plan splits them unevenly; None for an even split or another family."""
    counts = stage_layer_counts(model, parallel)
    if counts is None or len(set(counts)) == 1:
        return None
    runs = [(count, len(list(group))) for count, group in itertools.groupby(counts)]
    return ", ".join(f"{c} x {n}" if n > 1 else str(c) for c, n in runs)


def check_trace_path(path: str) -> Path:
    """``--trace``'s file, checked before the point is simulated (so a typo does not cost the
    simulation and its printed result).

    Raises:
        InputError: the path is a folder, or its folder does not exist.
    """
    out = Path(path)
    if out.is_dir():
        raise InputError("--trace", path, "is a folder; give the timeline's file name, e.g. "
                         f"{out / 'timeline.json'}")
    folder = out.parent
    if not folder.is_dir():
        raise InputError("--trace", path, f"its folder {folder} does not exist (the timeline "
                         "is written into an existing folder)")
    return out


def _write_trace(path: Path, timeline: dict[str, Any]) -> None:
    """Write the timeline.

    Raises:
        InputError: the file cannot be written (the disk is full, ...).
    """
    try:
        path.write_text(json.dumps(timeline))
    except OSError as err:
        raise InputError("--trace", str(path), f"cannot be written ({err.strerror or err}); "
                         "the printed result is complete") from None


def main(argv: list[str]) -> int:
    """Run the command; returns the exit code."""
    args = _parse(argv)
    trace = check_trace_path(args.trace) if args.trace else None
    cfg = compose(list(args.overrides))
    model, parallel, system = build_specs(cfg)
    fidelity = str(cfg.get("fidelity", "calibrated"))
    result = simulate_batch(model, parallel, [system], fidelity)
    row = result.rows()[0]
    calib = system.calibration
    row.update(interval_columns(float(row["iteration_time_s"]),
                                {0.8: calib.interval80_log_halfwidth,
                                 0.95: calib.interval95_log_halfwidth}))
    par, reason = check_structure(model, parallel, system)
    if args.json:
        out = {"workload": model.name, "system": system.name, "num_gpus": system.num_gpus,
               **{k: (None if isinstance(v, float) and v != v else v) for k, v in row.items()}}
        print(json.dumps(out))
    else:
        dp = par.dp if par is not None else parallel.dp
        header = (f"{model.name} on {system.name} x{system.num_gpus}: tp={parallel.tp} "
                  f"pp={parallel.pp} dp={dp} cp={parallel.cp} ep={parallel.ep} vp={parallel.vp}")
        layers = stage_layers_text(model, par) if par is not None else None
        print(_format(row, header, layers))
    if trace is not None:  # after the result is printed: a failed write does not lose it
        if par is not None:
            _write_trace(trace, chrome_trace(model, parallel, system, fidelity))
        where = (f"trace: {trace.resolve()} (open in https://ui.perfetto.dev or "
                 "chrome://tracing)" if par is not None else
                 f"trace: not written ({reason})")
        print(where, file=sys.stderr if args.json else sys.stdout)
    return 0
