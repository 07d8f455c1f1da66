"""Benchmark of cold structures: how long a *new* parallelization plan takes to evaluate.

Cases: GPT-3 175B on 1,024 A100s, Megatron-Turing NLG 530B (105 layers, h=20480, 128 heads;
Smith et al. 2022) on 2,240 A100s, Llama 3 405B on 8,192 GPUs (``llama405b``: 126 layers, so
every pp of 4-64 splits them unevenly, even or ``parallel.layer_split=balanced``), and GPT-3
175B again with Megatron-LM's TP communication
overlap on and context parallelism 1 or 2 (``gpt3_overlap``: plans whose passes issue dozens of
ops per layer, replayed per kind of pass), and the same plans with each run of overlapped steps
one closed-form block (``gpt3_overlap_blocks``, ``parallel.overlap_blocks``; its first
``--pieces-plans`` plans are also timed as pieces in this tree, and the iteration times must
agree to 1e-10). For each, N distinct plans (tp, pp, vp, micro-batch,
recompute, ZeRO stage, sequence parallelism, uneven first/last stages) are drawn with a fixed
seed; each is
evaluated cold in one process (structure cache cleared, one design point: graph generation +
compile + evaluation), and the median, p90 (wall and CPU time: ``time.process_time`` is
steadier on a shared machine) and plans/s are reported. The same plans are evaluated
by the base commit's code in a subprocess (``--base``: a checkout of it, e.g.
``git worktree add /tmp/sw-base <sha>``), and the iteration times must agree bit for bit.

Usage: ``python scripts/bench_structures.py [--plans 24] [--base /tmp/sw-base] [--base-plans 6]
[--pieces-plans 8] [--no-shared-schedules]``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from _bench_util import GPT3, LLAMA3_405B, MTNLG

from simcore.api import _compiled, check_structure, simulate_batch
from simcore.specs.parallel import ParallelSpec
from simcore.specs.system import SystemSpec
from simcore.workloads.transformer.spec import ModelSpec

#: case -> (label, model, GPUs, global batch, plan axes, fixed plan fields)
CASES: dict[str, tuple[str, ModelSpec, int, int, dict[str, tuple[Any, ...]], dict[str, Any]]] = {
    "gpt3": ("GPT-3 175B, 1,024 GPUs", GPT3, 1024, 1536,
             {"tp": (4, 8), "pp": (4, 8, 16), "vp": (1, 2, 3), "mb": (1, 2)}, {}),
    "530b": ("MT-NLG 530B, 2,240 GPUs", MTNLG, 2240, 1920,
             {"tp": (8,), "pp": (35, 7, 5, 14), "vp": (1, 3), "mb": (1, 2)}, {}),
    "llama405b": ("Llama 3 405B, 8,192 GPUs", LLAMA3_405B, 8192, 2048,
                  {"tp": (4, 8), "pp": (8, 16, 32, 64), "vp": (1, 2), "mb": (1, 2),
                   "split": (None, 1, "balanced")}, {}),
    "gpt3_overlap": ("GPT-3 175B, TP overlap, CP 1-2", GPT3, 1024, 1536,
                     {"tp": (4, 8), "pp": (4, 8, 16), "vp": (1, 2, 3), "mb": (1, 2),
                      "cp": (1, 2)}, {"tp_comm_overlap": True}),
    "gpt3_overlap_blocks": ("GPT-3, TP overlap + CP, blocks", GPT3, 1024, 1536,
                            {"tp": (4, 8), "pp": (4, 8, 16), "vp": (1, 2, 3), "mb": (1, 2),
                             "cp": (1, 2)}, {"tp_comm_overlap": True, "overlap_blocks": True}),
}
#: a case whose plans are another case's modelled another way: (that case, relative tolerance
#: of the iteration times; closed-form blocks sum in another order, simcore/ir/blocks.py)
SAME_PLANS_AS = {"gpt3_overlap_blocks": ("gpt3_overlap", 1e-10)}


def plans(case: str, n: int, seed: int = 0) -> list[ParallelSpec]:
    """``n`` distinct valid plans of ``case`` in a seeded random order."""
    _, model, gpus, gb, axes, fixed = CASES[case]
    system = SystemSpec(num_gpus=gpus)
    # the layer split: even (None), a first stage one layer short (1; vp 1 only), balanced
    grid = list(itertools.product(axes["tp"], axes["pp"], axes["vp"], axes["mb"],
                                  ("none", "selective", "full"), (0, 1, 2), (True, False),
                                  axes.get("split", (None, 1)), axes.get("cp", (1,))))
    rng = np.random.default_rng(seed)
    out: list[ParallelSpec] = []
    for i in rng.permutation(len(grid)).tolist():
        tp, pp, vp, mb, rc, zero, sp, split, cp = grid[i]
        first = None if split in (None, "balanced") or vp > 1 else \
            max(1, model.num_layers // pp - 1)
        # older trees have no layer_split: passed only when balanced
        balanced: dict[str, Any] = {"layer_split": "balanced"} if split == "balanced" else {}
        par = ParallelSpec(tp=tp, pp=pp, vp=vp, cp=cp, micro_batch=mb, global_batch=gb,
                           recompute=rc, zero_stage=zero, sequence_parallel=sp,
                           first_stage_layers=first, **balanced, **fixed)
        resolved, _ = check_structure(model, par, system)
        if resolved is not None:
            out.append(par)
        if len(out) == n:
            break
    return out


def worker(case: str, n: int, shared: bool = True) -> list[tuple[float, float, float]]:
    """(cold wall seconds, iteration seconds, cold CPU seconds) of the first ``n`` plans;
    ``shared=False`` also forgets the level schedules of earlier plans (a plan whose condensed
    DAG equals an earlier one's reuses its schedule otherwise)."""
    from simcore.engine import schedule
    levels_cache = getattr(schedule, "_LEVELS_CACHE", None)
    _, model, gpus, _, _, _ = CASES[case]
    system = SystemSpec(num_gpus=gpus)
    simulate_batch(GPT3, ParallelSpec(tp=8, pp=8, global_batch=64), [SystemSpec(num_gpus=64)])
    out = []
    for par in plans(case, n):
        _compiled.cache_clear()
        if not shared and levels_cache is not None:
            levels_cache.clear()
        c0, t0 = time.process_time(), time.perf_counter()
        res = simulate_batch(model, par, [system])
        out.append((time.perf_counter() - t0, float(res.iteration_time_s[0]),
                    time.process_time() - c0))
    return out


def _run(root: Path, case: str, n: int, shared: bool = True) -> list[tuple[float, ...]]:
    env = {**os.environ, "PYTHONPATH": str(root)}
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", case, "--plans", str(n),
           *([] if shared else ["--no-shared-schedules"])]
    done = subprocess.run(cmd, env=env, cwd=root, check=True, capture_output=True, text=True)
    return [tuple(x) for x in json.loads(done.stdout.strip().splitlines()[-1])]


