"""Benchmark of sweep planning on structural axes (parallelization grids), against the
per-combination Hydra composition in the same run.

``make_plan`` expands a sweep and composes, validates and builds every structural combination
(each distinct tp, pp, micro-batch, recompute, ZeRO, workload ...) before any evaluation. It
sets plain values in the base config's spec groups as plain dicts, or composes once per
distinct config group choice and applies the values to a copy of that config
(``search.sweep.plan._Derived``), and ``validate_config`` skips group contents it has found
valid. The baseline is the same ``make_plan`` with all of that turned off (``_Derived``
returning None, so ``_combo`` composes each combination through Hydra, and the validation memo
and the schemas' OmegaConf forms cleared before every full check): the code path before these
changes.

Each timed plan starts with an empty validation memo, as a fresh ``simsweep sweep`` does; the
process has composed once before (Hydra's and the config's imports are not timed).
Usage: ``python scripts/bench_plan.py [--repeats R]``.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from _bench_util import load_average, print_table

CONF = Path(__file__).resolve().parents[1] / "conf"
GPT3 = ["workload=gpt3_175b", "system=dgx_a100_80g", "system.num_gpus=1024",
        "parallel.global_batch=1536"]
CASES = {
    "default sweep (conf/sweep/default.yaml)": [],
    "GPT-3 175B / 1,024 GPUs: tp x pp x micro-batch": [
        *GPT3, "parallel.tp=1,2,4,8", "parallel.pp=1,2,4,8,16", "parallel.micro_batch=1,2,4"],
    "same x ZeRO 0,1 x recompute none,full x 3 scale-out bandwidths": [
        *GPT3, "parallel.tp=1,2,4,8", "parallel.pp=1,2,4,8,16", "parallel.micro_batch=1,2,4",
        "parallel.zero_stage=0,1", "parallel.recompute=none,full",
        "system.scaleout.bandwidth_GBps=50,100,200"],
    "2 workloads x tp x micro-batch x recompute (config group axis)": [
        "system.num_gpus=64", "workload=gpt_1b,gpt_tiny", "parallel.tp=1,2,4,8",
        "parallel.micro_batch=1,2,4", "parallel.recompute=none,full"],
}


@contextmanager
def per_combination_composition() -> Iterator[None]:
    """The baseline: every combination composed through Hydra and fully validated."""
    from search.config import schema
    from search.sweep import plan

    derive, validate = plan._Derived.__call__, schema.validate_config

    def validate_all(cfg: object, groups: object = None) -> None:
        schema._valid.clear()
        schema._STRUCTURED.clear()  # each schema's OmegaConf form made per check, as before
        validate(cfg)

    plan._Derived.__call__ = lambda self, extra: None  # type: ignore[method-assign]
    schema.validate_config = validate_all
    plan.validate_config = validate_all
    try:
        yield
    finally:
        plan._Derived.__call__ = derive  # type: ignore[method-assign]
        schema.validate_config = plan.validate_config = validate


def _time_plan(overrides: list[str], out: str) -> tuple[float, int, int]:
    from search.config import schema
    from search.config.compose import compose_session
    from search.sweep.plan import make_plan

    schema._valid.clear()
    compose, options = compose_session(CONF)
    t0 = time.perf_counter()
    plan = make_plan(compose, options, [*overrides, f"sweep.output_dir={out}"])
    return time.perf_counter() - t0, plan.num_points, len(plan.combos)


def main() -> None:
    """Run the benchmark and print its table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3, help="timed plans per case and side")
    args = ap.parse_args()
    out = tempfile.mkdtemp(prefix="bench_plan_")
    _time_plan([], out)  # imports, Hydra's first composition
    load0 = load_average()
    rows = []
    for label, overrides in CASES.items():
        new, old = [], []
        for _ in range(args.repeats):  # alternating, so drift falls on both sides
            wall, points, combos = _time_plan(overrides, out)
            new.append(wall)
            with per_combination_composition():
                old.append(_time_plan(overrides, out)[0])
        n, o = statistics.median(new), statistics.median(old)
        rows.append((label, f"{points:,}", f"{combos:,}", f"{o:.2f}", f"{o / combos * 1e3:.0f}",
                     f"{n:.2f}", f"{n / combos * 1e3:.1f}", f"{o / n:.1f}x"))
    head = ("sweep", "points", "structural combinations", "per-combination composition s",
            "ms per combination", "make_plan s", "ms per combination", "speed-up")
    print(f"medians of {args.repeats} alternating runs per side")
    print_table(head, rows, load0)
    import shutil

    shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()
