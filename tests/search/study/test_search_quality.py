"""Search quality against enumeration (small version of scripts/bench_search.py).

A 972-point space (gpt_tiny on 16 GPUs: tp, pp, micro-batch, recompute, NIC and NVLink
bandwidth) is enumerated with the real simulator; a search with 10% of the points must reach
the feasible optimum within 2% (median of 3 seeds) and its two-objective front must cover the
true front (hypervolume ratio).
"""

from __future__ import annotations

import statistics
import warnings
from pathlib import Path

import optuna
import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from search.run.metrics import cost_spec_from
from search.study.evaluate import DesignEvaluator, in_process_runner
from search.study.objectives import resolve_objectives
from search.study.quality import enumerate_space, score_search
from search.study.space import parse_space

optuna.logging.set_verbosity(optuna.logging.WARNING)
CONF = Path(__file__).resolve().parents[3] / "conf"
SPACE = parse_space({
    "parallel.tp": "choice(1,2,4)", "parallel.pp": "choice(1,2,4)",
    "parallel.micro_batch": "choice(1,2,4)", "parallel.recompute": "choice(none,selective,full)",
    "system.scaleout.bandwidth_GBps": "choice(12.5,25,50,100)",
    "system.scaleup.bandwidth_GBps": "choice(150,300,600)",
})


@pytest.fixture(scope="module")
def enumerated() -> DesignEvaluator:
    """An evaluator that has simulated every point of SPACE once (iteration time)."""
    with initialize_config_dir(config_dir=str(CONF), version_base=None):
        cfg = compose("config", overrides=["workload=gpt_tiny", "system.num_gpus=16",
                                           "parallel.global_batch=32"])
    cost = cost_spec_from(OmegaConf.to_container(cfg.search.cost, resolve=True))  # type: ignore[arg-type]
    ev = DesignEvaluator(cfg, SPACE, resolve_objectives(["iteration_time_s"]), cost, 3e11,
                         in_process_runner)
    enumerate_space(SPACE, ev)
    return ev


@pytest.mark.slow
def test_tpe_reaches_optimum_within_2pct_on_10pct_budget(enumerated: DesignEvaluator) -> None:
    ev = enumerated
    simulated = ev.n_simulated
    truth = enumerate_space(SPACE, ev)
    assert ev.n_simulated == simulated  # the second pass is answered from the cache
    assert len(truth.points) == 972 and truth.feasible.sum() > 0
    budget = len(truth.points) // 10
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        scores = [score_search(SPACE, ev, truth, sampler="tpe", seed=s, budget=budget,
                               batch_size=8, n_startup_trials=5) for s in range(3)]
    assert all(s.trials == budget for s in scores)
    assert statistics.median(s.gap for s in scores) <= 0.02


@pytest.mark.slow
def test_multi_objective_front_covers_true_front(enumerated: DesignEvaluator) -> None:
    ev = enumerated.with_objectives(resolve_objectives(["iteration_time_s", "capex_usd"]))
    truth = enumerate_space(SPACE, ev)
    assert ev.n_simulated == 0  # reuses the single-objective enumeration
    assert len(truth.front) >= 2
    budget = len(truth.points) // 10
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        scores = [score_search(SPACE, ev, truth, sampler="tpe", seed=s, budget=budget,
                               batch_size=8, n_startup_trials=5) for s in range(3)]
    ratios = [s.hv_ratio for s in scores]
    assert all(r <= 1.0 + 1e-9 for r in ratios)  # nothing beats the true front
    assert statistics.median(ratios) >= 0.98
