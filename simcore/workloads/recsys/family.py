"""DLRM as a :class:`~simcore.workloads._base.WorkloadFamily` (registry name ``dlrm``).

Architecture (Naumov et al., "Deep Learning Recommendation Model for Personalization and
Recommendation Systems", arXiv 1906.00091, 2019; reference implementation
``facebookresearch/dlrm`` ``dlrm_s_pytorch.py``, MLPerf Training's Criteo Terabyte configuration:
bottom MLP 13-512-256-128, 26 tables of dimension 128, top MLP 1024-1024-512-256-1): a bottom MLP
over the dense features, one embedding table per sparse feature (``num_tables`` x ``num_rows`` x
``embedding_dim``, each lookup sums ``pooling_factor`` rows), a pairwise dot-product interaction of
the ``num_tables + 1`` vectors (``n (n - 1) / 2`` dots, concatenated with the bottom output: the
top MLP's input), a top MLP ending in one logit. Linear layers have a bias.

Parallelism (the paper's §4, "model parallelism for the embeddings, data parallelism for the
MLPs"): tables are placed whole (table-wise) on the ``parallel.ep`` ranks of an expert-parallel
group (``ceil(num_tables / ep)`` on the most loaded rank, whose pace the all-to-all imposes; ``ep = dp`` shards them over every rank, smaller ``ep``
replicates each shard ``dp / ep`` times). Forward: each rank looks up its tables for the
``ep x micro_batch`` samples of its group (a memory-bound gather of ``pooling_factor`` rows per
lookup, fp32 tables), then an all-to-all over the group gives every rank its samples' vectors
(``micro_batch x num_tables x dim`` per rank); backward mirrors it, and the sparse gradient
updates the touched rows in place (SGD, as the reference). MLP gradients are all-reduced over
dp in DDP buckets; gradients of replicated shards (``ep < dp``) over ``edp``, only the rows the
iteration touched. Blocking all-to-alls sit on the compute stream (the reference waits for them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from simcore.errors import InputError, require
from simcore.hardware.compute import ELEMENT_BYTES
from simcore.ir.graph import CommType
from simcore.ir.ops import OpTable
from simcore.ir.streams import CommKind
from simcore.specs.parallel import ParallelSpec
from simcore.specs.system import SystemSpec
from simcore.workloads._base import Workload
from simcore.workloads.dataparallel import (
    Layer,
    build_dp,
    dp_graph_nodes,
    dp_only_reason,
    dp_traces,
    model_state_bytes,
)
from simcore.workloads.layout import RankLayout

__all__ = ["DLRMFamily", "DLRMSpec"]

_SGD_BYTES = 12.0  # read w, g; write w (fp32)
_TABLE_BYTES = 4.0  # fp32 tables
INTERACTIONS = ("dot",)


@dataclass(frozen=True)
class DLRMSpec:
    """DLRM shapes.

    Attributes:
        name: label.
        dense_features: inputs of the bottom MLP.
        bottom_mlp: bottom MLP widths (the last = ``embedding_dim``).
        top_mlp: top MLP widths after the interaction (the last = 1).
        num_tables, num_rows, embedding_dim: embedding tables (uniform).
        pooling_factor: rows summed per lookup.
        interaction: ``dot``.
        bucket_mb: DDP gradient bucket size, MB.
    """

    name: str = "dlrm"
    dense_features: int = 13
    bottom_mlp: tuple[int, ...] = (512, 256, 128)
    top_mlp: tuple[int, ...] = (1024, 1024, 512, 256, 1)
    num_tables: int = 26
    num_rows: int = 1_000_000
    embedding_dim: int = 128
    pooling_factor: int = 1
    interaction: str = "dot"
    bucket_mb: float = 25.0

    def __post_init__(self) -> None:
        p = "workload."
        object.__setattr__(self, "bottom_mlp", tuple(self.bottom_mlp))
        object.__setattr__(self, "top_mlp", tuple(self.top_mlp))
        for key in ("dense_features", "num_tables", "num_rows", "embedding_dim", "pooling_factor"):
            value = getattr(self, key)
            require(isinstance(value, int) and value >= 1, p + key, value, "must be an integer >= 1")
        for key in ("bottom_mlp", "top_mlp"):
            widths = getattr(self, key)
            require(len(widths) >= 1 and all(isinstance(w, int) and w >= 1 for w in widths),
                    p + key, list(widths), "must be a non-empty list of integers >= 1")
        require(self.bottom_mlp[-1] == self.embedding_dim, p + "bottom_mlp", list(self.bottom_mlp),
                f"must end in embedding_dim={self.embedding_dim} (dot interaction)")
        require(self.interaction in INTERACTIONS, p + "interaction", self.interaction,
                f"unknown layer kind; must be one of {', '.join(INTERACTIONS)}")
        require(self.bucket_mb > 0, p + "bucket_mb", self.bucket_mb, "must be > 0")

    @property
    def interaction_width(self) -> int:
        """Top MLP input: pairwise dots of the ``num_tables + 1`` vectors + the bottom output."""
        n = self.num_tables + 1
        return n * (n - 1) // 2 + self.embedding_dim

    def mlp_shapes(self) -> list[tuple[int, int]]:
        """(in, out) of every linear layer, bottom then top."""
        bottom = [self.dense_features, *self.bottom_mlp]
        top = [self.interaction_width, *self.top_mlp]
        return list(zip(bottom[:-1], bottom[1:], strict=True)) + list(zip(top[:-1], top[1:], strict=True))

    def mlp_params(self) -> int:
        """Weights and biases of the MLPs."""
        return sum((i + 1) * o for i, o in self.mlp_shapes())

    def table_bytes(self) -> int:
        """Bytes of one fp32 table."""
        return self.num_rows * self.embedding_dim * int(_TABLE_BYTES)

    def num_params(self) -> int:
        """MLPs and every table."""
        return self.mlp_params() + self.num_tables * self.num_rows * self.embedding_dim

    def macs_per_sample(self) -> int:
        """Forward multiply-accumulates: MLPs and the interaction's dots (lookups are adds)."""
        n = self.num_tables + 1
        return sum(i * o for i, o in self.mlp_shapes()) + n * n * self.embedding_dim


