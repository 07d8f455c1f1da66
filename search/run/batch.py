"""The pure batch evaluation shared by sweeps and studies: design points -> result columns.

Model (DESIGN.md "The vectorized engine"): a :class:`SpecBatch` is B design points that share
one graph structure (same model and parallelization), so one call of
``simcore.api.simulate_batch`` evaluates them as (B,) numpy vectors. A sweep's batch starts from
a few base SystemSpecs and per-point hardware overrides (:func:`materialize_systems`); a
study's batch carries its B SystemSpecs (:func:`systems_batch`). :func:`evaluate_batch` runs in
this process or inside a Ray worker (:mod:`search.run.workers`) alike, so both give the same
columns. Points whose spec cannot be built (a swept value that breaks a cross-field rule) come
back infeasible with reason ``invalid_spec: ...``; so does a whole batch whose workload spec
could not be built (:class:`InvalidModel`: an unknown layer kind on a sweep's workload axis).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from search.config.build import set_path
from search.config.leaf_columns import copy_with_leaves, valid_in_ranges, with_fields
from search.run.metrics import cost_columns, result_columns, throughput_columns

__all__ = [
    "BatchOutput",
    "Columns",
    "InvalidModel",
    "Runner",
    "SpecBatch",
    "evaluate_batch",
    "evaluate_timed",
    "in_process_runner",
    "materialize_systems",
    "systems_batch",
]

Columns = dict[str, NDArray[Any]]


@dataclass(frozen=True)
class InvalidModel:
    """Stands for a workload spec that could not be built; its points are infeasible.

    Attributes:
        reason: the one-line error (``invalid_spec: <key>=<value>: <rule>``).
    """

    reason: str


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
        cpu_s: evaluation CPU time of the worker process (``time.process_time``): what the
            batch cost a core, whatever else shares the machine.
    """

    batch_id: int
    point_ids: NDArray[np.int64]
    columns: dict[str, NDArray[Any]]
    node_id: str
    pid: int
    elapsed_s: float
    attempt: int = 0
    cpu_s: float = 0.0


def evaluate_timed(batch: SpecBatch, node_id: str, pid: int, attempt: int = 0) -> BatchOutput:
    """:func:`evaluate_batch` with where it ran and its wall and CPU time (a pool's output)."""
    t0, c0 = time.perf_counter(), time.process_time()
    columns = evaluate_batch(batch)
    return BatchOutput(batch.batch_id, batch.point_ids, columns, node_id, pid,
                       time.perf_counter() - t0, attempt, time.process_time() - c0)


def materialize_systems(batch: SpecBatch) -> tuple[list[Any], list[str]]:
    """Build the B SystemSpecs of a batch; return (systems, error) with None/'' per point.

    Overrides are grouped by the top-level SystemSpec field they touch (``accelerator``,
    ``scaleout``, ...). Each distinct value of such a field is built once and validated once
    by every SystemSpec rule that involves it (:meth:`simcore.specs.system.SystemSpec.with_field`,
    equal to a full ``replace`` of the base system), or, for the leaves whose rules are a range
    on the leaf alone, checked with the batch's other new values as one column
    (:func:`_checked_fields`); a point then combines validated fields without re-running the
    checks. This is exact because SystemSpec's rules
    each involve one such field and structural fields only (``num_gpus``, ``gpus_per_node``,
    which a batch never changes); ``tests/search/sweep/test_plan.py``
    compares every point against a full Hydra composition, ``tests/search/run/test_workers.py``
    valid and invalid values against full copies. A point with an invalid value gets
    ``None`` and the one-line error message.
    """
    groups: dict[str, list[tuple[tuple[str, ...], list[Any]]]] = {}
    for key, values in batch.overrides.items():
        head, *rest = key.split(".")
        groups.setdefault(head, []).append((tuple(rest), np.asarray(values).tolist()))
    bases = batch.base_index.tolist()
    canon = _canonical_bases(batch.bases)
    # per field: the distinct (base, values) keys, each built and validated once per process
    # (batches of a sweep repeat them), and the index of every point's key (first-seen order)
    fields_of: list[tuple[str, list[Any], list[int]]] = []
    for head, subs in groups.items():
        ids: dict[tuple[Any, ...], int] = {}
        codes = [ids.setdefault(k, len(ids)) for k in zip(bases, *(v for _, v in subs),
                                                          strict=True)]
        paths = tuple(path for path, _ in subs)
        objs: list[Any] = []
        missing: list[tuple[int, tuple[Any, ...]]] = []  # (position in objs, key)
        for k in ids:
            found = _FIELDS.get((id(canon[k[0]]), head, paths, k[1:]), _MISSING)
            if found is _MISSING:
                missing.append((len(objs), k))
            objs.append(found)
        if missing:
            keys = [k for _, k in missing]
            for (pos, k), found in zip(missing, _checked_fields(canon, head, subs, keys),
                                       strict=True):
                objs[pos] = _FIELDS[(id(canon[k[0]]), head, paths, k[1:])] = found
        fields_of.append((head, objs, codes))
    systems: list[Any] = []
    errors: list[str] = []
    for i, b in enumerate(bases):
        base = batch.bases[b]
        fields: dict[str, Any] = {}
        for head, objs, codes in fields_of:
            found = objs[codes[i]]
            if isinstance(found, ValueError):  # InputError is a ValueError
                systems.append(None)
                errors.append(f"invalid_spec: {found}")
                break
            fields[head] = found
        else:
            systems.append(with_fields(base, fields))
            errors.append("")
    return systems, errors


