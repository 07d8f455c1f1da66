"""``simsweep search [--config-dir DIR] [overrides]``: Optuna co-design search, batched on Ray.

The search space is ``search.space`` (a conf/search file, or overrides such as
``'search.space.parallel.tp=choice(1,2,4,8)'``); sweep-style overrides on the command line
(``parallel.tp=choice(1,2,4,8)``, ``system.scaleout.bandwidth_GBps=interval(25,400)``) are
added to it, as with Hydra's Optuna sweeper; a plain value (``parallel.tp=4``) of a key the
space searches fixes it (the dimension is dropped, and the header says so), as in a sweep. A config group's choice is a dimension too
(``'system=choice(dgx_h100_80g,dgx_b200)'``: which preset, composed once per choice;
:mod:`search.study.groups`). ``'search.derived.parallel.dp=...'`` adds a derived value. With no
value dimension the parallelization of the workload on the system is searched:

    simsweep search workload=gpt3_175b system=dgx_h100_80g system.num_gpus=1024 search.n_trials=40
    simsweep search search=bandwidth_cost_70b          # an example study from conf/search/
    simsweep search search=... search.resume=true      # continue a killed search

Results: ``<search.output_dir>/<study>/results.parquet`` beside the study storage, and MLflow
(parent run per study, child run per trial, plots). See README "Co-design search".
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, suppress
from typing import Any

from search.commands.usage import overlap_blocks_note, print_help, wants_help
from simcore.errors import InputError

__all__ = ["main", "split_search_overrides"]

_SPACE, _DERIVED = "search.space.", "search.derived."


def split_search_overrides(args: list[str]) -> tuple[list[str], dict[str, str], dict[str, str]]:
    """(plain overrides, space entries, derived entries) from command-line overrides."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create()
    plain: list[str] = []
    space: dict[str, str] = {}
    derived: dict[str, str] = {}
    for arg in args:
        key, sep, value = arg.lstrip("+").partition("=")
        if not sep:
            raise InputError("override", arg, "must be key=value")
        value = value.strip().strip("'\"") if key.startswith(("search.space.",
                                                               "search.derived.")) else value
        if key.startswith(_SPACE):
            space[key[len(_SPACE):]] = value
        elif key.startswith(_DERIVED):
            derived[key[len(_DERIVED):]] = value
        elif "/" not in key and _is_sweep(parser, arg):  # a value, or a config group (no dot)
            space[key] = value
        else:
            plain.append(arg)
    return plain, space, derived


def _is_sweep(parser: Any, arg: str) -> bool:
    try:
        return bool(parser.parse_override(arg).is_sweep_override())
    except Exception:  # noqa: BLE001 - not parseable as a sweep: let compose report it
        return False


#: trials of the best set (a Pareto front) printed at the end of a search
BEST_SHOWN = 20


def _print_best(setup: Any, outcome: Any) -> None:
    names = [o.name for o in setup.objectives]
    label = "best trial" if len(names) == 1 else f"Pareto front ({len(outcome.best)} trials)"
    print(f"{label} (feasible only), objectives: {', '.join(names)}")
    for trial in outcome.best[:BEST_SHOWN]:
        values = ", ".join(f"{n}={v:.6g}" for n, v in zip(names, trial.values, strict=True))
        params = " ".join(f"{k}={v}" for k, v in trial.params.items())
        print(f"  #{trial.number}: {values}  |  {params}")
    if len(outcome.best) > BEST_SHOWN:
        print(f"  ... and {len(outcome.best) - BEST_SHOWN} more on the front, not shown "
              "(all: best_trials.json of the MLflow parent run; every trial: the results table)")
    if not outcome.best:
        print("  (no feasible trial yet: widen the space or add trials)")


_OPTIONS = [
    ("--config-dir DIR", "a conf/ folder to compose from (default: the project's conf/)"),
    ("search=NAME", "a study file conf/search/NAME.yaml (e.g. bandwidth_cost_70b)"),
    ("KEY=EXPR", "add KEY to the space: choice(1,2,4) | interval(a,b) | tag(log, interval(a,b))"),
    ("KEY=VALUE", "fix KEY (a searched key leaves the space)"),
    ("search.n_trials=N", "trials in the study in all"),
    ("search.objectives=[A,B]", "one objective, or several for a Pareto front"),
    ("search.sampler=NAME", "auto | tpe | cmaes | random | grid | gp | qmc | nsga2 | nsga3"),
    ("search.resume=true", "continue the study of this name"),
    ("search.in_process=true", "evaluate in this process, without Ray"),
    ("tracking.enabled=false", "no MLflow (the study storage keeps every trial)"),
    ("tracking.uri=URI", "MLflow store or server (default .simsweep/mlflow.db)"),
]


def _searches_piece_overlap(cfg: Any, dimensions: Mapping[str, Any]) -> bool:
    """Whether trials may have TP overlap, CP rings or chunked all-to-alls costed as pieces: a
    searched ``parallel.tp_comm_overlap``, ``parallel.cp`` or ``parallel.ep_overlap_chunks``,
    or one set in the config, with ``parallel.overlap_blocks`` false."""
    parallel = cfg.get("parallel") or {}
    if bool(parallel.get("overlap_blocks", False)):
        return False
    searched = {"parallel.tp_comm_overlap", "parallel.cp",
                "parallel.ep_overlap_chunks"} & set(dimensions)
    return bool(searched) or bool(parallel.get("tp_comm_overlap", False)) \
        or int(parallel.get("cp", 1) or 1) > 1 \
        or int(parallel.get("ep_overlap_chunks", 1) or 1) > 1


