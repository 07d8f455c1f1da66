"""Public entry points: trace a model given by import path, and write / read the trace file.

``trace_model("torchvision.models:resnet50", ["32x3x224x224"])`` builds the model on ``meta``
(:mod:`.load`), records one training step (:mod:`.record`) and returns the
:class:`~simcore.traces.pytorch.step.TracedStep`; :func:`write_step` writes it as one Chakra ET
``<prefix>.0.et`` (the rank-0 file ASTRA-sim's ``--workload-configuration=<prefix>`` opens);
:func:`read_step` reads it back without PyTorch.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from simcore.traces.chakra.et import check_prefix, read_trace, write_trace
from simcore.traces.pytorch.chakra_io import step_from_trace, step_to_trace
from simcore.traces.pytorch.step import TracedStep

__all__ = ["import_execution_trace", "read_step", "trace_model", "write_step"]


def trace_model(path: str, inputs: Sequence[str], *, dtype: str = "float32",
                optimizer: str = "none", kwargs: Mapping[str, Any] | None = None,
                blocks: str | None = None) -> TracedStep:
    """Trace one training step of the model made by ``path`` (``package.module:factory``).

    Args:
        path: import path of a callable returning a ``torch.nn.Module``.
        inputs: one ``SHAPE[:DTYPE]`` per positional input (``8x3x224x224``, ``4x1024:int64``).
        dtype: parameter and default input dtype.
        optimizer: ``none``, ``sgd``, ``adam`` or ``adamw``.
        kwargs: keyword arguments of the factory.
        blocks: attribute path of the repeated blocks (pipeline stages are cut between them).

    Raises:
        InputError: PyTorch missing, a bad path, shape or dtype (key ``dtype``: not a floating
            parameter dtype), or the model fails on the inputs.
    """
    from simcore.traces.pytorch.load import (
        build_model,
        check_param_dtype,
        make_inputs,
        parse_input,
    )
    from simcore.traces.pytorch.record import trace_step

    check_param_dtype(dtype)
    for text in inputs:
        parse_input(text, dtype)  # shape errors before the (slower) model build
    model = build_model(path, kwargs, dtype)
    return trace_step(model, make_inputs(inputs, dtype), optimizer=optimizer, name=path,
                      blocks=blocks)


def write_step(prefix: str | os.PathLike[str], step: TracedStep,
               micros: Sequence[int] | None = None) -> str:
    """Write ``step`` to ``<prefix>.0.et``; returns the path."""
    path = f"{check_prefix(prefix)}.0.et"
    write_trace(path, step_to_trace(step, micros))
    return path


def read_step(path: str | os.PathLike[str]) -> TracedStep:
    """The step stored in an ET file written by :func:`write_step`."""
    return step_from_trace(read_trace(path))


def import_execution_trace(path: str | os.PathLike[str], prefix: str | os.PathLike[str],
                           ranks: int = 1, kineto: str | os.PathLike[str] | None = None,
                           ) -> tuple[list[str], str]:
    """Convert an ExecutionTraceObserver JSON (:mod:`.et_import`), linked first with the Kineto
    trace ``kineto`` of the same step when given (:mod:`.kineto_link`: the compute nodes then
    carry the measured durations).

    Writes the Chakra conversion as ``<prefix>.<r>.et`` for ``r < ranks`` (data-parallel
    replicas run the same program: one trace stands for every replica, Echo's DDP case) and the
    step of the traced family as ``<prefix>.traced.0.et``; returns (Chakra paths, step path).
    """
    from simcore.traces.pytorch.et_import import et_to_chakra, et_to_step, read_pytorch_et

    check_prefix(prefix)
    data = read_pytorch_et(path)
    if kineto is not None:
        from simcore.traces.pytorch.kineto_link import link_kineto, read_kineto

        data = link_kineto(data, read_kineto(kineto))
    trace = et_to_chakra(data)
    paths = []
    for r in range(ranks):
        paths.append(f"{prefix}.{r}.et")
        write_trace(paths[-1], trace)
    step_path = write_step(f"{prefix}.traced", et_to_step(data, name=str(path)))
    return paths, step_path
