"""The sweep driver: plan -> batches -> Ray actors -> parquet -> MLflow.

Model (DESIGN.md "User-facing contract" ``simsweep sweep`` and "Reliability"):
1. :func:`search.plan.make_plan` expands and validates every point before any work;
2. points are grouped by graph structure and cut into batches of ``sweep.batch_size``;
3. a :class:`search.workers.WorkerPool` evaluates them; each finished batch is appended to the
   parquet table (:class:`search.tables.ResultsStore`) and queued for MLflow child runs;
4. the table is consolidated, summarized, and published to the parent MLflow run.

Resume (``sweep.resume=true``, same ``sweep.output_dir``): the folder's ``sweep.json`` must hold
the same sweep hash; points already on disk are not recomputed and MLflow runs are found by their
tags, so none is duplicated. An unreachable tracking server only defers logging to
``simsweep sync``.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import DictConfig, OmegaConf

from search.run.tables import ResultsStore
from search.run.workers import BatchOutput, SpecBatch
from search.sweep.plan import SweepPlan, _sha
from simcore.errors import InputError

__all__ = ["SweepOutcome", "iter_batches", "prepare_output", "run_sweep"]

MANIFEST = "sweep.json"


@dataclass
class SweepOutcome:
    """What a sweep did (for the CLI summary, tests and the benchmark)."""

    output_dir: Path
    num_points: int
    computed: int = 0
    skipped: int = 0
    retries: int = 0
    batches_per_node: dict[str, int] = field(default_factory=dict)
    wall_s: float = 0.0
    plan_s: float = 0.0
    eval_s: float = 0.0  # from the first batch submitted to the last result received
    write_s: float = 0.0
    log_s: float = 0.0
    parent_run_id: str | None = None
    tracking_ok: bool = True
    tracking_error: str = ""
    summary_text: str = ""


def iter_batches(plan: SweepPlan, batch_size: int, done: np.ndarray,
                 cost: Any = None) -> Iterator[SpecBatch]:
    """Batches of not-yet-done points, one structure group at a time (ids ascending)."""
    todo = np.ones(plan.num_points, dtype=bool)
    todo[done[done < plan.num_points]] = False
    keys = [c.batch_key for c in plan.combos]
    batch_id = 0
    for key in dict.fromkeys(keys):
        members = [i for i, k in enumerate(keys) if k == key]
        ids = np.flatnonzero(np.isin(plan.combo_of, members) & todo)
        combo = plan.combos[members[0]]
        local = {m: j for j, m in enumerate(members)}
        bases = tuple(plan.combos[m].system for m in members)
        for start in range(0, ids.shape[0], batch_size):
            chunk = ids[start:start + batch_size]
            yield SpecBatch(
                batch_id=batch_id, group=key, point_ids=chunk, model=combo.model,
                parallel=combo.parallel, bases=bases,
                base_index=np.array([local[c] for c in plan.combo_of[chunk].tolist()],
                                    dtype=np.int64),
                overrides={path: plan.columns[k][chunk] for k, path in plan.hardware.items()},
                cost=cost, fidelity=combo.fidelity)
            batch_id += 1


def prepare_output(plan: SweepPlan, cfg: DictConfig) -> tuple[Path, dict[str, Any]]:
    """Create or reopen the output folder; return it and its manifest."""
    sweep = cfg.sweep
    if sweep.output_dir:
        out = Path(str(sweep.output_dir)).resolve()
    else:
        stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
        out = (Path("outputs") / f"sweep-{sweep.name}-{stamp}").resolve()
    path = out / MANIFEST
    if path.exists():
        manifest: dict[str, Any] = json.loads(path.read_text())
        if not sweep.resume:
            raise InputError("sweep.output_dir", str(out),
                             "already holds a sweep; pass sweep.resume=true or another folder")
        if manifest["sweep_hash"] != plan.sweep_hash:
            raise InputError("sweep.resume", str(out), "folder holds a different sweep "
                             f"(hash {manifest['sweep_hash']} != {plan.sweep_hash})")
        return out, manifest
    out.mkdir(parents=True, exist_ok=True)
    manifest = {
        "sweep_hash": plan.sweep_hash, "sweep_id": _sha(f"{plan.sweep_hash}|{out}"),
        "name": str(sweep.name), "num_points": plan.num_points,
        "axes": [a.key for a in plan.axes], "hardware_axes": sorted(plan.hardware),
        "fixed": list(plan.fixed), "objective": str(sweep.objective),
        "direction": str(sweep.direction), "top_k": int(sweep.top_k),
        "created_utc": datetime.now(UTC).isoformat(),
        "tracking": OmegaConf.to_container(cfg.tracking, resolve=True),
        "parent_run_id": None, "tracking_synced": False,
    }
    (out / "config.yaml").write_text(OmegaConf.to_yaml(cfg, resolve=True))
    write_manifest(out, manifest)
    return out, manifest


def write_manifest(out: Path, manifest: dict[str, Any]) -> None:
    """Atomically rewrite ``sweep.json``."""
    tmp = out / (MANIFEST + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=2, default=str))
    tmp.replace(out / MANIFEST)


def run_sweep(plan: SweepPlan, cfg: DictConfig,
              on_batch: Callable[[BatchOutput], None] | None = None) -> SweepOutcome:
    """Evaluate every point of ``plan`` not yet on disk; publish; return the outcome."""
    from search.sweep.finish import finish_sweep, start_tracking

    t0 = time.perf_counter()
    out, manifest = prepare_output(plan, cfg)
    store = ResultsStore(out, float(cfg.sweep.flush_interval_s))
    done = store.done_ids()
    outcome = SweepOutcome(out, plan.num_points, skipped=int(np.unique(done).shape[0]))
    track = start_tracking(cfg, manifest, out, plan.num_points, [a.key for a in plan.axes], outcome)
    if outcome.skipped < plan.num_points:
        _evaluate(plan, cfg, done, store, track, outcome, on_batch)
    else:
        store.flush()
    finish_sweep(cfg, out, manifest, store, track, outcome)
    outcome.write_s = store.write_s
    outcome.wall_s = time.perf_counter() - t0
    return outcome


def cost_spec(cfg: DictConfig) -> Any:
    """The cluster cost spec of ``search.cost`` (None when the config has none)."""
    node = OmegaConf.select(cfg, "search.cost")
    if node is None:
        return None
    from search.study.objectives import cost_spec_from

    return cost_spec_from(OmegaConf.to_container(node, resolve=True))  # type: ignore[arg-type]


def _evaluate(plan: SweepPlan, cfg: DictConfig, done: np.ndarray, store: ResultsStore,
              track: Any, outcome: SweepOutcome,
              on_batch: Callable[[BatchOutput], None] | None) -> None:
    """Run the remaining batches on the Ray pool; append each result to disk and MLflow."""
    from search.run.tables import batch_frame
    from search.run.workers import WorkerPool, init_ray

    rc = cfg.ray
    started = init_ray(rc.address, rc.num_cpus or rc.num_workers, str(rc.temp_dir),
                       rc.ship_project, dict(rc.env_vars))
    pool = WorkerPool(int(rc.num_workers), int(rc.inflight_per_worker), int(rc.max_batch_retries))
    try:
        pool.wait_ready()
        t_eval = time.perf_counter()
        bar = _progress(cfg, plan.num_points - outcome.skipped)
        batches = iter_batches(plan, int(cfg.sweep.batch_size), done, cost_spec(cfg))
        for res in pool.imap_unordered(batches):
            axes = {k: v[res.point_ids] for k, v in plan.columns.items()}
            hashes = [plan.point_hash[i] for i in res.point_ids.tolist()]
            frame = batch_frame(res.point_ids, hashes, axes, res.columns, res.batch_id, res.node_id)
            store.add(frame)
            if track is not None:
                track.submit(frame)
            outcome.computed += frame.height
            if bar is not None:
                bar.update(frame.height)
            if on_batch is not None:
                on_batch(res)
        if bar is not None:
            bar.close()
        outcome.eval_s = time.perf_counter() - t_eval
    finally:
        store.flush()
        outcome.retries = pool.retries
        outcome.batches_per_node = dict(pool.batches_per_node)
        pool.close()
        if started:
            import ray

            ray.shutdown()


def _progress(cfg: DictConfig, total: int) -> Any:
    if not cfg.sweep.progress or total <= 0:
        return None
    from tqdm import tqdm

    return tqdm(total=total, unit="pt", unit_scale=True, desc=f"sweep {cfg.sweep.name}",
                smoothing=0.1, dynamic_ncols=True)


def _compose_error(err: Exception, overrides: Sequence[str]) -> InputError:
    """Hydra's composition error as key=value: rule (the override it names, when it does)."""
    text = str(err).split("Config search path")[0]
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    match = re.search(r"override '([^']+)'|'([^'/]+)/([^']+)'", lines[0] if lines else "")
    key, value = "overrides", " ".join(overrides)
    if match and match.group(1):
        key = match.group(1)
        value = next((o.split("=", 1)[1] for o in overrides
                      if o.lstrip("+~").split("=", 1)[0] == key), value)
    elif match:
        key, value = match.group(2), match.group(3)
    return InputError(key, value, " ".join(lines) or type(err).__name__)


def compose_session(config_dir: str | Path) -> tuple[Callable[[Sequence[str]], DictConfig],
                                                     Callable[[str], list[str]]]:
    """(compose, group options) callables on ``config_dir``.

    Each call initializes Hydra, composes and clears it again, so no global Hydra state
    outlives a call (other code may use ``initialize_config_dir`` freely).
    """
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import HydraException

    from search.config.schema import register_configs

    register_configs()
    root = str(Path(config_dir).resolve())

    def _compose(overrides: Sequence[str]) -> DictConfig:
        GlobalHydra.instance().clear()
        try:
            with initialize_config_dir(config_dir=root, version_base=None):
                return compose(config_name="config", overrides=list(overrides))
        except HydraException as err:
            raise _compose_error(err, overrides) from None

    def _options(name: str) -> list[str]:
        if "." in name:
            return []
        GlobalHydra.instance().clear()
        with initialize_config_dir(config_dir=root, version_base=None):
            return list(GlobalHydra.instance().config_loader().get_group_options(name))

    return _compose, _options
