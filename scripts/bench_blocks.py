"""Benchmark of TP overlap, CP rings and chunked all-to-alls as closed-form blocks against the
graph of pieces.

``parallel.overlap_blocks`` (``simcore/ir/blocks.py``) costs each run of TP-overlapped steps
and each context-parallel ring as one op whose duration is its pieces' makespan; the default
builds every piece. For plans of GPT-3 175B on 1,024 A100s (tp 8, pp 8, SP, selective
recompute, ZeRO-1, global batch 1,536) with TP overlap, CP 2 or both, and with TP overlap for
MT-NLG 530B at pp 35 and a 1T model (128 layers, h 25,600, 160 heads) at pp 64, and Mixtral
8x7B on 256 GPUs (tp 2, pp 4, ep 8) with its all-to-all in 4 chunks, in this process:
- cold: CPU seconds of one new plan (graph, compile, one point), pieces and blocks, with the
  compiled-structure cache cleared;
- warm (GPT-3 plans only): points per CPU second on hardware batches (scale-out bandwidths),
  median of ``--rounds`` batches after one warm-up batch: ``--pieces-points`` per batch as
  pieces (a point costs milliseconds there), ``--points`` as blocks;
- the largest relative difference of the iteration times of the two (up to rounding: the
  blocks sum in another order).

Usage: ``python scripts/bench_blocks.py [--points 2048] [--pieces-points 128] [--rounds 3]``.
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before numpy: one BLAS thread, as in Ray workers
import time
from dataclasses import replace
from typing import Any

import numpy as np
from _bench_util import (
    GPT3,
    GPT3_TP8_PP8,
    MTNLG,
    load_average,
    print_table,
    scaleout_variants,
    workload,
)

from simcore.api import _compiled, simulate_batch
from simcore.specs.parallel import ParallelSpec
from simcore.specs.system import SystemSpec
from simcore.workloads.transformer.spec import ModelSpec

GPT_1T = ModelSpec(name="gpt_1t", num_layers=128, hidden_size=25600, num_heads=160,
                   seq_len=2048, vocab_size=51200)
#: (label, model, GPUs, plan, hardware batches too)
CASES: list[tuple[str, ModelSpec, int, dict[str, Any], bool]] = [
    ("GPT-3, TP overlap", GPT3, 1024, {**GPT3_TP8_PP8, "tp_comm_overlap": True}, True),
    ("GPT-3, CP 2", GPT3, 1024, {**GPT3_TP8_PP8, "cp": 2}, True),
    ("GPT-3, TP overlap + CP 2", GPT3, 1024, {**GPT3_TP8_PP8, "cp": 2, "tp_comm_overlap": True},
     True),
    ("MT-NLG 530B pp 35, TP overlap", MTNLG, 2240,
     {"tp": 8, "pp": 35, "global_batch": 1920, "tp_comm_overlap": True}, False),
    ("1T pp 64, TP overlap", GPT_1T, 3072,
     {"tp": 8, "pp": 64, "global_batch": 3072, "tp_comm_overlap": True}, False),
    ("Mixtral 8x7B ep 8, all-to-all in 4 chunks", workload("mixtral_8x7b"), 256,
     {"tp": 2, "pp": 4, "ep": 8, "global_batch": 1024, "ep_overlap_chunks": 4}, True),
]


def _cold(model: ModelSpec, par: ParallelSpec, system: SystemSpec) -> tuple[float, float]:
    """(CPU seconds of a new plan's first point, its iteration time)."""
    _compiled.cache_clear()
    c0 = time.process_time()
    res = simulate_batch(model, par, [system])
    return time.process_time() - c0, float(res.iteration_time_s[0])


def _rate(model: ModelSpec, par: ParallelSpec, systems: list[SystemSpec], rounds: int
          ) -> tuple[float, np.ndarray]:
    """(median points per CPU second over ``rounds`` batches after a warm-up, iteration times)."""
    simulate_batch(model, par, systems)
    rates = []
    for _ in range(rounds):
        c0 = time.process_time()
        res = simulate_batch(model, par, systems)
        rates.append(len(systems) / (time.process_time() - c0))
    return float(np.median(rates)), res.iteration_time_s


def main() -> None:
    """Print one row per plan: cold CPU seconds and warm points per CPU second, both ways."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--points", type=int, default=2048, help="points per batch as blocks")
    ap.add_argument("--pieces-points", type=int, default=128, help="points per batch as pieces")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    before = load_average()
    rows = []
    for label, model, gpus, plan, warm in CASES:
        pieces = ParallelSpec(micro_batch=1, sequence_parallel=True, recompute="selective",
                              zero_stage=1, **plan)
        blocks = replace(pieces, overlap_blocks=True)
        system = scaleout_variants(gpus, 1)[0]
        cold_p, it_p = _cold(model, pieces, system)
        cold_b, it_b = _cold(model, blocks, system)
        rel = abs(it_b - it_p) / it_p
        rate_cells = ["-", "-", "-"]
        if warm:
            n = min(args.points, args.pieces_points)
            rate_p, t_p = _rate(model, pieces, scaleout_variants(gpus, args.pieces_points),
                                args.rounds)
            rate_b, t_b = _rate(model, blocks, scaleout_variants(gpus, args.points), args.rounds)
            rel = max(rel, float(np.max(np.abs(t_b[:n] - t_p[:n]) / t_p[:n])))
            rate_cells = [f"{rate_p:,.0f}", f"{rate_b:,.0f}", f"{rate_b / rate_p:,.0f}x"]
        rows.append((label, f"{cold_p:.3f}", f"{cold_b:.3f}", f"{cold_p / cold_b:,.0f}x",
                     *rate_cells, f"{rel:.1e}"))
    print(f"warm batches: {args.pieces_points} points as pieces, {args.points} as blocks, "
          f"median of {args.rounds}")
    print_table(("plan", "cold s CPU, pieces", "cold s CPU, blocks", "cold ratio",
                 "points/CPU s, pieces", "points/CPU s, blocks", "ratio",
                 "largest relative difference of iteration times"), rows, before)


if __name__ == "__main__":
    main()