class DLRMFamily:
    """DLRM with table-wise model-parallel embeddings and data-parallel MLPs."""

    name = "dlrm"
    spec_type: type = DLRMSpec

    def tiny_spec(self) -> DLRMSpec:
        """8 tables of 1000 x 16, bottom 13-32-16, top 64-1."""
        return DLRMSpec(name="dlrm_tiny", bottom_mlp=(32, 16), top_mlp=(64, 1), num_tables=8,
                        num_rows=1000, embedding_dim=16, pooling_factor=2)

    def tiny_plan(self) -> ParallelSpec:
        """Data parallel on 8 GPUs, tables over groups of 4."""
        return ParallelSpec(global_batch=16, ep=4)

    def check(self, spec: DLRMSpec, parallel: ParallelSpec, cluster: SystemSpec) -> str | None:
        """Data parallel MLPs; tables whole on one device and split evenly over ``ep``."""
        why = dp_only_reason(parallel, allow_ep=True)
        if why is not None:
            return why
        if spec.num_tables < parallel.ep:
            return str(InputError("workload.num_tables", spec.num_tables,
                                  f"must be >= parallel.ep={parallel.ep} (every rank of a group "
                                  "holds a whole table)"))
        largest = max(p.accelerator.hbm_capacity_gib for p in cluster.devices if p.accelerator)
        gib = spec.table_bytes() / 2**30
        if gib > largest:
            return str(InputError("workload.num_rows", spec.num_rows,
                                  f"one table ({spec.num_rows} x {spec.embedding_dim} x 4 B = "
                                  f"{gib:.1f} GiB) is larger than any device ({largest:g} GiB); "
                                  "tables are placed whole"))
        return None

    def build(self, spec: DLRMSpec, parallel: ParallelSpec, gpus_per_node: int) -> Workload:
        """Bottom MLP, lookups + all-to-all, interaction, top MLP; mirrored backward."""
        ops = OpTable()
        spans = RankLayout.of(parallel, gpus_per_node).spans()
        layers = _layers(spec, parallel, ops, spans["ep"].size, spans["ep"].ranks_per_node)
        return build_dp(spec.name, layers, ops, parallel, gpus_per_node, grad_bytes=4.0,
                        bucket_mb=spec.bucket_mb, optimizer_bytes_per_param=_SGD_BYTES)

    def graph_nodes(self, spec: DLRMSpec, parallel: ParallelSpec, gpus_per_node: int) -> int:
        """:func:`dp_graph_nodes` of the layers."""
        spans = RankLayout.of(parallel, gpus_per_node).spans()
        layers = _layers(spec, parallel, OpTable(), spans["ep"].size, spans["ep"].ranks_per_node)
        return dp_graph_nodes(layers, parallel)

    def footprint(self, spec: DLRMSpec, parallel: ParallelSpec, stage: int) -> dict[str, int]:
        """Local tables, MLP state and the activations kept for backward."""
        b, e = parallel.micro_batch, ELEMENT_BYTES[parallel.precision]
        out = model_state_bytes(spec.mlp_params(), parallel.precision, 0.0)
        out["embeddings"] = -(-spec.num_tables // parallel.ep) * spec.table_bytes()
        n = spec.num_tables + 1
        widths = sum(o for _, o in spec.mlp_shapes()) + spec.dense_features
        act = b * (widths * e + n * spec.embedding_dim * 4.0 * 2 + n * n * e)
        out["activations"] = int(act)
        out["total"] = sum(out.values())
        return out

    def peak_footprint(self, spec: DLRMSpec, parallel: ParallelSpec) -> tuple[int, dict[str, int]]:
        """One stage."""
        return 0, self.footprint(spec, parallel, 0)

    def flops_per_iter(self, spec: DLRMSpec, parallel: ParallelSpec) -> float:
        """3 x forward x global batch (2 FLOPs per multiply-accumulate)."""
        return 6.0 * spec.macs_per_sample() * parallel.global_batch

    def samples_per_iter(self, spec: DLRMSpec, parallel: ParallelSpec) -> int:
        """Samples (click records) per iteration."""
        return int(parallel.global_batch)

    def tokens_per_iter(self, spec: DLRMSpec, parallel: ParallelSpec) -> int:
        """No sequence: the samples."""
        return int(parallel.global_batch)

    def export_traces(self, workload: Workload, layout: RankLayout,
                      template_us: NDArray[np.float64]) -> tuple[dict[int, Any], dict[int, tuple[int, ...]]]:
        """Every rank runs the representative's program (:func:`dp_traces`)."""
        return dp_traces(workload, layout, template_us)


def _mlp(ops: OpTable, tag: str, b: int, shapes: list[tuple[int, int]], e: float) -> list[Layer]:
    out = []
    for j, (i, o) in enumerate(shapes):
        f = ops.template(f"{tag}{j}_fwd", [(ops.kernel("gemm", b, o, i), 1.0),
                                           (ops.kernel("mem", 2.0 * b * o * e), 1.0)])
        g = ops.template(f"{tag}{j}_bwd", [(ops.kernel("gemm", b, i, o), 1.0),
                                           (ops.kernel("gemm", o, i, b), 1.0),
                                           (ops.kernel("mem", 3.0 * b * o * e), 1.0)])
        out.append(Layer(f"{tag}{j}", (f,), (g,), float((i + 1) * o)))
    return out


def _layers(spec: DLRMSpec, par: ParallelSpec, ops: OpTable, ep: int, ep_per_node: int
            ) -> list[Layer]:
    b, e, d = par.micro_batch, ELEMENT_BYTES[par.precision], spec.embedding_dim
    shapes = spec.mlp_shapes()
    n_bottom = len(spec.bottom_mlp)
    local = -(-spec.num_tables // par.ep)  # the most loaded rank sets the pace
    lookups = ep * b * local  # pooled vectors this rank produces
    gather = lookups * (spec.pooling_factor * d * _TABLE_BYTES + d * _TABLE_BYTES + 8.0 * spec.pooling_factor)
    look_f = ops.template("embedding_lookup", [(ops.kernel("mem", gather), 1.0)])
    # backward: read the pooled gradients, read-modify-write every touched row (fused SGD)
    update = lookups * (d * _TABLE_BYTES + 2.0 * spec.pooling_factor * d * _TABLE_BYTES)
    look_b = ops.template("embedding_update", [(ops.kernel("mem", update), 1.0)])
    fwd_parts = [look_f]
    bwd_parts = [look_b]
    if ep > 1:
        a2a = ops.kernel("coll", int(CommType.ALL_TO_ALL), b * spec.num_tables * d * _TABLE_BYTES,
                         ep, ep_per_node)
        fwd_parts.append(ops.template("ep_alltoall_fwd", [(a2a, 1.0)], int(CommKind.EP)))
        bwd_parts.insert(0, ops.template("ep_alltoall_bwd", [(a2a, 1.0)], int(CommKind.EP)))
    replicas = par.dp_size // par.ep
    touched = min(spec.num_rows, par.global_batch // replicas * spec.pooling_factor)
    edp = float(local * touched * d) if replicas > 1 else 0.0
    emb = Layer("embeddings", tuple(fwd_parts), tuple(bwd_parts), 0.0, edp)
    n = spec.num_tables + 1
    inter_f = ops.template("interaction_fwd", [(ops.kernel("gemm", b * n, n, d), 1.0),
                                               (ops.kernel("mem", 2.0 * b * n * d * e), 1.0)])
    inter_b = ops.template("interaction_bwd", [(ops.kernel("gemm", b * n, d, n), 2.0)])
    inter = Layer("interaction", (inter_f,), (inter_b,))
    bottom = _mlp(ops, "bottom", b, shapes[:n_bottom], e)
    top = _mlp(ops, "top", b, shapes[n_bottom:], e)
    return [*bottom, emb, inter, *top]
