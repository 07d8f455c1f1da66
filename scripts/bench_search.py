"""Benchmark of ``simsweep search``: search quality against enumeration, and driver overhead.

1. Single objective: GPT-3 175B on 64 A100 80GB, global batch 64 (Korthikanti et al. 2022
   Table 3 setup: reference/peers-hardware-measurements.md B.3); a 324-point space (tp, pp,
   micro-batch, recompute, sequence parallelism, NIC bandwidth) enumerated with the real
   simulator through the search's own evaluator. Each sampler then gets 10% of the points;
   we report the median and worst relative gap of its best feasible iteration time to the true
   optimum over several seeds. Random search on the same budget is the baseline.
2. Two objectives (iteration time, capital cost): hypervolume of the found front over the true
   front's (normalized objectives, reference 1.1 x nadir), 10% budget.
3. Overhead: share of wall time in the sampler (ask + suggest + tell + storage, with the
   default buffered journal file) and in MLflow logging (child run per trial, SQLite store)
   for batch sizes 1, 16 and 256, on a cheap workload (gpt_tiny) so overhead is visible.

    PYTHONPATH=. python scripts/bench_search.py [--seeds 7] [--quick]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import optuna
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig, OmegaConf

from search.run.metrics import cost_spec_from
from search.study.evaluate import DesignEvaluator, in_process_runner
from search.study.objectives import resolve_objectives
from search.study.quality import enumerate_space, score_search
from search.study.space import SearchSpace, parse_space

CONF = Path(__file__).resolve().parents[1] / "conf"
SPACE = {
    "parallel.tp": "choice(2,4,8)",
    "parallel.pp": "choice(4,8,16)",
    "parallel.micro_batch": "choice(1,2)",
    "parallel.recompute": "choice(none,selective,full)",
    "parallel.sequence_parallel": "choice(true,false)",
    "system.scaleout.bandwidth_GBps": "choice(12.5,25,50)",
}
QUICK_SPACE = {
    "parallel.tp": "choice(1,2,4)", "parallel.pp": "choice(1,2,4)",
    "parallel.micro_batch": "choice(1,2,4)", "parallel.recompute": "choice(none,selective,full)",
    "system.scaleout.bandwidth_GBps": "choice(12.5,25,50,100)",
    "system.scaleup.bandwidth_GBps": "choice(150,300,600)",
}


def _cfg(*overrides: str) -> DictConfig:
    with initialize_config_dir(config_dir=str(CONF), version_base=None):
        return compose("config", overrides=list(overrides))


def _evaluator(cfg: DictConfig, space: SearchSpace, objectives: list[str]) -> DesignEvaluator:
    cost = cost_spec_from(OmegaConf.to_container(cfg.search.cost, resolve=True))  # type: ignore[arg-type]
    return DesignEvaluator(cfg, space, resolve_objectives(objectives), cost,
                           float(cfg.search.train_tokens), in_process_runner)


def quality(cfg: DictConfig, space_exprs: dict[str, str], seeds: int) -> None:
    space = parse_space(space_exprs)
    base = _evaluator(cfg, space, ["iteration_time_s"])
    t0 = time.perf_counter()
    truth = enumerate_space(space, base)
    print(f"enumerated {len(truth.points)} points ({base.n_batches} structure groups, "
          f"{int(truth.feasible.sum())} feasible) in {time.perf_counter() - t0:.1f} s")
    for objectives, samplers, budgets in (
            (["iteration_time_s"], ("tpe", "random"), (0.05, 0.10)),
            (["iteration_time_s", "capex_usd"], ("tpe", "nsga2", "random"), (0.10, 0.20))):
        ev = base.with_objectives(resolve_objectives(objectives))
        truth = enumerate_space(space, ev)  # every point is cached: no simulation
        n = len(truth.points)
        multi = len(objectives) > 1
        extra = f", true front {len(truth.front)} points" if multi else \
            f", optimum {truth.best:.4g}"
        print(f"\n{' + '.join(objectives)}{extra}")
        head = "HV ratio median / worst" if multi else "gap median / worst / within 2%"
        print(f"{'sampler':<8} {'batch':>5} {'trials':>6} {'distinct':>8}  {head}")
        for sampler in samplers:
            for share in budgets:
                budget = max(1, round(n * share))
                for batch in (1, 8):
                    _quality_row(space, ev, truth, sampler, budget, batch, seeds, multi)


def _quality_row(space: SearchSpace, ev: DesignEvaluator, truth: Any, sampler: str, budget: int,
                 batch: int, seeds: int, multi: bool) -> None:
    scores = [score_search(space, ev, truth, sampler=sampler, seed=s, budget=budget,
                           batch_size=batch, n_startup_trials=5, population_size=16)
              for s in range(seeds)]
    distinct = statistics.median(s.distinct for s in scores)
    if multi:
        ratios = [s.hv_ratio for s in scores]
        text = f"{statistics.median(ratios):.4f} / {min(ratios):.4f}"
    else:
        gaps = [s.gap for s in scores]
        within = sum(g <= 0.02 for g in gaps)
        text = f"{100 * statistics.median(gaps):.2f}% / {100 * max(gaps):.2f}% / {within}/{seeds}"
    print(f"{sampler:<8} {batch:>5} {budget:>6} {distinct:>8.0f}  {text}")


def overhead(n_trials: int) -> None:
    from search.study.driver import prepare_search, run_search
    from search.tracking.study import StudyTracking

    print(f"\noverhead: {n_trials} trials, gpt_tiny on 16 GPUs, TPE, buffered journal, "
          "MLflow SQLite child run per trial")
    print(f"{'batch':>5} {'wall s':>7} {'sampler':>8} {'evaluate':>9} {'logging':>8} "
          f"{'ms/trial sampler':>17} {'ms/trial logging':>17}")
    space = "choice(12.5,25,50,100)"
    for batch in (1, 16, 256):
        with tempfile.TemporaryDirectory() as tmp:
            cfg = _cfg("workload=gpt_tiny", "system.num_gpus=16", "parallel.global_batch=32",
                       f"search.output_dir={tmp}", f"search.n_trials={n_trials}",
                       f"search.batch_size={batch}", "search.log_plots=false",
                       f"tracking.uri=sqlite:///{tmp}/mlflow.db")
            setup = prepare_search(cfg, extra_space={
                "parallel.tp": "choice(1,2,4)", "parallel.pp": "choice(1,2,4)",
                "system.scaleout.bandwidth_GBps": space,
                "system.scaleup.bandwidth_GBps": "interval(100,900)"})
            tracking = StudyTracking(cfg, setup.study_name, setup.output_dir, setup.objectives)
            t0 = time.perf_counter()
            out = run_search(setup, tracking)
            wall = time.perf_counter() - t0
            s = out.stats
            print(f"{batch:>5} {wall:>7.1f} {100 * s.sampler_s / wall:>7.1f}% "
                  f"{100 * s.evaluate_s / wall:>8.1f}% {100 * s.logging_s / wall:>7.1f}% "
                  f"{1000 * s.sampler_s / n_trials:>17.2f} {1000 * s.logging_s / n_trials:>17.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="gpt_tiny space, 3 seeds")
    parser.add_argument("--overhead-trials", type=int, default=512)
    parser.add_argument("--only", choices=("quality", "overhead"), default=None)
    args = parser.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore")
    if args.only != "overhead":
        if args.quick:
            cfg = _cfg("workload=gpt_tiny", "system.num_gpus=16", "parallel.global_batch=32")
            quality(cfg, QUICK_SPACE, min(args.seeds, 3))
        else:
            cfg = _cfg("workload=gpt3_175b", "system=dgx_a100_80g", "system.num_gpus=64",
                       "parallel.global_batch=64")
            quality(cfg, SPACE, args.seeds)
    if args.only != "quality":
        overhead(args.overhead_trials if not args.quick else 64)


if __name__ == "__main__":
    main()
