"""ResNet as a :class:`~simcore.workloads._base.WorkloadFamily` (registry name ``resnet``).

Kernels per layer of :func:`~simcore.workloads.cnn.layers.resnet_layers`, micro-batch ``b``:

* **Convolutions as implicit GEMMs** (cuDNN's implicit-GEMM algorithms; Chetlur et al. 2014,
  "cuDNN: Efficient Primitives for Deep Learning"): forward ``M = b h_out^2, N = c_out,
  K = c_in k^2``; backward data ``M = b h_out^2, N = c_in, K = c_out k^2`` (skipped for the stem:
  the image needs no gradient); backward weights ``M = c_out, N = c_in k^2, K = b h_out^2``.
* **Batch norm + ReLU** as memory-bound passes over the activation (``precision`` bytes per
  element): forward 3 passes for batch norm (statistics read, normalize read + write) and 2 for
  ReLU; backward 5 (reads of x and dy for the statistics and the gradient, a write of dx) and 3
  for ReLU; the residual addition 3 forward and 3 backward (the two gradients summed).
* **Pooling**: max pool reads its input and writes its output (backward the same volume),
  global average pool likewise; the classifier is three GEMMs and a softmax/cross-entropy pass.

Data parallel with per-bucket gradient all-reduce overlapped with the backward
(:mod:`simcore.workloads.dataparallel`); optimizer SGD with momentum (torchvision's reference
recipe): per parameter read weight, gradient, momentum and write weight, momentum (20 bytes fp32).
Memory: fp32 weights and gradients (+ a half copy under AMP), the momentum, and for backward the
output of every convolution and of its ReLU, the stem input and the pooled features.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from simcore.hardware.compute import ELEMENT_BYTES
from simcore.ir.ops import OpTable
from simcore.specs.parallel import ParallelSpec
from simcore.specs.system import SystemSpec
from simcore.workloads._base import Workload
from simcore.workloads.cnn.layers import Conv, Pool, resnet_layers, resnet_macs
from simcore.workloads.cnn.spec import ResNetSpec
from simcore.workloads.dataparallel import (
    Layer,
    build_dp,
    dp_graph_nodes,
    dp_only_reason,
    dp_traces,
    model_state_bytes,
)
from simcore.workloads.layout import RankLayout

__all__ = ["ResNetFamily"]

_SGD_BYTES = 20.0  # read w, g, m; write w, m (fp32)
_MOMENTUM_BYTES = 4.0


def _layer_ops(spec: ResNetSpec, layer: Conv | Pool, b: int, ops: OpTable, precision: str
               ) -> Layer:
    e = ELEMENT_BYTES[precision]
    if isinstance(layer, Conv):
        pix = b * layer.h_out ** 2
        k2 = layer.k ** 2
        act = pix * layer.c_out * e
        fwd = [(ops.kernel("gemm", pix, layer.c_out, layer.c_in * k2), 1.0),
               (ops.kernel("mem", act * (5.0 if layer.relu else 3.0)), 1.0)]
        bwd = [(ops.kernel("mem", act * (8.0 if layer.relu else 5.0)), 1.0),
               (ops.kernel("gemm", layer.c_out, layer.c_in * k2, pix), 1.0)]
        if not layer.first:
            bwd.append((ops.kernel("gemm", pix, layer.c_in, layer.c_out * k2), 1.0))
        if layer.residual:
            fwd.append((ops.kernel("mem", 3.0 * act), 1.0))
            bwd.insert(0, (ops.kernel("mem", 3.0 * act), 1.0))
        shape = f"{layer.c_in}x{layer.c_out}k{layer.k}s{layer.stride}h{layer.h_in}"
        f = ops.template(f"conv_fwd_{shape}", fwd)
        g = ops.template(f"conv_bwd_{shape}", bwd)
        return Layer(layer.name, (f,), (g,), float(layer.params))
    if layer.kind == "fc":
        c, n = layer.channels, layer.outputs
        fwd = [(ops.kernel("gemm", b, n, c), 1.0), (ops.kernel("mem", 3.0 * b * n * 4.0), 1.0)]
        bwd = [(ops.kernel("gemm", b, c, n), 1.0), (ops.kernel("gemm", n, c, b), 1.0)]
        return Layer("fc", (ops.template("fc_fwd", fwd),), (ops.template("fc_bwd", bwd),),
                     float(layer.params))
    nbytes = b * layer.channels * (layer.h_in ** 2 + layer.h_out ** 2) * e
    f = ops.template(f"{layer.kind}pool_fwd", [(ops.kernel("mem", nbytes), 1.0)])
    g = ops.template(f"{layer.kind}pool_bwd", [(ops.kernel("mem", nbytes), 1.0)])
    return Layer(layer.name, (f,), (g,))


class ResNetFamily:
    """ResNet-18/34/50/101/152 (and wide variants), data parallel."""

    name = "resnet"
    spec_type: type = ResNetSpec

    def tiny_spec(self) -> ResNetSpec:
        """ResNet-18 on 64x64 images with 10 classes."""
        return ResNetSpec(name="resnet18_tiny", depth=18, image_size=64, num_classes=10)

    def tiny_plan(self) -> ParallelSpec:
        """A plan the tiny spec runs under on 8 GPUs (data parallel)."""
        return ParallelSpec(global_batch=16)

    def check(self, spec: ResNetSpec, parallel: ParallelSpec, cluster: SystemSpec) -> str | None:
        """Data parallel only."""
        return dp_only_reason(parallel)

    def build(self, spec: ResNetSpec, parallel: ParallelSpec, gpus_per_node: int) -> Workload:
        """Forward and backward of every layer, bucketed gradient all-reduce."""
        ops = OpTable()
        layers = self._layers(spec, parallel, ops)
        return build_dp(spec.name, layers, ops, parallel, gpus_per_node,
                        grad_bytes=float(spec.grad_bytes), bucket_mb=spec.bucket_mb,
                        optimizer_bytes_per_param=_SGD_BYTES)

    @staticmethod
    def _layers(spec: ResNetSpec, parallel: ParallelSpec, ops: OpTable) -> list[Layer]:
        return [_layer_ops(spec, lay, parallel.micro_batch, ops, parallel.precision)
                for lay in resnet_layers(spec)]

    def graph_nodes(self, spec: ResNetSpec, parallel: ParallelSpec, gpus_per_node: int) -> int:
        """:func:`dp_graph_nodes` of the layers."""
        return dp_graph_nodes(self._layers(spec, parallel, OpTable()), parallel)

    def footprint(self, spec: ResNetSpec, parallel: ParallelSpec, stage: int) -> dict[str, int]:
        """Model state and the activations kept for backward (one micro-batch)."""
        e = ELEMENT_BYTES[parallel.precision]
        layers = resnet_layers(spec)
        params = sum(lay.params for lay in layers)
        out = model_state_bytes(params, parallel.precision, _MOMENTUM_BYTES)
        act = 3 * spec.image_size ** 2
        for lay in layers:
            if isinstance(lay, Conv):
                act += lay.c_out * lay.h_out ** 2 * (2 if lay.relu else 1)
            else:
                act += lay.channels * lay.h_out ** 2
        out["activations"] = int(act * e * parallel.micro_batch)
        out["total"] = sum(out.values())
        return out

    def peak_footprint(self, spec: ResNetSpec, parallel: ParallelSpec) -> tuple[int, dict[str, int]]:
        """One stage."""
        return 0, self.footprint(spec, parallel, 0)

    def flops_per_iter(self, spec: ResNetSpec, parallel: ParallelSpec) -> float:
        """3 x forward (2 FLOPs per multiply-accumulate) x global batch."""
        return 6.0 * resnet_macs(spec) * parallel.global_batch

    def samples_per_iter(self, spec: ResNetSpec, parallel: ParallelSpec) -> int:
        """Images per iteration."""
        return int(parallel.global_batch)

    def tokens_per_iter(self, spec: ResNetSpec, parallel: ParallelSpec) -> int:
        """No sequence: the images."""
        return int(parallel.global_batch)

    def export_traces(self, workload: Workload, layout: RankLayout,
                      template_us: NDArray[np.float64]) -> tuple[dict[int, Any], dict[int, tuple[int, ...]]]:
        """Every rank runs the representative's program (:func:`dp_traces`)."""
        return dp_traces(workload, layout, template_us)
