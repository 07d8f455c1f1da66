"""Benchmark of batch tiles on deep schedules: hardware batches of plans whose condensed DAG is
deep (ZeRO-2 / ZeRO-3 per-layer reductions, interleaving at pp 16, MT-NLG 530B at pp 35) and of
shallow ones (GPT-3 at ZeRO-1, TP overlap + CP as closed-form blocks).

``simcore.engine.evaluate`` splits a batch into column tiles; every tile pays one Python call
per level of the schedule. The tile used to follow a 4 MiB working set only, which leaves 11-25
points per tile on DAGs of 20,000-50,000 rows and ~1,000-5,000 levels. It is now at least
``_TILE_MIN_POINTS`` (96) points while a tile's arrays stay under ``_TILE_MAX_BYTES`` (64 MiB)
each. The baseline is the old rule in the same process (``_TILE_MIN_POINTS = 16``), run
alternately with the new one; each round times a batch of ``--points`` points (``time.process_time``) after a warm-up, and
the iteration times of the two rules are compared bit for bit.

Usage: ``python scripts/bench_tiles.py [--points 2048] [--rounds 3]``.
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before numpy: one BLAS thread, as in Ray workers
import time
from typing import Any

import numpy as np
from _bench_util import GPT3, GPT3_TP8_PP8, MTNLG, load_average, print_table, scaleout_variants

from simcore.api import _compiled, simulate_batch
from simcore.engine import evaluate
from simcore.specs.parallel import ParallelSpec
from simcore.specs.system import SystemSpec
from simcore.workloads.transformer.spec import ModelSpec

CASES: list[tuple[str, ModelSpec, int, dict[str, Any]]] = [
    ("GPT-3, tp 8 pp 8, ZeRO-1", GPT3, 1024, GPT3_TP8_PP8),
    ("GPT-3, tp 8 pp 8, ZeRO-2", GPT3, 1024, {**GPT3_TP8_PP8, "zero_stage": 2}),
    ("GPT-3, tp 8 pp 8, ZeRO-3", GPT3, 1024, {**GPT3_TP8_PP8, "zero_stage": 3}),
    ("GPT-3, tp 8 pp 16 vp 2", GPT3, 1024, {**GPT3_TP8_PP8, "pp": 16, "vp": 2}),
    ("GPT-3, TP overlap + CP 2, blocks", GPT3, 1024,
     {**GPT3_TP8_PP8, "cp": 2, "tp_comm_overlap": True, "overlap_blocks": True}),
    ("MT-NLG 530B, tp 8 pp 35", MTNLG, 2240, {"tp": 8, "pp": 35, "global_batch": 1920}),
]
OLD_MIN_POINTS = 16  # the rule before: the working-set budget alone (and 16 points at least)


def _rate(model: ModelSpec, par: ParallelSpec, systems: list[SystemSpec], min_points: int
          ) -> tuple[float, np.ndarray]:
    evaluate._TILE_MIN_POINTS = min_points
    c0 = time.process_time()
    res = simulate_batch(model, par, systems)
    return len(systems) / (time.process_time() - c0), res.iteration_time_s


def main() -> None:
    """Print one row per case: points per CPU second with the old and the new tile rule."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--points", type=int, default=2048)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    new_min = evaluate._TILE_MIN_POINTS
    before = load_average()
    rows = []
    for label, model, gpus, plan in CASES:
        par = ParallelSpec(micro_batch=1, sequence_parallel=True, recompute="selective",
                           **{"zero_stage": 1, **plan})
        systems = scaleout_variants(gpus, args.points)
        cw = _compiled(model, par.resolve(gpus), 8, "calibrated")
        depth = cw.plan.num_levels
        size = max(cw.plan.num_segments, cw.plan.num_chains)
        _rate(model, par, systems, OLD_MIN_POINTS)  # warm: the structure and both workspaces
        _rate(model, par, systems, new_min)
        old, new, same = [], [], True
        for _ in range(args.rounds):
            r_old, t_old = _rate(model, par, systems, OLD_MIN_POINTS)
            r_new, t_new = _rate(model, par, systems, new_min)
            old.append(r_old)
            new.append(r_new)
            same = same and bool(np.array_equal(t_old, t_new))
        rows.append((label, f"{size:,}", f"{depth:,}",
                     f"{min(args.points, max(16, evaluate._TILE_BYTES // (8 * size))):,}",
                     f"{np.median(old):,.0f}", f"{np.median(new):,.0f}",
                     f"{np.median(new) / np.median(old):.2f}x", "yes" if same else "NO"))
    evaluate._TILE_MIN_POINTS = new_min
    print(f"{args.points} points per batch, medians of {args.rounds} alternating rounds")
    print_table(("plan", "rows", "levels", "old tile", "points/CPU s, old tile",
                 "points/CPU s, now", "ratio of medians", "same results"), rows, before)


if __name__ == "__main__":
    main()
