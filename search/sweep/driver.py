"""The sweep driver: plan -> batches -> Ray actors -> parquet -> MLflow.

Model (DESIGN.md "User-facing contract" ``simsweep sweep`` and "Reliability"):
1. :func:`search.plan.make_plan` expands and validates every point before any work;
2. points are grouped by graph structure and cut into batches of ``sweep.batch_size`` points, or,
   with ``auto`` (the default), of guided sizes paced by each group's measured seconds per
   point (:class:`search.sweep.pacing.GroupPace`; :func:`guided_batch_size` counts points);
3. a :class:`search.run.workers.WorkerPool` evaluates them (or, with ``sweep.in_process=true``,
   a :class:`search.run.local_pool.LocalPool` in this process, without Ray); each finished batch
   is appended to the parquet table (:class:`search.tables.ResultsStore`) and queued for MLflow
   child runs;
4. the table is consolidated, summarized, and published to the parent MLflow run.

Resume (``sweep.resume=true``, same ``sweep.output_dir``): the folder's ``sweep.json`` must hold
the same sweep hash; points already on disk are not recomputed and MLflow runs are found by their
tags, so none is duplicated. An unreachable tracking server only defers logging to
``simsweep sync``. The tracking session (MLflow's import, store and parent run) opens on a
thread while the Ray pool starts and every worker builds the first batch's structure on one of
its points (:meth:`~search.run.workers.WorkerPool.warm`); evaluation does not wait for it:
batches that finish before it is open are queued for it (``_TrackingFeed``). The same thread
then imports the plotting libraries (when the parent run gets plots), so the final step does
not pay for them after the last batch. The final step runs on a thread while the main thread
closes the pool and stops the Ray this sweep started (``ray.shutdown`` spends ~1.3 s waiting for
Ray's processes to exit, ~0.04 s of CPU).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack
from typing import Any

import numpy as np
import polars as pl
from omegaconf import DictConfig, OmegaConf

from search.run.batch import BatchOutput, SpecBatch
from search.run.metrics import cost_spec_from
from search.run.tables import ResultsStore
from search.sweep.finish import finish_sweep, start_tracking
from search.sweep.output import SweepOutcome, prepare_output
from search.sweep.pacing import GroupPace
from search.sweep.plan import SweepPlan
from search.sweep.plots import preload_plot_libraries

__all__ = ["AUTO_BATCH_MAX", "AUTO_BATCH_MIN", "SweepOutcome", "guided_batch_size", "iter_batches",
           "prepare_output", "run_sweep"]

#: bounds of a guided batch, in design points. The floor is the fixed size sweeps used before.
#: Above ~2,048 points a batch no longer evaluates faster (GPT-3 175B / 1,024 GPUs, one process,
#: one BLAS thread: ~15,600 points/s in batches of 64, ~26,400 in 256, ~35,000 in 1,024,
#: 34,600-43,200 in 2,048 to 8,192, within noise of each other), and the engine's tiles keep
#: its memory flat (max RSS 122 MiB at 2,048, 129 MiB at 8,192; a one-off script, 49,152
#: points per size, two runs each). What a larger batch still
#: saves is the driver's work per batch (Ray's submit, wait and get, the frame): the driver of
#: the 112,896-point GPT-3 grid ingests ~718,000 points per CPU second with a ceiling of 8,192
#: against ~449,000 with 2,048 (``scripts/bench_sweep.py``), the workers one driver keeps fed.
#: A sweep still ends on small batches: the guided size shrinks with what remains.
AUTO_BATCH_MIN, AUTO_BATCH_MAX = 64, 8192


def guided_batch_size(remaining: int, workers: int) -> int:
    """Points in the next batch when ``remaining`` points are still to be handed out to
    ``workers`` actors: guided self-scheduling (Polychronopoulos and Kuck, IEEE Trans. Computers
    36(12), 1987), a batch takes 1/(2 x workers) of what remains (two batches in flight per
    actor), within [:data:`AUTO_BATCH_MIN`, :data:`AUTO_BATCH_MAX`]. Large batches while much
    remains, then shrinking ones, so the workers run out of work within a small batch of each
    other instead of one waiting for another's full-size last batch."""
    share = -(-remaining // (2 * max(workers, 1)))
    return min(AUTO_BATCH_MAX, max(AUTO_BATCH_MIN, share))


def iter_batches(plan: SweepPlan, batch_size: int | None, done: np.ndarray,
                 cost: Any = None, workers: int = 1, pace: GroupPace | None = None
                 ) -> Iterator[SpecBatch]:
    """Batches of not-yet-done points, one structure group at a time (ids ascending).

    ``batch_size`` None sizes each batch by :func:`guided_batch_size` over the points of the
    whole sweep still to be handed out (a batch never spans two structure groups), or, with
    ``pace``, by the groups' measured seconds per point (:class:`GroupPace`, which the caller
    feeds with the finished batches: sizes then follow what has finished by the time each
    batch is drawn)."""
    todo = np.ones(plan.num_points, dtype=bool)
    todo[done[done < plan.num_points]] = False
    remaining = int(np.count_nonzero(todo))
    keys = [c.batch_key for c in plan.combos]
    if pace is not None:
        per_combo = np.bincount(plan.combo_of[todo], minlength=len(keys))
        left: dict[str, int] = {}
        for key, n in zip(keys, per_combo.tolist(), strict=True):
            left[key] = left.get(key, 0) + n
        pace.start(left)
    batch_id = 0
    for key in dict.fromkeys(keys):
        members = [i for i, k in enumerate(keys) if k == key]
        ids = np.flatnonzero(np.isin(plan.combo_of, members) & todo)
        combo = plan.combos[members[0]]
        local = {m: j for j, m in enumerate(members)}
        bases = tuple(plan.combos[m].system for m in members)
        start = 0
        while start < ids.shape[0]:
            if batch_size is not None:
                size = batch_size
            elif pace is not None:
                size = pace.take(key, batch_id)
            else:
                size = guided_batch_size(remaining, workers)
            chunk = ids[start:start + size]
            start += chunk.shape[0]
            remaining -= chunk.shape[0]
            yield SpecBatch(
                batch_id=batch_id, group=key, point_ids=chunk, model=combo.model,
                parallel=combo.parallel, bases=bases,
                base_index=np.array([local[c] for c in plan.combo_of[chunk].tolist()],
                                    dtype=np.int64),
                overrides={path: plan.columns[k][chunk] for k, path in plan.hardware.items()},
                cost=cost, fidelity=combo.fidelity)
            batch_id += 1


def run_sweep(plan: SweepPlan, cfg: DictConfig,
              on_batch: Callable[[BatchOutput], None] | None = None) -> SweepOutcome:
    """Evaluate every point of ``plan`` not yet on disk; publish; return the outcome."""
    t0 = time.perf_counter()
    out, manifest = prepare_output(plan, cfg)
    store = ResultsStore(out, float(cfg.sweep.flush_interval_s))
    done = store.done_ids()
    outcome = SweepOutcome(out, plan.num_points, skipped=int(np.unique(done).shape[0]))
    in_process = bool(cfg.sweep.get("in_process", False))
    if not in_process:
        import ray  # noqa: F401 - imported here, not beside MLflow's import on the thread

    with ExitStack() as pool_scope:
        with ThreadPoolExecutor(1, thread_name_prefix="simsweep-tracking") as opener:
            tracking = opener.submit(start_tracking, cfg, manifest, out, plan.num_points,
                                     plan.param_keys, outcome)
            if cfg.tracking.enabled and cfg.tracking.plots:  # imported while the pool evaluates
                opener.submit(_preload_plots, tracking)
            if outcome.skipped < plan.num_points:
                from search.run.local_pool import local_pool
                from search.run.workers import ray_pool

                pool = pool_scope.enter_context(local_pool() if in_process else ray_pool(cfg.ray))
                _evaluate(plan, cfg, pool, done, store, tracking, outcome, on_batch, t0)
            else:
                store.flush()
            track = tracking.result()
        release_pool = pool_scope.pop_all()  # on success: closed beside the finish, below
    t_finish = time.perf_counter()
    with ThreadPoolExecutor(1, thread_name_prefix="simsweep-finish") as finisher:
        finishing = finisher.submit(finish_sweep, cfg, out, manifest, store, track, outcome)
        release_pool.close()  # the actors, and a Ray this sweep started: ~1.3 s of waiting for
        finishing.result()  # Ray's processes to exit, spent while the table and plots are made
    outcome.write_s = store.write_s
    outcome.wall_s = time.perf_counter() - t0
    outcome.finish_s = time.perf_counter() - t_finish
    return outcome


def _preload_plots(tracking: Future[Any]) -> None:
    """Import the plotting libraries when the parent run is open (it is the only one to get
    plots); runs on the tracking thread after ``tracking`` (queued behind it)."""
    if tracking.exception() is None and tracking.result() is not None:
        preload_plot_libraries()


def batch_size_of(sweep: Mapping[str, Any] | DictConfig) -> int | None:
    """``sweep.batch_size`` as :func:`iter_batches` takes it: points per batch, None for
    ``auto`` (validated by :func:`search.config.schema.validate_config`)."""
    value = sweep.get("batch_size", "auto")
    return None if value == "auto" else int(value)


def cost_spec(cfg: DictConfig) -> Any:
    """The cluster cost spec of ``search.cost`` (None when the config has none)."""
    node = OmegaConf.select(cfg, "search.cost")
    if node is None:
        return None
    return cost_spec_from(OmegaConf.to_container(node, resolve=True))  # type: ignore[arg-type]


def _evaluate(plan: SweepPlan, cfg: DictConfig, pool: Any, done: np.ndarray,
              store: ResultsStore, tracking: Future[Any], outcome: SweepOutcome,
              on_batch: Callable[[BatchOutput], None] | None, t_start: float) -> None:
    """Run the remaining batches on ``pool`` (a :class:`~search.run.workers.WorkerPool`);
    append each result to disk and MLflow (``tracking``: the session being opened beside the
    pool's start; ``t_start``: when the sweep started, for ``outcome.startup_s``)."""
    from search.run.tables import batch_frame

    try:
        # one structure group: every point costs the same, sizes by points (no probes)
        groups = len({c.batch_key for c in plan.combos})
        pace = GroupPace(len(pool.actors), AUTO_BATCH_MIN, AUTO_BATCH_MAX) if groups > 1 else None
        batches = iter_batches(plan, batch_size_of(cfg.sweep), done, cost_spec(cfg),
                               len(pool.actors), pace)
        first = next(batches, None)
        if first is not None:  # every worker builds the first structure meanwhile
            pool.warm(first)
            batches = itertools.chain([first], batches)
        pool.wait_ready()
        feed = _TrackingFeed(tracking)
        t_eval, cpu_eval = time.perf_counter(), time.process_time()
        outcome.startup_s = t_eval - t_start
        bar = _progress(cfg, plan.num_points - outcome.skipped)
        params = plan.param_columns
        for res in pool.imap_unordered(batches):  # draws each batch when a slot is free
            if pace is not None:
                pace.observe(res.batch_id, res.point_ids.shape[0], res.elapsed_s)
            axes = {k: v[res.point_ids] for k, v in params.items()}
            hashes = [plan.point_hash[i] for i in res.point_ids.tolist()]
            frame = batch_frame(res.point_ids, hashes, axes, res.columns, res.batch_id,
                                res.node_id, time.time() - res.elapsed_s, res.elapsed_s)
            store.add(frame)
            feed.submit(frame)
            outcome.computed += frame.height
            if bar is not None:
                bar.update(frame.height)
            if on_batch is not None:
                on_batch(res)
        if bar is not None:
            bar.close()
        outcome.eval_s = time.perf_counter() - t_eval
        outcome.driver_cpu_s = time.process_time() - cpu_eval
        t_wait = time.perf_counter()  # a short sweep can outrun a new MLflow store's creation
        feed.close()
        outcome.tracking_wait_s = time.perf_counter() - t_wait
    finally:
        store.flush()
        outcome.retries = pool.retries
        outcome.batches_per_node = dict(pool.batches_per_node)


class _TrackingFeed:
    """Finished batches on their way to the tracking session that opens beside the pool's
    start: batches that finish before it is open wait here, so evaluation never waits for
    MLflow (a new SQLite store takes seconds to create its tables)."""

    def __init__(self, opening: Future[Any]) -> None:
        self._opening = opening
        self._waiting: list[pl.DataFrame] = []
        self._open = False
        self._live: Any = None

    def submit(self, frame: pl.DataFrame) -> None:
        """Pass ``frame`` on, or keep it until the session is open."""
        if not self._open and self._opening.done():
            self.close()
        if not self._open:
            self._waiting.append(frame)
        elif self._live is not None:
            self._live.submit(frame)

    def close(self) -> None:
        """Wait for the session and pass on every frame kept so far."""
        if not self._open:
            self._live, self._open = self._opening.result(), True
            waiting, self._waiting = self._waiting, []
            for frame in waiting:
                self.submit(frame)


def _progress(cfg: DictConfig, total: int) -> Any:
    if not cfg.sweep.progress or total <= 0:
        return None
    from tqdm import tqdm

    return tqdm(total=total, unit="pt", unit_scale=True, desc=f"sweep {cfg.sweep.name}",
                smoothing=0.1, dynamic_ncols=True)
