"""Which network dimension each hop of a communication template crosses, as ASTRA-sim charges it.

The real ranks and communicator groups are the exporter's: :class:`simcore.workloads.layout.
RankLayout` numbers the ranks by ``parallel.rank_order`` and gives every group's members, and
:func:`simcore.workloads.transformer.export.collective_group` says which group a collective
template uses; a collective runs as one logical ring over its group's sorted members.
ASTRA-sim's analytical network charges a message entirely to the *first* dimension where source
and destination differ (reference/astra-sim-and-chakra.md §3, ``MultiDimTopology.cpp``;
:meth:`RankLayout.hop_dim`): with dim 0 = the GPUs of a node, a hop between two nodes whose local
indices differ is charged to the scale-up dimension. Per template this module returns, for a
ring step count K, the fewest and most scale-up hops among any rank's K consecutive ring hops
(rank i's K-th step waits for the K hops into i, i-1, ...), and for a point-to-point template
whether its messages cross dimension 1.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from simcore.ir.ops import COMPUTE
from simcore.specs.parallel import ParallelSpec
from simcore.workloads.layout import RankLayout
from simcore.workloads.transformer.export import collective_group, cross_stage, node_stages
from simcore.workloads.transformer.generator import TransformerWorkload

__all__ = ["CommEndpoints", "comm_endpoints"]

IntArray = NDArray[np.int64]

_KINDS = ("tp", "dp", "pp", "cp", "ep")  # engine COMM_KINDS order of template kinds


@dataclass
class CommEndpoints:
    """Per communication template: the rings of its collectives or its point-to-point pairs.

    Attributes:
        layout: the real ranks (and the topology coordinates hops are charged by).
        rings: template -> (G, n) distinct rings, members ascending (the ring order).
        pairs: template -> (P, 2) distinct (source, destination) ranks.
    """

    layout: RankLayout
    rings: dict[int, IntArray] = field(default_factory=dict)
    pairs: dict[int, IntArray] = field(default_factory=dict)
    _windows: dict[tuple[int, int], tuple[int, int]] = field(default_factory=dict)

    def add_rings(self, template: int, rings: IntArray) -> None:
        """Record ``rings`` (G, n) for ``template`` (duplicates dropped)."""
        have = self.rings.get(template)
        both = rings if have is None else np.concatenate([have, rings])
        self.rings[template] = np.unique(both, axis=0)

    def add_pairs(self, template: int, pairs: IntArray) -> None:
        """Record ``pairs`` (P, 2) for ``template`` (duplicates dropped)."""
        have = self.pairs.get(template)
        both = pairs if have is None else np.concatenate([have, pairs])
        self.pairs[template] = np.unique(both, axis=0)

    def intra_window(self, template: int, steps: int) -> tuple[int, int]:
        """(min, max) over ranks of the scale-up hops among the ``steps`` ring hops into it."""
        hit = self._windows.get((template, steps))
        if hit is not None:
            return hit
        r = self.rings[template]
        n = r.shape[1]
        # intra[g, j]: the hop into member j of ring g is charged to dimension 0
        intra = (self.layout.hop_dim(np.roll(r, 1, axis=1), r) == 0).astype(np.int64)
        reps = -(-steps // n) + 1
        csum = np.concatenate([np.zeros((r.shape[0], 1), dtype=np.int64),
                               np.cumsum(np.tile(intra, reps), axis=1)], axis=1)
        ends = np.arange(n) + (reps - 1) * n + 1  # window of `steps` hops ending at member i
        a = csum[:, ends] - csum[:, ends - steps]
        out = (min(steps, int(a.min())), max(0, int(a.max())))
        self._windows[(template, steps)] = out
        return out

    def p2p_dims(self, template: int) -> set[int]:
        """Dimensions the template's messages are charged to."""
        p = self.pairs[template]
        return {int(d) for d in np.unique(self.layout.hop_dim(p[:, 0], p[:, 1]))}


def _stage_ranks(lay: RankLayout, stages: tuple[int, ...]) -> IntArray:
    return np.flatnonzero(np.isin(lay.coord_table[:, 3], stages)).astype(np.int64)


def comm_endpoints(w: TransformerWorkload, par: ParallelSpec, gpus_per_node: int) -> CommEndpoints:
    """Rings and pairs of every communication template of ``w`` (the exporter's groups)."""
    lay = RankLayout.of(par, gpus_per_node)
    g, ops = w.graph, w.ops
    tmpl = g.attr("template").astype(np.int64)
    peer = g.attr("peer")
    out = CommEndpoints(lay)
    seen: set[tuple[int, tuple[int, ...], int]] = set()
    stage_col, pp_stride = lay.coord_table[:, 3], lay.strides["pp"]
    for i in range(g.num_nodes):
        t = int(tmpl[i])
        kind_idx = ops.template_kind[t]
        if kind_idx == COMPUTE or not ops.templates[t]:
            continue
        stages = node_stages(g, i)
        cost = ops.kernels[ops.templates[t][0][0]][0]
        key = (t, stages, int(peer[i]) if cost == "p2p" else -1)
        if key in seen:
            continue
        seen.add(key)
        if cost == "coll":
            kind = collective_group(ops.template_names[t], kind_idx, stages, w.num_stages)
            across = cross_stage(kind)
            if across is not None:
                tab, row = lay.across_stages(across)
                rings = tab[np.unique(row[_stage_ranks(lay, stages)])]
            else:  # a group kind's groups lie within one stage
                tab = lay.table(kind)
                rings = tab[np.isin(stage_col[tab[:, 0]], stages)]
            out.add_rings(t, rings)
            continue
        src = _stage_ranks(lay, stages)
        if _KINDS[kind_idx] == "pp":
            dst = src + (int(peer[i]) - stage_col[src]) * pp_stride
        else:  # context-parallel ring step to the next cp rank
            c = lay.coord_table[src, 1]
            dst = src + ((c + 1) % lay.cp - c) * lay.strides["cp"]
        out.add_pairs(t, np.stack([src, dst], axis=1))
    return out
