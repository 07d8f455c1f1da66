"""A :class:`TracedStep` as a graph of the simsweep IR (one rank, one in-order compute stream).

Each op is a ``COMPUTE`` node on ``s0.compute`` (program order = issue order, as a CUDA stream)
with its data dependencies and the attributes ``flops``, ``bytes`` (read + written), ``phase``
and ``view``. The traced workload family builds its costed, parallel graphs from the step
itself (:mod:`simcore.workloads.traced`); this graph is the plain single-device record.
"""

from __future__ import annotations

from simcore.ir.graph import Graph, GraphBuilder, NodeKind
from simcore.traces.pytorch.step import TracedStep

__all__ = ["step_to_graph"]


def step_to_graph(step: TracedStep) -> Graph:
    """The single-device graph of ``step`` (node id = op index)."""
    b = GraphBuilder(f"trace {step.name}")
    stream = b.resource("s0.compute")
    for i, op in enumerate(step.ops):
        b.add(NodeKind.COMPUTE, resources=[stream], deps=op.deps, rank=0, name=op.name,
              node_id=i, flops=op.flops, bytes=op.bytes_read + op.bytes_written,
              phase=op.phase, view=float(op.view))
    return b.build()
