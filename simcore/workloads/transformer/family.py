"""The transformer as a :class:`~simcore.workloads._base.WorkloadFamily` (registry name ``transformer``).

Delegates to the family's modules: shapes to :class:`ModelSpec` and the divisibility rules of
Megatron-LM's tensor, context and expert parallelism (heads, KV heads, FFN width by ``tp``;
sequence by ``cp``; experts by ``ep``; every model chunk needs a layer), the graph to
:mod:`.generator`, memory to :mod:`.memory` (Korthikanti et al. 2022), model FLOPs to
:meth:`ModelSpec.model_flops_per_sample` (Narayanan et al. 2021), Chakra traces to :mod:`.export`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, cast

import numpy as np
from numpy.typing import NDArray

from simcore.errors import InputError
from simcore.specs.parallel import ParallelSpec
from simcore.specs.system import SystemSpec
from simcore.workloads._base import Workload
from simcore.workloads.layout import RankLayout
from simcore.workloads.transformer.generator import TransformerWorkload, build_transformer
from simcore.workloads.transformer.memory import footprint_bytes, peak_footprint
from simcore.workloads.transformer.size import transformer_graph_nodes
from simcore.workloads.transformer.spec import ModelSpec

__all__ = ["TransformerFamily"]


class TransformerFamily:
    """GPT-style decoder transformers (dense or mixture of experts)."""

    name = "transformer"
    spec_type: type = ModelSpec

    def tiny_spec(self) -> ModelSpec:
        """``conf/workload/gpt_tiny.yaml``: 4 layers, h=256, 4 heads, 512 tokens, vocabulary 1024."""
        return ModelSpec(name="tiny", num_layers=4, hidden_size=256, num_heads=4, seq_len=512,
                         vocab_size=1024)

    def check(self, spec: ModelSpec, parallel: ParallelSpec, cluster: SystemSpec) -> str | None:
        """Megatron's divisibility rules for the resolved ``parallel``."""
        m, par = spec, parallel
        try:  # uneven splits are allowed (simcore.specs.layer_split); each chunk needs a layer
            par.chunk_layers(m.num_layers, m.output_layer_equivalents())
        except InputError as err:
            return str(err)
        rules = [
            (m.num_heads % par.tp == 0, "workload.num_heads", m.num_heads,
             f"must be divisible by tp={par.tp}"),
            (m.kv_heads % par.tp == 0, "workload.num_kv_heads", m.kv_heads,
             f"must be divisible by tp={par.tp}"),
            (m.ffn % par.tp == 0, "workload.ffn_hidden_size", m.ffn,
             f"must be divisible by tp={par.tp}"),
            (m.shared_ffn_hidden_size % par.tp == 0, "workload.shared_ffn_hidden_size",
             m.shared_ffn_hidden_size, f"must be divisible by tp={par.tp}"),
            (m.seq_len % par.cp == 0, "workload.seq_len", m.seq_len,
             f"must be divisible by cp={par.cp}"),
            (m.num_experts % par.ep == 0, "workload.num_experts", m.num_experts,
             f"must be divisible by ep={par.ep}"),
            (par.ep == 1 or m.is_moe, "parallel.ep", par.ep,
             "expert parallelism needs num_experts > 1"),
            (par.ep_overlap_chunks <= par.micro_batch * m.seq_len // par.cp,
             "parallel.ep_overlap_chunks", par.ep_overlap_chunks,
             f"must be at most the tokens of a micro-batch "
             f"({par.micro_batch * m.seq_len // par.cp}): a chunk holds at least one"),
        ]
        for ok, key, value, rule in rules:
            if not ok:
                return str(InputError(key, value, rule))
        return None

    def build(self, spec: ModelSpec, parallel: ParallelSpec, gpus_per_node: int) -> Workload:
        """:func:`build_transformer`."""
        return build_transformer(spec, parallel, gpus_per_node)

    def graph_nodes(self, spec: ModelSpec, parallel: ParallelSpec, gpus_per_node: int) -> int:
        """:func:`~simcore.workloads.transformer.size.transformer_graph_nodes`."""
        return transformer_graph_nodes(spec, parallel, gpus_per_node)

    def footprint(self, spec: ModelSpec, parallel: ParallelSpec, stage: int) -> dict[str, int]:
        """:func:`footprint_bytes` of ``stage``."""
        return footprint_bytes(cast(Any, spec), cast(Any, parallel), stage)

    def peak_footprint(self, spec: ModelSpec, parallel: ParallelSpec) -> tuple[int, dict[str, int]]:
        """:func:`peak_footprint`."""
        return peak_footprint(cast(Any, spec), cast(Any, parallel))

    def flops_per_iter(self, spec: ModelSpec, parallel: ParallelSpec) -> float:
        """Model FLOPs per sample x global batch."""
        return spec.model_flops_per_sample() * parallel.global_batch

    def samples_per_iter(self, spec: ModelSpec, parallel: ParallelSpec) -> int:
        """The global batch (sequences)."""
        return int(parallel.global_batch)

    def tokens_per_iter(self, spec: ModelSpec, parallel: ParallelSpec) -> int:
        """Global batch x sequence length."""
        return int(parallel.global_batch) * spec.seq_len

    def export_traces(self, workload: Workload, layout: RankLayout,
                      template_us: NDArray[np.float64]) -> tuple[dict[int, Any], dict[int, tuple[int, ...]]]:
        """:func:`~simcore.workloads.transformer.export.transformer_to_traces` (every rank)."""
        from simcore.workloads.transformer.export import transformer_to_traces

        if not isinstance(workload, TransformerWorkload):
            raise InputError("workload", type(workload).__name__, "not a transformer workload")
        traces, groups = transformer_to_traces(workload, layout, template_us)
        return dict(traces), groups

    def export_files(self, workload: Workload, layout: RankLayout, template_us: NDArray[np.float64]
                     ) -> tuple[Iterator[tuple[int, bytes]], int, dict[int, tuple[int, ...]]]:
        """:func:`~simcore.workloads.transformer.export.transformer_to_files`: the same traces as
        file bytes, rank by rank, without building them (what ``chakra export`` writes)."""
        from simcore.workloads.transformer.export import transformer_to_files

        if not isinstance(workload, TransformerWorkload):
            raise InputError("workload", type(workload).__name__, "not a transformer workload")
        return transformer_to_files(workload, layout, template_us)
