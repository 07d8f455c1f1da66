"""``simsweep sweep [--config-dir DIR] [overrides]``: a grid or random sweep on Ray, logged to MLflow.

Overrides use Hydra's grammar; sweep axes may be given on the command line
(``parallel.tp=1,2,4,8 system.scaleout.bandwidth_GBps=range(25,401,25)``) or in a sweep file
(``sweep=<name>`` selects ``conf/sweep/<name>.yaml``; its ``axes`` map keys to expressions).
See :mod:`search.sweep.driver` for the pipeline and README "Sweeps" for examples.
"""

from __future__ import annotations

import sys

from search.commands.usage import overlap_blocks_note, print_help, wants_help

__all__ = ["PIECE_NOTE_MIN_POINTS", "main"]

#: points on piece-costed TP-overlap / CP plans from which a sweep prints a note
PIECE_NOTE_MIN_POINTS = 1000


_OPTIONS = [
    ("--config-dir DIR", "a conf/ folder to compose from (default: the project's conf/)"),
    ("sweep=NAME", "sweep file conf/sweep/NAME.yaml (default: default.yaml, see its header)"),
    ("KEY=EXPR", "a sweep axis: 1,2,4 | range(25,401,25) | choice(...) | interval(a,b) (random, sobol)"),
    ("KEY=VALUE", "any config value, e.g. workload=gpt3_175b system.num_gpus=1024"),
    ("sweep.mode=random", "random sampling; sweep.num_points=N points, sweep.seed=S"),
    ("sweep.mode=sobol", "a scrambled Sobol' design of sweep.num_points (best a power of 2)"),
    ("sweep.objective=KEY", "the result column ranking the best points (throughput and MFU "
     "maximized, the others minimized; sweep.direction=minimize|maximize overrides)"),
    ("sweep.output_dir=DIR", "the output folder (default outputs/sweep-<name>-<UTC time>)"),
    ("sweep.resume=true", "continue the sweep in sweep.output_dir; nothing is recomputed"),
    ("tracking.enabled=false", "no MLflow (results still in the output folder)"),
    ("tracking.uri=URI", "MLflow store or server (default .simsweep/mlflow.db)"),
    ("ray.num_workers=N", "Ray actors evaluating batches (ray.address=auto joins a cluster)"),
    ("sweep.in_process=true", "evaluate in this process, without Ray (small sweeps)"),
]

def main(argv: list[str]) -> int:
    """Run a sweep; print its summary and where its results are."""
    if wants_help(argv):
        return print_help("simsweep sweep", __doc__ or "", _OPTIONS)
    from search.config.compose import compose_session, split_config_dir
    from search.sweep.driver import run_sweep
    from search.sweep.plan import make_plan
    from search.tracking.client import quiet_mlflow_logs

    quiet_mlflow_logs()

    conf, overrides = split_config_dir(argv)
    compose, options = compose_session(conf)
    plan = make_plan(compose, options, overrides)
    cfg = plan.base_cfg
    print(f"sweep {cfg.sweep.name}: {plan.num_points} points, {len(plan.combos)} structure "
          f"group(s), axes: {', '.join(a.key for a in plan.axes) or '(none)'}", flush=True)
    print(plan.fixed_note(), flush=True)
    slow = plan.piece_overlap_points()
    if slow >= PIECE_NOTE_MIN_POINTS:
        print(overlap_blocks_note(f"{slow} points are on plans with TP overlap, CP or chunked "
                                  "all-to-alls,", "~40-1,000x slower per point"), flush=True)
    try:
        outcome = run_sweep(plan, cfg)
    except KeyboardInterrupt:
        print("\ninterrupted: finished batches are on disk; resume with "
              "sweep.resume=true sweep.output_dir=<the output folder>", file=sys.stderr)
        return 130
    print(outcome.summary_text)
    rate = outcome.computed / outcome.eval_s if outcome.eval_s else 0.0
    print(f"evaluated {outcome.computed} points ({outcome.skipped} already on disk) in "
          f"{outcome.eval_s:.1f} s ({rate:,.1f} points/s); end to end {outcome.wall_s:.1f} s: "
          f"start-up {outcome.startup_s:.1f} s"
          f"{'' if cfg.sweep.get('in_process', False) else ' (Ray workers, first structure)'}, finish "
          f"{outcome.finish_s:.1f} s (table, plots, MLflow; MLflow calls {outcome.log_s:.1f} s, "
          f"partly beside the start-up)"
          + (f", waiting for the MLflow store to open {outcome.tracking_wait_s:.1f} s"
             if outcome.tracking_wait_s >= 0.05 else "")
          + f"; retries: {outcome.retries}")
    print(f"results: {outcome.output_dir / 'results.parquet'}")
    if outcome.tracking_ok and cfg.tracking.enabled:
        where = "" if cfg.tracking.uri is None else f" (tracking server {cfg.tracking.uri})"
        print(f"MLflow: experiment '{cfg.tracking.experiment or 'sweep-' + str(cfg.sweep.name)}',"
              f" parent run {outcome.parent_run_id}{where}")
        from search.tracking.client import FEASIBLE_CLAUSE, ui_link

        base = cfg.tracking.uri if str(cfg.tracking.uri or "").startswith("http") else None
        link = ui_link(base or "http://127.0.0.1:5000", outcome.experiment_id,
                       view=outcome.parent_run_id)
        print(f"browse the runs: {'' if base else 'simsweep ui, then open '}{link}\n"
              f"  (the feasible points; the infeasible ones: {FEASIBLE_CLAUSE} -> = 0 in its "
              "search box)")
    elif cfg.tracking.enabled:
        print(f"MLflow not updated ({outcome.tracking_error}); results are safe on disk. "
              f"Log them later with:  simsweep sync {outcome.output_dir}")
    return 0
