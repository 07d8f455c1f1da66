"""The traced family (registry name ``traced``): a recorded PyTorch step as a workload family.

Written against the workload-family seam (ARCHITECTURE.md, "Seams: WorkloadFamily"): the spec
is :class:`TracedSpec` (a trace file), the graph comes from :mod:`.generator` (data parallelism
as DDP / ZeRO / FSDP issue it), and:

- **memory per GPU** (mixed-precision Adam as Rajbhandari et al. 2020 count it): weights and
  gradients in the traced dtype, optimizer states of 12 bytes per parameter when the weights
  are 16-bit (fp32 master copy, momentum, variance) else 8 (momentum, variance); ZeRO >= 1
  shards the optimizer states over the data-parallel ranks, >= 2 the gradients, 3 the weights;
  plus the activations autograd saved in the traced micro-batch (one in flight: no pipeline)
  and the module buffers;
- **FLOPs per iteration**: the traced forward + backward model FLOPs per sample x global batch;
- **samples per iteration**: the global batch (tokens: the same; a traced model has no known
  sequence axis).

Data parallelism, pipeline parallelism over the blocks named when tracing and tensor
parallelism of their linear layers (:mod:`.tensor_parallel`; without sequence parallelism or
TP communication overlap); a plan with ``cp``, ``ep`` or ``vp`` above 1, or more stages than
blocks, is rejected with its reason. Weights, gradients, optimizer states and saved
activations are those of one TP rank. With a pipeline, a stage holds its parameters and a share of the saved activations in
proportion to the bytes its forward ops write (an approximation: the trace does not attribute
saved tensors to blocks), times the micro-batches 1F1B keeps in flight there (``min(pp - s,
m)``, Narayanan et al. 2021).
"""

from __future__ import annotations

import os
import tempfile
from typing import Any, cast

import numpy as np
from numpy.typing import NDArray

from simcore.errors import InputError
from simcore.specs.parallel import ParallelSpec
from simcore.specs.system import SystemSpec
from simcore.traces.pytorch.step import TracedOp, TracedParam, TracedStep
from simcore.workloads._base import Workload
from simcore.workloads.layout import RankLayout
from simcore.workloads.traced.generator import (
    TracedWorkload,
    build_traced,
    stage_split,
    traced_graph_nodes,
)
from simcore.workloads.traced.spec import TracedSpec
from simcore.workloads.traced.tensor_parallel import split_step

__all__ = ["TracedFamily", "tiny_step"]

_OPTIMIZER_STATE_BYTES = {2: 12, 4: 8}  # per parameter, by weight element bytes


def tiny_step(batch: int = 4, width: int = 64) -> TracedStep:
    """A two-layer MLP step written by hand (no PyTorch): ``relu(x W1) W2``, mean loss."""
    b, h = batch, width
    f4 = 4

    def gemm(name: str, m: int, n: int, k: int, phase: int, deps: tuple[int, ...]) -> TracedOp:
        return TracedOp(name, phase, ((m, k), (k, n)), ((m, n),), "float32", 2.0 * m * n * k,
                        f4 * (m * k + k * n), f4 * m * n, deps, ((m, n, k, 1),))

    def mem(name: str, elems: int, phase: int, deps: tuple[int, ...]) -> TracedOp:
        return TracedOp(name, phase, ((elems,),), ((elems,),), "float32", 0.0, f4 * elems,
                        f4 * elems, deps)

    ops = (gemm("aten::mm", b, h, h, 0, ()), mem("aten::relu", b * h, 0, (0,)),
           gemm("aten::mm", b, h, h, 0, (1,)), mem("aten::mean", b * h, 0, (2,)),
           mem("aten::expand", b * h, 1, (3,)), gemm("aten::mm", h, h, b, 1, (4, 1)),
           gemm("aten::mm", b, h, h, 1, (4,)), mem("aten::threshold_backward", b * h, 1, (6, 1)),
           gemm("aten::mm", h, h, b, 1, (7,)))
    params = (TracedParam("fc1.weight", h * h, f4, 0, -1, 8),
              TracedParam("fc2.weight", h * h, f4, 2, 6, 5))
    return TracedStep("tiny_mlp", b, ops, params, activation_bytes=f4 * 3 * b * h)


