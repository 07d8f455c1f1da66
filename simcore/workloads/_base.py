"""The seam of workload families: a generated :class:`Workload` and the :class:`WorkloadFamily` protocol.

A workload family (a GPT-style transformer today; a CNN, an RNN or a recommendation model next)
turns its spec and a resolved parallelization into a graph the engine schedules. Everything the
public API needs from a family goes through :class:`WorkloadFamily`: the shape rules, the graph
and its size bound,
the memory footprint per pipeline stage, the FLOPs and samples (tokens) of one iteration, and the
Chakra export. ``simcore.api`` and ``simcore.engine`` know no family by name; a family is chosen
by the type of its spec (:func:`simcore.workloads.family_of`) or by the config key
``workload.family``.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from simcore.ir.blocks import PipelinedBlock
from simcore.ir.graph import Graph
from simcore.ir.ops import OpTable
from simcore.specs.parallel import ParallelSpec
from simcore.specs.system import SystemSpec
from simcore.workloads.layout import RankLayout

__all__ = ["Workload", "WorkloadFamily"]


@dataclass(frozen=True, eq=False)
class Workload:
    """A generated iteration graph and what the engine needs to cost it.

    Attributes:
        graph: the DAG; node attrs ``template`` (index into ``ops``) and ``stage``; typed streams
            (:mod:`simcore.ir.streams`).
        ops: kernels and templates.
        num_stages: pipeline stages (= representative ranks of the graph).
        in_flight: per stage, the most micro-batch chunks whose activations are alive at once.
        dp_overlap: whether data-parallel communication may overlap the stage's compute (else it
            runs after the pipeline flush and is not counted as overlappable).
        stage_device: per stage, the index of the device pool its ranks run on (empty: pool 0).
        pipelined_blocks: ops whose duration is a closed-form makespan of pipelined pieces
            (:mod:`simcore.ir.blocks`), computed by the engine per stage and point.
    """

    graph: Graph
    ops: OpTable
    num_stages: int
    in_flight: tuple[int, ...]
    dp_overlap: bool = True
    stage_device: tuple[int, ...] = ()
    pipelined_blocks: tuple[PipelinedBlock, ...] = ()

    def device_of(self, stage: int) -> int:
        """Device pool of pipeline stage ``stage``."""
        return self.stage_device[stage] if self.stage_device else 0


@runtime_checkable
class WorkloadFamily(Protocol):
    """One kind of model: its spec type, shape rules, graph, memory, FLOPs and Chakra export.

    ``spec`` is a frozen, hashable instance of :attr:`spec_type`; ``parallel`` is resolved
    (``dp`` set) except in :meth:`check`'s caller.
    """

    name: str
    spec_type: type

    def tiny_spec(self) -> Hashable:
        """A small valid spec for contract tests (runs on 8 GPUs with tp, pp up to 2)."""
        ...

    def check(self, spec: Any, parallel: ParallelSpec, cluster: SystemSpec) -> str | None:
        """One-line reason why ``spec`` cannot run under the resolved ``parallel`` on
        ``cluster``, or None."""
        ...

    def build(self, spec: Any, parallel: ParallelSpec, gpus_per_node: int) -> Workload:
        """The iteration graph of a checked structure."""
        ...

    def graph_nodes(self, spec: Any, parallel: ParallelSpec, gpus_per_node: int) -> int:
        """An upper bound on the nodes :meth:`build` materialises for a checked structure (a
        condensed run of repeated ops, :mod:`simcore.ir.runs`, counts once), computed without
        building anything: :func:`simcore.api.check_structure` checks the resource bound
        ``graph_nodes`` of :mod:`simcore.limits` on it before any build."""
        ...

    def footprint(self, spec: Any, parallel: ParallelSpec, stage: int) -> dict[str, int]:
        """Bytes per GPU of pipeline stage ``stage`` by part, with a ``total`` entry."""
        ...

    def peak_footprint(self, spec: Any, parallel: ParallelSpec) -> tuple[int, dict[str, int]]:
        """(stage, :meth:`footprint`) of the stage with the largest total."""
        ...

    def flops_per_iter(self, spec: Any, parallel: ParallelSpec) -> float:
        """Model FLOPs of one iteration (no recomputation), all GPUs together."""
        ...

    def samples_per_iter(self, spec: Any, parallel: ParallelSpec) -> int:
        """Samples (sequences, images) per iteration."""
        ...

    def tokens_per_iter(self, spec: Any, parallel: ParallelSpec) -> int:
        """Tokens per iteration (= samples for a family without sequences)."""
        ...

    def export_traces(self, workload: Workload, layout: RankLayout,
                      template_us: NDArray[np.float64]) -> tuple[dict[int, Any], dict[int, tuple[int, ...]]]:
        """Per-rank Chakra ET traces and the communicator groups (id -> member ranks)."""
        ...