#: validated field values by (id of a canonical base, field, paths, values), kept across batches
_FIELDS: dict[tuple[Any, ...], Any] = {}
#: canonical base SystemSpecs (equal bases of different batches map to one object: stable ids)
_BASES: dict[Any, Any] = {}
_FIELDS_MAX = 1 << 16
_MISSING = object()


def _canonical_bases(bases: tuple[Any, ...]) -> list[Any]:
    """The canonical object of each base (hashed once per batch), for the field cache."""
    if len(_FIELDS) > _FIELDS_MAX or len(_BASES) > 256:
        _FIELDS.clear()
        _BASES.clear()
    return [_BASES.setdefault(base, base) for base in bases]


def _checked_fields(canon: list[Any], head: str, subs: list[tuple[tuple[str, ...], list[Any]]],
                    keys: list[tuple[Any, ...]]) -> list[Any]:
    """:func:`_checked_field` for each key ``(base index, value per entry of subs)``: values
    of the leaves listed in :data:`~simcore.specs.system.FIELD_RANGES` are checked as one
    column (:func:`~search.config.leaf_columns.valid_in_ranges`) and the valid ones copied
    into the base's field without re-running its checks (a random sweep over ``interval``
    axes has a distinct value per point); every other key, and any value the column refuses
    (for its error message), goes through :func:`_checked_field`."""
    paths = [path for path, _ in subs]
    names = [path[0] for path in paths]
    ok = None
    if all(type(v) in (float, int) for k in keys for v in k[1:]):  # numbers, not bools
        ok = valid_in_ranges(canon, head, paths, np.array([k[0] for k in keys], dtype=np.int64),
                             np.array([k[1:] for k in keys], dtype=np.float64))
    out: list[Any] = []
    for i, k in enumerate(keys):
        base = canon[k[0]]
        if ok is None or not ok[i]:
            out.append(_checked_field(base, head, subs, k[1:]))
            continue
        out.append(copy_with_leaves(getattr(base, head), names, k[1:]))
    return out


def _checked_field(base: Any, head: str, subs: list[tuple[tuple[str, ...], list[Any]]],
                   values: tuple[Any, ...]) -> Any:
    """SystemSpec field ``head`` of ``base`` with the override ``values`` (one per entry of
    ``subs``) applied and every SystemSpec rule run on it; the ValueError if one fails."""
    spec = getattr(base, head)
    try:
        for (path, _), value in zip(subs, values, strict=True):
            spec = set_path(spec, path, value) if path else value
        base.with_field(head, spec)  # every SystemSpec rule that involves this value
    except ValueError as err:
        return err
    return spec


def evaluate_batch(batch: SpecBatch) -> Columns:
    """Evaluate a batch in this process with ``simcore.api.simulate_batch``."""
    from simcore.api import simulate_batch

    if isinstance(batch.model, InvalidModel):
        return {"feasible": np.zeros(batch.size, dtype=bool),
                "reason": np.asarray([batch.model.reason] * batch.size, dtype=object)}
    systems, errors = materialize_systems(batch)
    ok = [i for i, s in enumerate(systems) if s is not None]
    cols: Columns = {}
    if ok:
        res = simulate_batch(batch.model, batch.parallel, [systems[i] for i in ok], batch.fidelity)
        found = result_columns(res)
        found.update(throughput_columns(batch.model, batch.parallel, found["iteration_time_s"]))
        if batch.cost is not None:
            found.update(cost_columns([systems[i] for i in ok], found["iteration_time_s"],
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


def systems_batch(batch_id: int, group: str, model: Any, parallel: Any,
                  systems: Sequence[Any], fidelity: str = "calibrated") -> SpecBatch:
    """A batch of B given SystemSpecs (no overrides, no cost columns)."""
    index = np.arange(len(systems), dtype=np.int64)
    return SpecBatch(batch_id=batch_id, group=group, point_ids=index, model=model,
                     parallel=parallel, bases=tuple(systems), base_index=index,
                     fidelity=fidelity)


#: evaluates batches, returns their columns in the same order (in process or on the Ray pool)
Runner = Callable[[list[SpecBatch]], list[Columns]]


def in_process_runner(batches: list[SpecBatch]) -> list[Columns]:
    """Evaluate batches in this process (tests, benchmarks, ``search.in_process=true``)."""
    return [evaluate_batch(b) for b in batches]
