"""Size of a transformer iteration graph, computed without building it (a resource bound).

Counts what :mod:`simcore.workloads.transformer.generator` emits (one representative rank per
pipeline stage; the other ranks of a stage run the same program and add no nodes): per
micro-batch and layer, the forward, recompute and backward steps (a step cut into
``TP_OVERLAP_CHUNKS`` pieces with TP overlap, a ring-attention step into ``2n - 1`` nodes, a
chunked all-to-all into ``3n``, a ``sync`` after cut steps; with ``overlap_blocks`` two plain
ops per run of cut steps or ring); per layer the gradient reductions and parameter gathers of
the ZeRO stage; per pass the embedding or output layer and the pipeline send; per stage the
embedding reductions and the optimizer step. The builder condenses a pass's layers into one run when their
steps are plain ops (:mod:`simcore.ir.runs`): such a run costs one entry, not one per node, and
the graph's nodes are only built when something reads them (the exact count is then known:
``Condensed.chains.num_nodes``). The counts are upper bounds, exact up to the ends of the model
(checked against built graphs in ``tests/contracts/test_workload_families.py``).
"""

from __future__ import annotations

from collections.abc import Sequence

from simcore.ir.ops import OpTable
from simcore.specs.parallel import ParallelSpec
from simcore.workloads.layout import RankLayout
from simcore.workloads.transformer.emitter import TP_OVERLAP_CHUNKS, close_overlap_blocks
from simcore.workloads.transformer.layers import Step, build_layer_ops
from simcore.workloads.transformer.spec import ModelSpec

__all__ = ["transformer_graph_nodes"]


def _step_nodes(steps: Sequence[Step], overlap_tp: bool) -> int:
    """Nodes :meth:`Emitter.steps` emits for ``steps``."""
    count, cut = 0, False
    for step in steps:
        if overlap_tp and step[0] in ("tp", "c"):
            count += TP_OVERLAP_CHUNKS
            cut = True
            continue
        cut = False
        if step[0] == "moe":  # dispatch, experts and combine of every chunk
            count += 3 * int(step[4])
            continue
        n = int(step[3]) if step[0] == "attn" else 1
        count += 2 * n - 1
    return count + (1 if cut else 0)


def _condensable(steps: Sequence[Step], overlap_tp: bool) -> bool:
    """Whether the builder emits ``steps`` as one run (no TP-overlap pieces, no CP ring, no
    chunked all-to-all)."""
    return not any((overlap_tp and st[0] in ("tp", "c")) or (st[0] == "attn" and st[3] != 1)
                   or st[0] == "moe" for st in steps)


def transformer_graph_nodes(model: ModelSpec, parallel: ParallelSpec, gpus_per_node: int,
                            condensed: bool = True) -> int:
    """Upper bound on what the builder of ``model`` under the resolved ``parallel``
    materialises (see module docstring): with ``condensed`` (what
    :func:`~simcore.workloads.transformer.generator.build_transformer` does), a run of a
    pass's layers counts once when its steps allow it, every other node once; without, every
    node of the equivalent node graph."""
    par = parallel
    ops = OpTable()
    lo = build_layer_ops(model, par, RankLayout.of(par, gpus_per_node).spans(), ops)
    ov = par.tp_comm_overlap
    if par.overlap_blocks:  # closed-form blocks: plain steps
        lo, ov = close_overlap_blocks(lo, ops, ov)[0], False
    m, layers, zero = par.num_micro_batches, model.num_layers, par.zero_stage
    g = 2 if model.is_moe else 1  # dense and expert parameter groups
    runs = (condensed and zero != 3 and _condensable(lo.fwd, ov)
            and _condensable(lo.recompute + lo.bwd, ov))
    if runs:  # per pass one run of its layers; per-layer reductions cut it, one run each
        layer_nodes = 2 * m * par.pp * par.vp + 2 * g * layers * (m if zero >= 2 else 1)
    else:
        per_layer = (_step_nodes(lo.fwd, ov) + _step_nodes(lo.recompute, ov)
                     + _step_nodes(lo.bwd, ov))
        layer_nodes = m * layers * per_layer
    dp_nodes = g * layers * ((m if zero >= 2 else 1) + (2 * m if zero == 3 else 0)
                             + (1 if zero in (1, 2) else 0))
    ends = _step_nodes(lo.head_fwd, ov) + _step_nodes(lo.head_bwd, ov) + 4
    return layer_nodes + dp_nodes + m * par.pp * par.vp * ends + 3 * par.pp