class TracedFamily:
    """Models recorded with ``simsweep trace`` (any ``torch.nn.Module``)."""

    name = "traced"
    spec_type: type = TracedSpec

    def tiny_plan(self) -> ParallelSpec:
        """A plan the tiny spec runs under on 8 GPUs: data parallel, the traced batch of 4 as
        the micro-batch."""
        return ParallelSpec(micro_batch=4, global_batch=32)

    def tiny_spec(self, micro_batch: int = 4) -> TracedSpec:
        """:func:`tiny_step` with batch ``micro_batch`` written to a file in the temporary
        directory (written to a private name, then renamed: concurrent callers never read a
        partial file). A traced model's micro-batch is the traced batch, so the contract suite
        varies the micro-batch through this argument."""
        from simcore.traces.pytorch.api import write_step

        prefix = os.path.join(tempfile.gettempdir(), f"simsweep-traced-tiny-b{micro_batch}-{os.getuid()}")
        path = f"{prefix}.0.et"
        if not os.path.exists(path):
            private = f"{prefix}-{os.getpid()}"
            write_step(private, tiny_step(batch=micro_batch))
            os.replace(f"{private}.0.et", path)
        return TracedSpec(trace=path, name="tiny_mlp")

    def check(self, spec: TracedSpec, parallel: ParallelSpec, cluster: SystemSpec) -> str | None:
        """Data, pipeline and tensor parallelism; the micro-batch is the traced batch."""
        for key in ("cp", "ep", "vp"):
            if getattr(parallel, key) != 1:
                return str(InputError(f"parallel.{key}", getattr(parallel, key),
                                      "the traced family generates data, pipeline and tensor "
                                      "parallelism only"))
        if parallel.tp > 1:
            for key in ("sequence_parallel", "tp_comm_overlap"):
                if getattr(parallel, key):
                    return str(InputError(f"parallel.{key}", True, "the traced family's tensor "
                                          "parallelism has neither"))
        try:
            step = spec.step
        except (OSError, InputError) as err:
            return str(InputError("workload.trace", spec.trace, f"cannot be read: {err}"))
        batch = step.batch_size
        if parallel.pp > 1 and parallel.pp > step.num_blocks:
            return str(InputError("parallel.pp", parallel.pp,
                                  f"needs at least pp blocks named when tracing (--blocks); the "
                                  f"trace has {step.num_blocks}"))
        if parallel.tp > 1:
            try:
                split_step(step, parallel.tp)
            except InputError as err:
                return str(err)
        if parallel.micro_batch != batch:
            return str(InputError("parallel.micro_batch", parallel.micro_batch,
                                  f"must equal the traced batch size {batch}"))
        return None

    def build(self, spec: TracedSpec, parallel: ParallelSpec, gpus_per_node: int) -> TracedWorkload:
        """:func:`build_traced`."""
        return build_traced(spec, parallel, gpus_per_node)

    def graph_nodes(self, spec: TracedSpec, parallel: ParallelSpec, gpus_per_node: int) -> int:
        """:func:`traced_graph_nodes`."""
        return traced_graph_nodes(spec, parallel)

    def footprint(self, spec: TracedSpec, parallel: ParallelSpec, stage: int = 0) -> dict[str, int]:
        """Bytes per GPU of pipeline stage ``stage`` by part (see the module docstring)."""
        step, z = split_step(spec.step, parallel.tp).step, parallel.zero_stage
        dp = parallel.dp_size
        op_stage, stage_params = stage_split(step, parallel)
        mine = [step.params[i] for i in stage_params[stage]]
        weights = sum(p.numel * p.elem_bytes for p in mine)
        state = sum(p.numel * _OPTIMIZER_STATE_BYTES.get(p.elem_bytes, 8) for p in mine)
        written = [op.bytes_written if op.phase == 0 else 0 for op in step.ops]
        share = sum(w for w, s in zip(written, op_stage, strict=True) if s == stage)
        share_of = share / max(sum(written), 1) if parallel.pp > 1 else 1.0
        flight = min(parallel.pp - stage, parallel.num_micro_batches)
        parts = {
            "weights": weights // (dp if z >= 3 else 1),
            "gradients": weights // (dp if z >= 2 else 1),
            "optimizer": state // (dp if z >= 1 else 1),
            "activations": int(step.activation_bytes * share_of) * flight,
            "buffers": step.buffer_bytes if stage == 0 else 0,
        }
        parts["total"] = sum(parts.values())
        return parts

    def peak_footprint(self, spec: TracedSpec, parallel: ParallelSpec) -> tuple[int, dict[str, int]]:
        """(stage, :meth:`footprint`) of the stage with the largest total."""
        feet = [self.footprint(spec, parallel, s) for s in range(parallel.pp)]
        best = max(range(parallel.pp), key=lambda s: feet[s]["total"])
        return best, feet[best]

    def flops_per_iter(self, spec: TracedSpec, parallel: ParallelSpec) -> float:
        """Traced forward + backward FLOPs per sample x global batch."""
        step = spec.step
        per_sample = (step.flops("forward") + step.flops("backward")) / step.batch_size
        return per_sample * parallel.global_batch

    def samples_per_iter(self, spec: TracedSpec, parallel: ParallelSpec) -> int:
        """The global batch."""
        return int(parallel.global_batch)

    def tokens_per_iter(self, spec: TracedSpec, parallel: ParallelSpec) -> int:
        """The global batch (no sequence axis is known)."""
        return int(parallel.global_batch)

    def export_traces(self, workload: Workload, layout: RankLayout,
                      template_us: NDArray[np.float64]) -> tuple[dict[int, Any], dict[int, tuple[int, ...]]]:
        """Per-rank Chakra ETs and communicator groups (the transformer exporter's rules: compute
        nodes with their durations, DP collectives with ``pg_name``, in-order streams)."""
        from simcore.workloads.transformer.export import transformer_to_traces

        traces, groups = transformer_to_traces(cast(Any, workload), layout, template_us)
        return dict(traces), groups
