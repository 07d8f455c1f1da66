"""The output folder of a sweep: its manifest (``sweep.json``) and the outcome record.

Model (DESIGN.md "Reliability"): the folder holds the sweep hash, so a resumed sweep
(``sweep.resume=true``) refuses a folder of another sweep; the manifest is rewritten atomically
(write then rename) whenever the tracking state changes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from search.config.schema import objective_direction
from search.run.tables import check_output_folder
from search.sweep.plan import SweepPlan, _sha
from simcore.errors import InputError

__all__ = ["MANIFEST", "SweepOutcome", "prepare_output", "read_manifest", "write_manifest"]

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
    startup_s: float = 0.0  # output folder, Ray pool start and warm-up, until the first batch
    eval_s: float = 0.0  # from the first batch submitted to the last result received
    tracking_wait_s: float = 0.0  # then waiting for the MLflow session still opening (a new store)
    driver_cpu_s: float = 0.0  # this process's CPU, all threads, over the same span
    finish_s: float = 0.0  # table, summary, plots and MLflow record after the last result
    write_s: float = 0.0
    log_s: float = 0.0
    parent_run_id: str | None = None
    experiment_id: str | None = None
    tracking_ok: bool = True
    tracking_error: str = ""
    summary_text: str = ""


def prepare_output(plan: SweepPlan, cfg: DictConfig) -> tuple[Path, dict[str, Any]]:
    """Create or reopen the output folder; return it and its manifest."""
    sweep = cfg.sweep
    if sweep.output_dir:
        out = Path(str(sweep.output_dir)).resolve()
    else:
        stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
        out = (Path("outputs") / f"sweep-{sweep.name}-{stamp}").resolve()
    path = out / MANIFEST
    check_output_folder("sweep.output_dir", out)
    if sweep.resume and not path.exists():
        raise InputError("sweep.resume", str(out), "nothing to resume: the folder holds no sweep.json "
                         "(drop sweep.resume=true to start a new sweep there)")
    if path.exists():
        manifest: dict[str, Any] = read_manifest(out)
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
        "axes": plan.param_keys, "hardware_axes": sorted(plan.hardware),
        "fixed": list(plan.fixed), "objective": str(sweep.objective),
        "direction": objective_direction(str(sweep.objective), str(sweep.direction)),
        "top_k": int(sweep.top_k),
        "created_utc": datetime.now(UTC).isoformat(),
        "tracking": OmegaConf.to_container(cfg.tracking, resolve=True),
        "parent_run_id": None, "tracking_synced": False,
    }
    (out / "config.yaml").write_text(OmegaConf.to_yaml(cfg, resolve=True))
    write_manifest(out, manifest)
    return out, manifest


def read_manifest(out: Path) -> dict[str, Any]:
    """The folder's ``sweep.json``; a missing or corrupt one is an :class:`InputError`."""
    try:
        manifest = json.loads((out / MANIFEST).read_text())
    except OSError as err:
        raise InputError(str(out / MANIFEST), "", f"cannot read ({err.strerror or err})") from None
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise InputError(str(out / MANIFEST), "", "corrupt (not valid JSON); restore it or start a new "
                         "output_dir") from None
    keys = ("sweep_id", "sweep_hash", "name", "axes", "objective", "direction", "top_k", "tracking")
    if not isinstance(manifest, dict) or any(k not in manifest for k in keys):
        raise InputError(str(out / MANIFEST), "", f"corrupt (needs keys {', '.join(keys)})")
    return manifest


def write_manifest(out: Path, manifest: dict[str, Any]) -> None:
    """Atomically rewrite ``sweep.json``."""
    tmp = out / (MANIFEST + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=2, default=str))
    tmp.replace(out / MANIFEST)
