"""Which network dimension each hop of a communication template crosses, as ASTRA-sim charges it.

The real ranks and communicator groups are the exporter's (:class:`simcore.workloads.transformer.export.
RankLayout`: rank = t + tp (c + cp (d + dp s)), a collective of a group kind runs as one logical
ring over its sorted members). ASTRA-sim's analytical network charges a message entirely to the
*first* dimension where source and destination differ (reference/astra-sim-and-chakra.md §3,
``MultiDimTopology.cpp``): with dim 0 = the GPUs of a node, a hop between two nodes whose local
indices differ is charged to the scale-up dimension. Per template this module returns, for a
ring step count K, the fewest and most scale-up hops among any rank's K consecutive ring hops
(rank i's K-th step waits for the K hops into i, i-1, ...), and for a point-to-point template
whether its messages cross dimension 1.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from simcore.ir.graph import Graph
from simcore.ir.ops import COMPUTE
from simcore.specs.parallel import ParallelSpec
from simcore.workloads.transformer.export import RankLayout
from simcore.workloads.transformer.generator import TransformerWorkload

__all__ = ["CommEndpoints", "comm_endpoints"]

_KINDS = ("tp", "dp", "pp", "cp", "ep")  # engine COMM_KINDS order of template kinds


@dataclass
class CommEndpoints:
    """Per communication template: the rings of its collectives or its point-to-point pairs."""

    gpus_per_node: int
    rings: dict[int, set[tuple[int, ...]]] = field(default_factory=dict)
    pairs: dict[int, set[tuple[int, int]]] = field(default_factory=dict)
    _windows: dict[tuple[int, int], tuple[int, int]] = field(default_factory=dict)

    def dim(self, src: int, dst: int) -> int:
        """First dimension where two NPUs differ (0: local index, 1: node)."""
        return 0 if src % self.gpus_per_node != dst % self.gpus_per_node else 1

    def intra_window(self, template: int, steps: int) -> tuple[int, int]:
        """(min, max) over ranks of the scale-up hops among the ``steps`` ring hops into it."""
        hit = self._windows.get((template, steps))
        if hit is not None:
            return hit
        lo, hi = steps, 0
        for ring in self.rings[template]:
            r = np.asarray(ring, dtype=np.int64)
            intra = (r % self.gpus_per_node != np.roll(r, 1) % self.gpus_per_node).astype(np.int64)
            n = r.size  # intra[j]: the hop into member j stays on dimension 0
            reps = -(-steps // n) + 1
            csum = np.concatenate([[0], np.cumsum(np.tile(intra, reps))])
            ends = np.arange(n) + (reps - 1) * n + 1  # window of `steps` hops ending at member i
            a = csum[ends] - csum[ends - steps]
            lo, hi = min(lo, int(a.min())), max(hi, int(a.max()))
        self._windows[(template, steps)] = (lo, hi)
        return lo, hi

    def p2p_dims(self, template: int) -> set[int]:
        """Dimensions the template's messages are charged to."""
        return {self.dim(s, d) for s, d in self.pairs[template]}


def _stages(g: Graph, i: int) -> tuple[int, ...]:
    if int(g.rank[i]) >= 0:
        return (int(g.rank[i]),)
    names = [g.resource_names[int(r)] for r in g.resources_of(i)]
    return tuple(sorted({int(n[1:].split(".")[0]) for n in names if n.startswith("s")}))


def comm_endpoints(w: TransformerWorkload, par: ParallelSpec, gpus_per_node: int) -> CommEndpoints:
    """Rings and pairs of every communication template of ``w`` (the exporter's groups)."""
    lay = RankLayout(par.tp, par.cp, par.dp_size, par.pp, par.ep)
    g, ops = w.graph, w.ops
    tmpl = g.attr("template").astype(np.int64)
    peer = g.attr("peer")
    out = CommEndpoints(gpus_per_node)
    seen: set[tuple[int, tuple[int, ...], int]] = set()
    for i in range(g.num_nodes):
        t = int(tmpl[i])
        kind_idx = ops.template_kind[t]
        if kind_idx == COMPUTE or not ops.templates[t]:
            continue
        stages = _stages(g, i)
        cost = ops.kernels[ops.templates[t][0][0]][0]
        key = (t, stages, int(peer[i]) if cost == "p2p" else -1)
        if key in seen:
            continue
        seen.add(key)
        ranks = [r for r in range(lay.num_ranks) if lay.coords(r)[3] in stages]
        if cost == "coll":
            name = ops.template_names[t]
            if len(stages) > 1:
                group = "x" + ",".join(map(str, stages))
            elif name.startswith("embedding_tied"):
                group = f"x0,{w.num_stages - 1}"
            else:
                group = "edp" if name.startswith("edp") else _KINDS[kind_idx]
            out.rings.setdefault(t, set()).update(tuple(sorted(lay.members(group, r))) for r in ranks)
        elif _KINDS[kind_idx] == "pp":
            pairs = {(r, lay.rank(*lay.coords(r)[:3], int(peer[i]))) for r in ranks}
            out.pairs.setdefault(t, set()).update(pairs)
        else:  # context-parallel ring step to the next cp rank
            nxt = {(r, lay.rank(c[0], (c[1] + 1) % lay.cp, c[2], c[3]))
                   for r in ranks for c in [lay.coords(r)]}
            out.pairs.setdefault(t, set()).update(nxt)
    return out