def _stats(times: list[float]) -> tuple[float, float, float]:
    arr = np.asarray(times)
    return float(np.median(arr)), float(np.percentile(arr, 90)), float(arr.size / arr.sum())


def main() -> None:
    """Print one row per (case, code) and the ratios."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--plans", type=int, default=24)
    ap.add_argument("--base", type=Path, default=None, help="checkout of the base commit")
    ap.add_argument("--base-plans", type=int, default=6)
    ap.add_argument("--pieces-plans", type=int, default=8,
                    help="gpt3_overlap_blocks: also time its first N plans as pieces "
                         "(gpt3_overlap) in this tree and compare the iteration times")
    ap.add_argument("--case", default="all", choices=["all", *CASES])
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--no-shared-schedules", action="store_true",
                    help="forget level schedules between plans (every plan compiles its own)")
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.plans, not args.no_shared_schedules)))
        return
    here = Path(__file__).resolve().parents[1]
    print(f"{'case':<32}{'code':<6}{'plans':>6}{'median ms':>11}{'p90 ms':>9}{'plans/s':>9}"
          f"{'CPU med ms':>11}{'CPU p90':>9}{'ratio':>8}  same result")
    for case in CASES if args.case == "all" else [args.case]:
        title = CASES[case][0]
        new = _run(here, case, args.plans, not args.no_shared_schedules)
        print(_row(title, "new", new), flush=True)
        if case in SAME_PLANS_AS and args.pieces_plans:
            other, rtol = SAME_PLANS_AS[case]
            ref = _run(here, other, args.pieces_plans)
            rel = max(abs(a[1] - b[1]) / b[1] for a, b in zip(new, ref, strict=False))
            print(_row(CASES[other][0], "new", ref, new,
                       f"{'yes' if rel <= rtol else 'NO'}: largest relative difference "
                       f"{rel:.1e} (first {len(ref)} plans, as {other}; ratio of CPU medians)"),
                  flush=True)
        if args.base is None:
            continue
        base = _run(args.base, case, args.base_plans)
        same = all(a[1] == b[1] for a, b in zip(new, base, strict=False))
        print(_row(title, "base", base, new, f"{'yes' if same else 'NO'} (first {len(base)} "
                   "plans; ratio of CPU medians)"), flush=True)


def _row(title: str, code: str, times: list[tuple[float, ...]],
         new: list[tuple[float, ...]] | None = None, verdict: str = "") -> str:
    """One table row of ``times`` (wall, iteration, CPU per plan); against ``new`` (this
    tree's first plans as many), the ratio of CPU medians and ``verdict``."""
    med, p90, rate = _stats([t[0] for t in times])
    cmed, cp90, _ = _stats([t[2] for t in times])
    text = (f"{title:<32}{code:<6}{len(times):>6}{med * 1e3:>11.1f}{p90 * 1e3:>9.1f}"
            f"{rate:>9.2f}{cmed * 1e3:>11.1f}{cp90 * 1e3:>9.1f}")
    if new is not None:
        ncmed = float(np.median([t[2] for t in new[:len(times)]]))
        text += f"{cmed / ncmed:>7.0f}x  {verdict}"
    return text


if __name__ == "__main__":
    main()
