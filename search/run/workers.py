"""Ray actor pool that evaluates batches of design points with the vectorized engine.

Model (DESIGN.md "The vectorized engine" and "Reliability"): a
:class:`~search.run.batch.SpecBatch` is B design
points that share one graph structure (same model and parallelization), so one call of
``simcore.api.simulate_batch`` evaluates them as (B,) numpy vectors. Each actor is a long-lived
process: the engine's compiled-graph cache stays warm across batches. The pool sends a batch to
an idle actor if there is one, else to the actor that last ran its structure group when that
one has a free slot (:func:`pick_actor`).

Fault tolerance: an actor that dies mid-batch (killed process, lost node) is replaced by a fresh
actor and its in-flight batches are resubmitted, at most ``max_batch_retries`` times each; a
batch's result is delivered exactly once. An exception raised by the evaluation itself is a bug or
a bad input and stops the pool (it is not retried). Each actor runs the same pure evaluation as
an in-process run (:func:`search.run.batch.evaluate_batch`).
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from search.run.batch import (
    BatchOutput,
    Columns,
    Runner,
    SpecBatch,
    evaluate_batch,
    evaluate_timed,
)

__all__ = ["INLINE_OBJECT_MAX_B", "WorkerPool", "init_ray", "keep_heap", "pick_actor", "pool_runner",
           "ray_pool"]


class _Worker:
    """Body of a Ray actor: evaluates batches; the process keeps the engine caches warm."""

    def __init__(self) -> None:
        import ray

        keep_heap()
        self.node_id = ray.get_runtime_context().get_node_id()
        self.pid = os.getpid()

    def ping(self) -> tuple[str, int]:
        return self.node_id, self.pid

    def warm(self, batch: SpecBatch) -> None:
        """Evaluate ``batch`` and drop the result: builds and compiles its structure, which
        this process then keeps cached for the batches that follow."""
        evaluate_batch(batch)

    def evaluate(self, batch: SpecBatch, attempt: int) -> BatchOutput:
        return evaluate_timed(batch, self.node_id, self.pid, attempt)


#: glibc ``mallopt`` parameters (``malloc.h``) and the values a worker sets: the maxima of
#: glibc's dynamic thresholds (mmap 32 MiB, trim 2 x that)
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_HEAP_THRESHOLDS_B = {_M_MMAP_THRESHOLD: 32 * 2**20, _M_TRIM_THRESHOLD: 64 * 2**20}


def keep_heap() -> bool:
    """Make this process keep its malloc heap between batches (glibc only; True when set).

    glibc raises its mmap and trim thresholds only up to the largest block freed so far, so a
    worker that never freed a large block gave its heap back after every batch and faulted it
    in again (~8,700 page faults and ~25 ms of system time per batch of 2,048 GPT-3 points:
    100 ms of CPU per batch against 75 ms in the driver's process, whose planning had freed
    large blocks). Fixed thresholds at the dynamic maxima make the batches reuse the heap.
    Set in the process (``mallopt``) rather than through a Ray ``runtime_env``: an actor with
    a runtime environment cannot take one of the worker processes Ray starts ahead of time,
    and a fresh process costs ~0.7 s more to start.
    """
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return False
    return all(libc.mallopt(param, value) == 1 for param, value in _HEAP_THRESHOLDS_B.items())


#: the largest object a local Ray passes inline (in the gRPC reply to its owner, or with the
#: task) instead of through its shared-memory object store; Ray's default is 100 KiB. A batch's
#: result is ~250 KB at 2,048 GPT-3 points (16 float64 columns), its SpecBatch ~100 KB: through
#: the store, the raylet spent ~0.15-0.2 s of CPU per 112,896-point sweep creating, sealing
#: and freeing them (~9% of a core while 2 workers ran on 2 cores), inline ~0.01-0.02 s
#: (``/proc`` accounting of single sweeps; in ``bench_sweep.py`` the loop's 2-worker scaling
#: moved 82% -> 85.5%, medians of 4 runs, within the noise of single rounds). Set for a Ray
#: this process starts; a cluster takes it from ``ray start --system-config``.
INLINE_OBJECT_MAX_B = 4 * 2**20


def init_ray(address: str | None, num_cpus: int | None, temp_dir: str | None,
             ship_project: bool | None = None, env_vars: Mapping[str, str] | None = None) -> bool:
    """Connect to Ray unless already connected; return True when this call started it.

    ``address`` None starts a local Ray with ``num_cpus``; otherwise it joins a cluster
    (``auto`` or ``ray://host:port``) and, unless ``ship_project`` is False, ships the
    ``simcore`` and ``search`` packages to its workers as a runtime_env ``py_modules``.
    ``env_vars`` go to the workers' runtime_env; without any runtime_env the pool's actors
    take the worker processes Ray starts ahead of time (see :func:`keep_heap`).
    """
    if address is None:  # before Ray reads its constants: a local Ray stays on loopback
        os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    import ray

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    # Ray's notice that it enabled token auth by default (printed on every local start); auth
    # stays as Ray chose, only the notice is hidden
    logging.getLogger("ray._private.authentication.authentication_token_setup").setLevel(
        logging.ERROR)
    if ray.is_initialized():
        return False
    runtime_env: dict[str, Any] = {"env_vars": dict(env_vars)} if env_vars else {}
    ship = address is not None if ship_project is None else ship_project
    if ship:
        import search
        import simcore

        runtime_env["py_modules"] = [os.path.dirname(simcore.__file__),
                                     os.path.dirname(search.__file__)]
    if address is None:
        _loopback_only()
        ray.init(num_cpus=num_cpus, _temp_dir=private_temp_dir(temp_dir), include_dashboard=False,
                 runtime_env=runtime_env or None, log_to_driver=False, configure_logging=False,
                 _system_config={"max_direct_call_object_size": INLINE_OBJECT_MAX_B})
    else:
        check_reachable(address)
        ray.init(address=address, runtime_env=runtime_env or None, log_to_driver=False,
                 configure_logging=False)
    return True


def _loopback_only() -> None:
    """Make a local Ray bind 127.0.0.1 only.

    Ray resolves its node address to the machine's reachable IP unless its cluster mode is off
    (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``, read into ``ray_constants.ENABLE_RAY_CLUSTER``);
    with the node address 127.0.0.1 the GCS, raylet, object manager, runtime-env agent and every
    worker listen on loopback. To use other machines, start a cluster (``ray start --head``) and
    pass ``ray.address``.
    """
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # inherited by Ray's processes
    from ray._private import ray_constants

    ray_constants.ENABLE_RAY_CLUSTER = False


def private_temp_dir(path: str | None) -> str:
    """Ray's temp dir inside a folder private to this user (``/tmp/rs_simsweep_<uid>`` when
    ``path`` is None): the folder is created 0700 (set back to 0700 if others had access) and
    refused when it belongs to another user. Ray makes its own temp dir world-writable, so it
    gets the subfolder ``r``: the private parent is what keeps others out."""
    from simcore.errors import InputError

    folder = path or f"/tmp/rs_simsweep_{os.getuid()}"
    os.makedirs(folder, mode=0o700, exist_ok=True)
    st = os.stat(folder)
    if st.st_uid != os.getuid():
        raise InputError("ray.temp_dir", folder, f"belongs to uid {st.st_uid}, not to this user: pick another")
    if st.st_mode & 0o077:
        os.chmod(folder, 0o700)
    return os.path.join(folder, "r")


def check_reachable(address: str) -> None:
    """Fail fast when a ``host:port`` / ``ray://host:port`` cluster address does not accept a TCP
    connection within the ``ray_connect_s`` limit (``auto`` is left to Ray)."""
    import socket

    from simcore.errors import InputError
    from simcore.limits import limit

    target = address.removeprefix("ray://")
    if address == "auto" or ":" not in target:
        return
    host, _, port = target.rpartition(":")
    if not port.isdigit():
        raise InputError("ray.address", address, "must be auto, host:port or ray://host:port")
    timeout = limit("ray_connect_s")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as err:
        raise InputError("ray.address", address, f"no Ray cluster answers within {timeout:g} s "
                         f"({err.strerror or type(err).__name__}); limit ray_connect_s") from None


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

    def warm(self, batch: SpecBatch) -> None:
        """Queue the first point of ``batch`` on every actor, so each builds that structure
        while the caller does other work (an actor runs its calls in order: the batches sent
        next wait behind it). Errors are left to the real batches (an actor that dies here is
        replaced when its first batch fails)."""
        one = replace(batch, point_ids=batch.point_ids[:1], base_index=batch.base_index[:1],
                      overrides={k: v[:1] for k, v in batch.overrides.items()}, cost=None)
        for actor in self.actors:
            actor.warm.remote(one)

    def imap_unordered(self, batches: Iterable[SpecBatch]) -> Iterator[BatchOutput]:
        """Evaluate ``batches``; yield each batch's output once, in completion order."""
        from ray.exceptions import ActorDiedError, ActorUnavailableError, RayActorError

        dead = (RayActorError, ActorDiedError, ActorUnavailableError)
        fresh = iter(batches)  # drawn only when an actor has a free slot
        todo: deque[tuple[SpecBatch, int]] = deque()  # batches to resubmit first
        inflight: dict[Any, tuple[SpecBatch, int, int, Any]] = {}  # ref -> batch, attempt, slot, actor
        load = [0] * len(self.actors)
        last_group = [""] * len(self.actors)
        drained = False
        while todo or inflight or not drained:
            while min(load) < self.inflight_per_worker:
                if not todo:
                    nxt = None if drained else next(fresh, None)
                    if nxt is None:
                        drained = True
                        break
                    todo.append((nxt, 0))
                batch, attempt = todo.popleft()
                idx = pick_actor(load, last_group, batch.group, self.inflight_per_worker)
                ref = self.actors[idx].evaluate.remote(batch, attempt)
                inflight[ref] = (batch, attempt, idx, self.actors[idx])
                load[idx] += 1
                last_group[idx] = batch.group
            if not inflight:
                continue  # nothing left to wait for (the loop ends, or refills)
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


