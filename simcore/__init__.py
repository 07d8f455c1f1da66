"""simcore: a fast, graph-based simulator of distributed deep-learning training.

The package is pure Python + numpy (+ scipy for linear programs). It never imports the
orchestration libraries (hydra, optuna, ray, mlflow, polars); `search` drives it.

Wings, lowest first: ``specs``/``units``/``cost`` -> ``ir`` -> ``hardware``, ``traces`` ->
``network``, ``workloads`` -> ``memory``, ``engine``, ``emulator`` -> ``fidelity`` -> ``api``.
"""

from __future__ import annotations

from simcore.engine.schedule import SchedulePlan, compile_plan, run_schedule
from simcore.errors import InputError
from simcore.ir.graph import Graph, GraphBuilder, NodeKind

__all__ = [
    "Graph",
    "GraphBuilder",
    "InputError",
    "NodeKind",
    "SchedulePlan",
    "compile_plan",
    "run_schedule",
]
