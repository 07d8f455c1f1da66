"""simcore: a fast, graph-based simulator of distributed deep-learning training.

The package is pure Python + numpy (+ scipy for linear programs). It never imports the
orchestration libraries (hydra, optuna, ray, mlflow, polars); `search` drives it.

Wings, lowest first: ``specs``/``units``/``cost`` -> ``ir`` -> ``hardware``, ``traces`` ->
``network``, ``workloads`` -> ``memory``, ``engine``, ``emulator`` -> ``fidelity`` -> ``api``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from simcore._lazy import load_lazy
from simcore.errors import InputError

if TYPE_CHECKING:
    from simcore.engine.schedule import SchedulePlan, compile_plan, run_schedule
    from simcore.ir.graph import Graph, GraphBuilder, NodeKind

# imported on first use (PEP 562): a command that only reads files does not pay for the engine
_LAZY = {"SchedulePlan": "simcore.engine.schedule", "compile_plan": "simcore.engine.schedule",
         "run_schedule": "simcore.engine.schedule", "Graph": "simcore.ir.graph",
         "GraphBuilder": "simcore.ir.graph", "NodeKind": "simcore.ir.graph"}


def __getattr__(name: str) -> Any:
    return load_lazy(__name__, _LAZY, globals(), name)

__all__ = [
    "Graph",
    "GraphBuilder",
    "InputError",
    "NodeKind",
    "SchedulePlan",
    "compile_plan",
    "run_schedule",
]