def _end_parent(tracking: Any | None, status: str) -> None:
    """End the study's MLflow parent run with ``status`` (FAILED, KILLED) when the search stops
    on an error or an interrupt, instead of leaving it RUNNING; a resumed search reopens it
    and ends it FINISHED. Best effort: the error being raised is the one to report."""
    parent = getattr(tracking, "parent_id", None)
    if tracking is None or parent is None:
        return
    with suppress(Exception):  # the store may be the thing that failed
        tracking.tracker.client.set_terminated(parent, status)


def main(argv: list[str]) -> int:
    """Run (or resume) a search; print the best trials and where the results are."""
    if wants_help(argv):
        return print_help("simsweep search", __doc__ or "", _OPTIONS)
    from search.config.compose import compose_session, split_config_dir
    from search.config.schema import validate_config
    from search.study.driver import prepare_search, run_search, study_runner
    from search.study.groups import GroupComposer
    from search.tracking.client import quiet_mlflow_logs
    from search.tracking.study import StudyTracking

    quiet_mlflow_logs()
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)  # this command prints its own summary
    conf, args = split_config_dir(argv)
    plain, space, derived = split_search_overrides(args)
    compose, options = compose_session(conf)
    cfg = compose(plain)
    validate_config(cfg)
    if "search" not in cfg:
        raise InputError("search", None, "the config has no search group (conf/search/)")
    if cfg.search.get("output_dir"):
        from search.run.tables import check_output_folder

        check_output_folder("search.output_dir", str(cfg.search.output_dir))
    groups = GroupComposer(compose, options, tuple(plain))  # config-group dimensions, if any
    from search.config.compose import split_value_overrides

    fixed = [t.lstrip("+").partition("=")[0] for t in split_value_overrides(plain)[1]]
    setup = prepare_search(cfg, None, space, derived, groups,  # every input checked before Ray
                           fixed_keys=fixed)
    if not cfg.search.get("in_process", False) and "ray" in cfg:
        import ray  # noqa: F401 - imported here, not beside MLflow's import on the thread
    # the MLflow session (import, store, parent run) opens on a thread while Ray starts; the
    # Ray pool is released (shut down) while the table and plots are written
    with ThreadPoolExecutor(1, thread_name_prefix="simsweep-tracking") as opener, \
            ExitStack() as pool_scope:
        opening = opener.submit(StudyTracking, cfg, setup.study_name, setup.output_dir,
                                setup.objectives, list(setup.space.distributions),
                                list(setup.space.derived)) if cfg.tracking.get("enabled", False) else None
        tracking = None
        try:
            runner = pool_scope.enter_context(study_runner(cfg))
            setup.evaluator.runner = runner
            print(f"search {setup.study_name}: {len(setup.space.distributions)} dimension(s) "
                  f"({', '.join(setup.space.distributions)}), sampler {cfg.search.sampler}, "
                  f"{setup.n_trials} trials in batches of {setup.batch_size}", flush=True)
            if setup.fixed:
                print("  fixed on the command line, not searched: " + ", ".join(
                    f"{k}={v}" for k, v in setup.fixed.items()), flush=True)
            if _searches_piece_overlap(cfg, setup.space.distributions):
                print(overlap_blocks_note("the space searches TP overlap, CP or chunked "
                                          "all-to-alls,", "a new plan ~20-160x slower"), flush=True)
            tracking = opening.result() if opening is not None else None
            outcome = run_search(setup, tracking, release=pool_scope.close)
        except BaseException as err:
            interrupted = isinstance(err, KeyboardInterrupt)
            if tracking is None and opening is not None and opening.done() \
                    and opening.exception() is None:
                tracking = opening.result()
            _end_parent(tracking, "KILLED" if interrupted else "FAILED")
            if interrupted:
                print(f"simsweep search: the study keeps every trial told so far "
                      f"({setup.output_dir}); continue it with the same command and "
                      f"search.resume=true", file=sys.stderr, flush=True)
            raise
    stats = outcome.stats
    print(f"evaluated {stats.n_evaluated} trial(s) ({stats.n_recovered} recovered from a killed "
          f"driver, {stats.n_infeasible} infeasible, {stats.n_failed} failed: config not built) "
          f"in {stats.total_s:.1f} s "
          f"(sampler {stats.sampler_s:.1f} s, evaluation {stats.evaluate_s:.1f} s, "
          f"logging {stats.logging_s:.1f} s)")
    _print_best(setup, outcome)
    print(f"results: {outcome.table_path}")
    if outcome.parent_run_id:
        from search.tracking.client import FEASIBLE_CLAUSE, ui_link

        uri = str(cfg.tracking.get("uri") or "")
        base = uri if uri.startswith("http") else None
        link = ui_link(base or "http://127.0.0.1:5000", tracking.tracker.experiment_id
                       if tracking is not None else None, view=outcome.parent_run_id)
        print(f"MLflow: parent run {outcome.parent_run_id}")
        print(f"browse the trials: {'' if base else 'simsweep ui, then open '}{link}\n"
              f"  (the feasible trials; the infeasible ones: {FEASIBLE_CLAUSE} -> = 0 in its "
              "search box)")
    elif tracking is not None:
        print(f"MLflow not updated ({outcome.tracking_error}); the study storage in "
              f"{setup.output_dir} holds every trial; rerun with search.resume=true to log them")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
