"""Shared machinery of the data-parallel families (CNN, RNN, recommendation): one rank's iteration
as a graph, gradient buckets, model-state memory and the Chakra export.

Model (PyTorch ``DistributedDataParallel``, Li et al., VLDB 2020, "PyTorch Distributed"): every
data-parallel replica runs the same program, so the graph holds one representative rank (stage 0,
the symmetry argument of :mod:`simcore.workloads.transformer.generator`). Per micro-batch the
layers run forward in order and backward in reverse on the rank's in-order compute stream;
blocking collectives a layer needs (DLRM's embedding all-to-all) sit on that stream too. Gradients
are reduced only after the last micro-batch (``no_sync`` for gradient accumulation), in
*buckets* of ``bucket_mb`` MB (DDP's ``bucket_cap_mb``, default 25) filled in backward order: a
bucket's all-reduce is issued on the rank's dp stream as soon as the backward of its last layer
is done, so it overlaps the rest of the backward (``parallel.dp_overlap``; without it every
bucket waits for the last backward). The optimizer step, a memory-bound pass over the local
parameters, waits for every reduction.

A family describes its model as a sequence of :class:`Layer` s (forward and backward op
templates, dense parameters reduced over dp, optional parameters reduced over another group)
and calls :func:`build_dp`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from simcore.ir.graph import CommType, GraphBuilder, NodeKind
from simcore.ir.ops import COMPUTE, OpTable
from simcore.ir.streams import CommKind, Stream, StreamKind
from simcore.specs.parallel import ParallelSpec
from simcore.workloads._base import Workload
from simcore.workloads.layout import GroupSpan, RankLayout

__all__ = ["Layer", "build_dp", "dp_graph_nodes", "dp_only_reason", "dp_traces", "model_state_bytes"]

MB = 1e6  # DDP's bucket_cap_mb is in MiB in the code (``bucket_cap_mb * 1024 * 1024``)


@dataclass(frozen=True)
class Layer:
    """One layer of a data-parallel model.

    Attributes:
        name: label.
        fwd, bwd: op templates (indices into the family's :class:`OpTable`) in program order;
            a communication template is a blocking collective on the compute stream.
        params: dense parameters whose gradients are all-reduced over the ``dp`` group.
        edp_params: parameters reduced over the ``edp`` group instead (embedding rows of a
            table replicated on several ranks).
    """

    name: str
    fwd: tuple[int, ...]
    bwd: tuple[int, ...]
    params: float = 0.0
    edp_params: float = 0.0


def dp_only_reason(parallel: ParallelSpec, allow_ep: bool = False) -> str | None:
    """One-line reason a data-parallel family cannot run ``parallel`` (tp, pp, cp, ZeRO), or None."""
    from simcore.errors import InputError

    for key in ("tp", "pp", "cp"):
        value = getattr(parallel, key)
        if value != 1:
            return str(InputError(f"parallel.{key}", value,
                                  "must be 1: this workload family is data parallel only"))
    if parallel.zero_stage != 0:
        return str(InputError("parallel.zero_stage", parallel.zero_stage,
                              "must be 0 for this workload family (DDP all-reduce)"))
    if not allow_ep and parallel.ep != 1:
        return str(InputError("parallel.ep", parallel.ep,
                              "must be 1: this workload family has no model-parallel part"))
    return None


def _bucket_template(ops: OpTable, nbytes: float, span: GroupSpan, name: str) -> int:
    k = ops.kernel("coll", int(CommType.ALL_REDUCE), nbytes, span.size, span.ranks_per_node)
    return ops.template(name, [(k, 1.0)], int(CommKind.DP))


def build_dp(name: str, layers: Sequence[Layer], ops: OpTable, parallel: ParallelSpec,
             gpus_per_node: int, *, grad_bytes: float, bucket_mb: float,
             optimizer_bytes_per_param: float) -> Workload:
    """The iteration graph of ``layers`` under the resolved data-parallel ``parallel``.

    Args:
        name: graph label.
        layers: the model, input to output.
        ops: the family's op table (the layers' templates; bucket and optimizer templates are
            added here).
        parallel: resolved plan (tp = pp = cp = 1).
        gpus_per_node: node size (group spans).
        grad_bytes: bytes per gradient element on the wire (4: fp32 gradients under AMP).
        bucket_mb: DDP bucket size, MB (1e6 bytes).
        optimizer_bytes_per_param: HBM bytes the optimizer step moves per local parameter.
    """
    spans = RankLayout.of(parallel, gpus_per_node).spans()
    b = GraphBuilder(name)
    compute, dp = Stream.compute(0), Stream(StreamKind.DP, 0)
    cap = bucket_mb * MB
    last: list[int] = []  # the last node on the compute stream
    reduces: list[int] = []

    def add(tmpl: int, stream: Stream, deps: list[int], label: str) -> int:
        kind = NodeKind.COMPUTE if ops.template_kind[tmpl] == COMPUTE else NodeKind.COLLECTIVE
        return b.add(kind, resources=[stream], deps=deps, rank=0, name=label, template=tmpl,
                     stage=0)

    def flush(params: float, edp: float, deps: list[int]) -> None:
        if params > 0 and spans["dp"].size > 1:
            t = _bucket_template(ops, params * grad_bytes, spans["dp"], "dp_grad_bucket")
            reduces.append(add(t, dp, deps, "dp_grad_bucket"))
        if edp > 0 and spans["edp"].size > 1:
            t = _bucket_template(ops, edp * grad_bytes, spans["edp"], "edp_grad_bucket")
            reduces.append(add(t, dp, deps, "edp_grad_bucket"))

    m = parallel.num_micro_batches
    for mb in range(m):
        for layer in layers:
            for t in layer.fwd:
                last[:] = [add(t, compute, last[-1:], ops.template_names[t])]
        pending = pending_edp = 0.0
        for layer in reversed(layers):
            for t in layer.bwd:
                last[:] = [add(t, compute, last[-1:], ops.template_names[t])]
            if mb < m - 1:
                continue
            pending += layer.params
            pending_edp += layer.edp_params
            if parallel.dp_overlap and (pending + pending_edp) * grad_bytes >= cap:
                flush(pending, pending_edp, last[-1:])
                pending = pending_edp = 0.0
        if mb == m - 1:
            flush(pending, pending_edp, last[-1:])
    local = sum(lay.params + lay.edp_params for lay in layers)
    k = ops.kernel("mem", local * optimizer_bytes_per_param)
    opt = ops.template("optimizer_step", [(k, 1.0)])
    add(opt, compute, [*last[-1:], *reduces], "optimizer_step")
    return Workload(graph=b.build(), ops=ops, num_stages=1, in_flight=(1,),
                    dp_overlap=parallel.dp_overlap)


def dp_graph_nodes(layers: Sequence[Layer], parallel: ParallelSpec) -> int:
    """Upper bound on the nodes :func:`build_dp` emits, computed without building them: per
    micro-batch every layer's forward and backward templates, at most two gradient buckets per
    layer (dp and edp) and the optimizer step."""
    per_micro_batch = sum(len(lay.fwd) + len(lay.bwd) for lay in layers)
    return parallel.num_micro_batches * per_micro_batch + 2 * len(layers) + 1


def model_state_bytes(params: float, precision: str, optimizer_state_bytes: float) -> dict[str, int]:
    """Weights, gradients and optimizer state of ``params`` local parameters (PyTorch AMP: fp32
    weights and gradients, plus a half copy of the weights for a 16-bit precision)."""
    half = 2.0 if precision in ("fp16", "bf16", "fp8") else 0.0
    return {"weights": int(params * (4.0 + half)), "gradients": int(params * 4.0),
            "optimizer": int(params * optimizer_state_bytes)}


def dp_traces(workload: Workload, layout: RankLayout, template_us: NDArray[np.float64]
              ) -> tuple[dict[int, object], dict[int, tuple[int, ...]]]:
    """Per-rank Chakra traces: every rank runs the representative's program; collectives use the
    ``dp`` / ``ep`` / ``edp`` communicators of the layout (the transformer exporter, which
    handles any one-stage graph whose collectives are of those kinds)."""
    from typing import Any, cast

    from simcore.workloads.transformer.export import transformer_to_traces

    traces, groups = transformer_to_traces(cast(Any, workload), layout, template_us)
    return dict(traces), groups