def pick_actor(load: Sequence[int], last_group: Sequence[str], group: str, inflight: int
               ) -> int:
    """The actor for the next batch of structure group ``group`` (``load``: batches in flight
    per actor, ``last_group``: the group each was last sent, ``inflight``: slots per actor;
    some actor has a free slot). An idle actor first: building the structure there costs
    less than waiting behind a whole batch (a TP-overlap GPT-3 batch of 168 points runs ~4 s;
    its cold build ~1 s). Among the candidates, one last sent ``group`` (its compiled
    structure is warm), then the least loaded."""
    free = [i for i, n in enumerate(load) if n < inflight]
    candidates = [i for i in free if load[i] == 0] or free
    same = [i for i in candidates if last_group[i] == group]
    return min(same or candidates, key=lambda i: load[i])


def pool_runner(pool: WorkerPool) -> Runner:
    """A :data:`~search.run.batch.Runner` on ``pool``: batches out, columns back in order."""

    def run(batches: list[SpecBatch]) -> list[Columns]:
        by_id = {out.batch_id: out.columns for out in pool.imap_unordered(batches)}
        return [by_id[b.batch_id] for b in batches]

    return run


@contextmanager
def ray_pool(rc: Any) -> Iterator[WorkerPool]:
    """A :class:`WorkerPool` of ``rc.num_workers`` actors on the Ray of the ``ray`` config
    group ``rc``; the pool is closed, and Ray shut down when this call started it, on exit."""
    workers = int(rc.num_workers)
    started = init_ray(rc.get("address"), rc.get("num_cpus") or workers, rc.get("temp_dir"),
                       rc.get("ship_project"), dict(rc.get("env_vars") or {}))
    pool = WorkerPool(workers, int(rc.inflight_per_worker), int(rc.max_batch_retries))
    try:
        yield pool
    finally:
        pool.close()
        if started:
            import ray

            ray.shutdown()
