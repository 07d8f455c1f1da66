"""simcore: a fast, graph-based simulator of distributed deep-learning training.

The package is pure Python + numpy (+ scipy for linear programs). It never imports the
orchestration libraries (hydra, optuna, ray, mlflow, polars); `search` drives it.

Layers, lowest first: ``specs``/``units`` -> ``hardware``, ``network``, ``memory`` ->
``workload`` -> ``traces`` -> ``engine``.
"""

from __future__ import annotations

from simcore.engine.schedule import SchedulePlan, compile_plan, run_schedule
from simcore.errors import InputError
from simcore.workload.graph import Graph, GraphBuilder, NodeKind

__all__ = [
    "Graph",
    "GraphBuilder",
    "InputError",
    "NodeKind",
    "SchedulePlan",
    "compile_plan",
    "run_schedule",
]
