"""Ray actor pool that evaluates batches of design points with the vectorized engine.

Model (DESIGN.md "The vectorized engine" and "Reliability"): a :class:`SpecBatch` is B design
points that share one graph structure (same model and parallelization), so one call of
``simcore.api.simulate_batch`` evaluates them as (B,) numpy vectors. Each actor is a long-lived
process: the engine's compiled-graph cache stays warm across batches, and the pool sends batches
of one structure group to the actor that last ran that group when it has a free slot.

Fault tolerance: an actor that dies mid-batch (killed process, lost node) is replaced by a fresh
actor and its in-flight batches are resubmitted, at most ``max_batch_retries`` times each; a
batch's result is delivered exactly once. An exception raised by the evaluation itself is a bug or
a bad input and stops the pool (it is not retried). Points whose spec cannot be built (a swept
value that breaks a cross-field rule) come back infeasible with reason ``invalid_spec: ...``.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "BatchOutput",
    "SpecBatch",
    "WorkerPool",
    "evaluate_batch",
    "init_ray",
    "materialize_systems",
]


@dataclass(frozen=True, eq=False)
class SpecBatch:
    """B design points sharing one graph structure.

    Attributes:
        batch_id: unique id within the run (for retries and bookkeeping).
        group: structure-group label (actor affinity keeps that group's graph cache warm).
        point_ids: (B,) int64 ids of the points, returned with the results.
        model, parallel: the shared ModelSpec and ParallelSpec.
        bases: SystemSpecs the points start from.
        base_index: (B,) index into ``bases`` per point.
        overrides: dotted path inside SystemSpec (``scaleout.bandwidth_GBps``) -> (B,) values.
        cost: a ``simcore.cost.ClusterCostSpec`` to add ``cost_usd_per_iter``, ``capex_usd``
            and ``power_kw`` (None: no cost columns).
        fidelity: ``calibrated`` or ``astra`` (``simcore.api.simulate_batch``).
    """

    batch_id: int
    group: str
    point_ids: NDArray[np.int64]
    model: Any
    parallel: Any
    bases: tuple[Any, ...]
    base_index: NDArray[np.int64]
    overrides: Mapping[str, NDArray[Any]] = field(default_factory=dict)
    cost: Any = None
    fidelity: str = "calibrated"

    @property
    def size(self) -> int:
        """Number of points B."""
        return int(self.point_ids.shape[0])


@dataclass(frozen=True, eq=False)
class BatchOutput:
    """Result columns of one batch, as returned by a worker.

    Attributes:
        batch_id, point_ids: echo of the batch.
        columns: metric name -> (B,) array, plus ``feasible`` (bool) and ``reason`` (object).
        node_id, pid: where it ran.
        elapsed_s: evaluation wall time inside the worker.
        attempt: 0 for the first try, n for the n-th retry.
    """

    batch_id: int
    point_ids: NDArray[np.int64]
    columns: dict[str, NDArray[Any]]
    node_id: str
    pid: int
    elapsed_s: float
    attempt: int = 0


def _set_path(spec: Any, path: tuple[str, ...], value: Any) -> Any:
    if len(path) == 1:
        return replace(spec, **{path[0]: value})
    return replace(spec, **{path[0]: _set_path(getattr(spec, path[0]), path[1:], value)})


def materialize_systems(batch: SpecBatch) -> tuple[list[Any], list[str]]:
    """Build the B SystemSpecs of a batch; return (systems, error) with None/'' per point.

    Overrides are grouped by the top-level SystemSpec field they touch (``accelerator``,
    ``scaleout``, ...). Each distinct value of such a field is built once and validated once,
    inside a full ``replace`` of the base system (so every SystemSpec rule that involves it is
    checked); a point then combines validated fields without re-running the checks. This is
    exact because SystemSpec's rules each involve one such field and structural fields only
    (``num_gpus``, ``gpus_per_node``, which a batch never changes); ``tests/search/test_plan.py``
    compares every point against a full Hydra composition. A point with an invalid value gets
    ``None`` and the one-line error message.
    """
    groups: dict[str, list[tuple[tuple[str, ...], list[Any]]]] = {}
    for key, values in batch.overrides.items():
        head, *rest = key.split(".")
        groups.setdefault(head, []).append((tuple(rest), np.asarray(values).tolist()))
    caches: dict[str, dict[tuple[Any, ...], Any]] = {head: {} for head in groups}
    systems: list[Any] = []
    errors: list[str] = []
    for i, b in enumerate(batch.base_index.tolist()):
        base = batch.bases[b]
        try:
            fields = {head: _checked_field(base, head, subs, i, b, caches[head])
                      for head, subs in groups.items()}
        except ValueError as err:  # InputError is a ValueError
            systems.append(None)
            errors.append(f"invalid_spec: {err}")
            continue
        systems.append(_with_fields(base, fields))
        errors.append("")
    return systems, errors


def _with_fields(base: Any, fields: dict[str, Any]) -> Any:
    """A copy of frozen dataclass ``base`` with ``fields`` set, without re-validation."""
    if not fields:
        return base
    if not hasattr(base, "__dict__"):  # slotted dataclass: fall back to a validated replace
        return replace(base, **fields)
    obj = object.__new__(type(base))
    obj.__dict__.update(base.__dict__)
    obj.__dict__.update(fields)
    return obj


def _checked_field(base: Any, head: str, subs: list[tuple[tuple[str, ...], list[Any]]], i: int,
                   b: int, cache: dict[tuple[Any, ...], Any]) -> Any:
    """Point ``i``'s value of SystemSpec field ``head``, built and validated once per value."""
    key = (b, *(values[i] for _, values in subs))
    found = cache.get(key)
    if found is None:
        spec = getattr(base, head)
        try:
            for path, values in subs:
                spec = _set_path(spec, path, values[i]) if path else values[i]
            replace(base, **{head: spec})  # run every SystemSpec rule on this value
        except ValueError as err:
            spec = err
        cache[key] = found = spec
    if isinstance(found, ValueError):
        raise found
    return found


def evaluate_batch(batch: SpecBatch) -> dict[str, NDArray[Any]]:
    """Evaluate a batch in this process with ``simcore.api.simulate_batch``."""
    from simcore.api import simulate_batch

    systems, errors = materialize_systems(batch)
    ok = [i for i, s in enumerate(systems) if s is not None]
    cols: dict[str, NDArray[Any]] = {}
    if ok:
        res = simulate_batch(batch.model, batch.parallel, [systems[i] for i in ok], batch.fidelity)
        found = _result_columns(res)
        if batch.cost is not None:
            found.update(_cost_columns([systems[i] for i in ok], found["iteration_time_s"],
                                       batch.cost))
        for name, value in found.items():
            full = np.full(batch.size, np.nan if value.dtype.kind == "f" else 0, dtype=value.dtype)
            full[ok] = value
            cols[name] = full
    feasible = np.zeros(batch.size, dtype=bool)
    reason = np.asarray(errors, dtype=object)
    if ok:
        feasible[ok] = cols.pop("feasible").astype(bool)[ok]
        reason[ok] = np.asarray(cols.pop("reason"), dtype=object)[ok]
    cols["feasible"] = feasible
    cols["reason"] = reason
    return cols


def _cost_columns(systems: list[Any], time_s: NDArray[np.float64],
                  cost: Any) -> dict[str, NDArray[Any]]:
    """Cost and power of each point's cluster (simcore.cost), vectorized over the batch."""
    from simcore.cost import cluster_cost

    money = cluster_cost(
        num_gpus=[s.num_gpus for s in systems], gpus_per_node=[s.gpus_per_node for s in systems],
        scaleup_bandwidth_GBps=[s.scaleup.bandwidth_GBps for s in systems],
        scaleout_bandwidth_GBps=[s.scaleout.bandwidth_GBps for s in systems],
        accelerator_price_usd=[s.accelerator.price_usd for s in systems],
        accelerator_tdp_w=[s.accelerator.tdp_w for s in systems], spec=cost)
    return {"cost_usd_per_iter": money.cost_usd_per_iter(time_s), "capex_usd": money.capex_usd,
            "power_kw": money.facility_power_w / 1000.0}


def _result_columns(res: Any) -> dict[str, NDArray[Any]]:
    """BatchResult -> flat columns (metrics, feasible, reason, exposed_comm_<kind>_s)."""
    cols: dict[str, NDArray[Any]] = {}
    for name in ("iteration_time_s", "compute_s", "exposed_comm_s", "bubble_s",
                 "peak_memory_gib", "model_tflops_per_gpu", "mfu", "cost_usd_per_iter"):
        value = getattr(res, name, None)
        if value is not None:
            cols[name] = np.asarray(value, dtype=np.float64)
    for kind, value in sorted(getattr(res, "exposed_comm_by_kind", {}).items()):
        cols[f"exposed_comm_{kind}_s"] = np.asarray(value, dtype=np.float64)
    cols["feasible"] = np.asarray(res.feasible, dtype=bool)
    cols["reason"] = np.asarray([r or "" for r in res.reason], dtype=object)
    return cols


class _Worker:
    """Body of a Ray actor: evaluates batches; the process keeps the engine caches warm."""

    def __init__(self) -> None:
        import ray

        self.node_id = ray.get_runtime_context().get_node_id()
        self.pid = os.getpid()

    def ping(self) -> tuple[str, int]:
        return self.node_id, self.pid

    def evaluate(self, batch: SpecBatch, attempt: int) -> BatchOutput:
        t0 = time.perf_counter()
        cols = evaluate_batch(batch)
        return BatchOutput(batch.batch_id, batch.point_ids, cols, self.node_id, self.pid,
                           time.perf_counter() - t0, attempt)


def init_ray(address: str | None, num_cpus: int | None, temp_dir: str,
             ship_project: bool | None = None, env_vars: Mapping[str, str] | None = None) -> bool:
    """Connect to Ray unless already connected; return True when this call started it.

    ``address`` None starts a local Ray with ``num_cpus``; otherwise it joins a cluster
    (``auto`` or ``ray://host:port``) and, unless ``ship_project`` is False, ships the
    ``simcore`` and ``search`` packages to its workers as a runtime_env ``py_modules``.
    """
    import ray

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if ray.is_initialized():
        return False
    runtime_env: dict[str, Any] = {"env_vars": dict(env_vars or {})}
    ship = address is not None if ship_project is None else ship_project
    if ship:
        import search
        import simcore

        runtime_env["py_modules"] = [os.path.dirname(simcore.__file__),
                                     os.path.dirname(search.__file__)]
    if address is None:
        ray.init(num_cpus=num_cpus, _temp_dir=temp_dir, include_dashboard=False,
                 runtime_env=runtime_env, log_to_driver=False, configure_logging=False)
    else:
        ray.init(address=address, runtime_env=runtime_env, log_to_driver=False,
                 configure_logging=False)
    return True


class WorkerPool:
    """A fixed number of Ray actors evaluating :class:`SpecBatch` es (see module docstring).

    Args:
        num_workers: actors to start.
        inflight_per_worker: batches queued per actor (>= 2 hides the round trip).
        max_batch_retries: resubmissions of one batch after actor deaths before giving up.
        cpus_per_worker: Ray CPUs reserved per actor.
    """

    def __init__(self, num_workers: int = 2, inflight_per_worker: int = 2,
                 max_batch_retries: int = 3, cpus_per_worker: float = 1.0) -> None:
        import ray

        self._ray = ray
        self._cls = ray.remote(num_cpus=cpus_per_worker, max_restarts=0)(_Worker)
        self.inflight_per_worker = inflight_per_worker
        self.max_batch_retries = max_batch_retries
        self.actors: list[Any] = [self._spawn() for _ in range(num_workers)]
        self.retries = 0
        self.replaced = 0
        self.batches_per_node: dict[str, int] = {}

    def _spawn(self) -> Any:
        return self._cls.options(scheduling_strategy="SPREAD").remote()

    def wait_ready(self) -> list[tuple[str, int]]:
        """Block until every actor answers; returns (node_id, pid) per actor."""
        return list(self._ray.get([a.ping.remote() for a in self.actors]))

    def imap_unordered(self, batches: Iterable[SpecBatch]) -> Iterator[BatchOutput]:
        """Evaluate ``batches``; yield each batch's output once, in completion order."""
        from ray.exceptions import ActorDiedError, ActorUnavailableError, RayActorError

        dead = (RayActorError, ActorDiedError, ActorUnavailableError)
        todo: deque[tuple[SpecBatch, int]] = deque((b, 0) for b in batches)
        inflight: dict[Any, tuple[SpecBatch, int, int, Any]] = {}  # ref -> batch, attempt, slot, actor
        load = [0] * len(self.actors)
        last_group = [""] * len(self.actors)
        while todo or inflight:
            while todo and min(load) < self.inflight_per_worker:
                batch, attempt = todo.popleft()
                idx = self._pick(load, last_group, batch.group)
                ref = self.actors[idx].evaluate.remote(batch, attempt)
                inflight[ref] = (batch, attempt, idx, self.actors[idx])
                load[idx] += 1
                last_group[idx] = batch.group
            ready, _ = self._ray.wait(list(inflight), num_returns=1)
            batch, attempt, idx, actor = inflight.pop(ready[0])
            load[idx] -= 1
            try:
                out: BatchOutput = self._ray.get(ready[0])
            except dead:
                if attempt >= self.max_batch_retries:
                    raise
                self.retries += 1
                if self.actors[idx] is actor:  # first failure seen from this actor
                    self._replace(idx)
                todo.appendleft((batch, attempt + 1))
                continue
            self.batches_per_node[out.node_id] = self.batches_per_node.get(out.node_id, 0) + 1
            yield out

    def _pick(self, load: list[int], last_group: list[str], group: str) -> int:
        free = [i for i, n in enumerate(load) if n < self.inflight_per_worker]
        same = [i for i in free if last_group[i] == group]
        return min(same or free, key=lambda i: load[i])

    def _replace(self, idx: int) -> None:
        """Swap a dead actor for a fresh one (its queued work is retried by the caller)."""
        with contextlib.suppress(Exception):  # already gone
            self._ray.kill(self.actors[idx], no_restart=True)
        self.actors[idx] = self._spawn()
        self.replaced += 1

    def close(self) -> None:
        """Stop every actor of the pool."""
        for actor in self.actors:
            with contextlib.suppress(Exception):  # already gone
                self._ray.kill(actor, no_restart=True)
        self.actors = []
