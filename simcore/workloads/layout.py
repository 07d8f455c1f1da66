"""Rank layout of a parallelization plan: coordinates, communicator groups and their topology spans.

The one place that says which real rank holds which (tp, cp, dp, pp) coordinates, used alike by the
workload generator (the span of each group prices its collectives), the Chakra exporter (the
members of each ``pg_name`` group, the pipeline and context-parallel peers) and the ``astra``
fidelity (which network dimension each hop crosses).

Numbering (Megatron-Core's ``RankGenerator``, ``order`` innermost first; default ``tp-cp-dp-pp``):
rank = sum over the four dimensions of coordinate x stride, the stride of a dimension being the
product of the sizes of the dimensions before it in ``parallel.rank_order``. Consecutive ranks fill
a node of ``gpus_per_node`` GPUs, so with the default order a TP group sits inside a node whenever
``tp <= gpus_per_node``. Expert parallelism is carved out of the data-parallel dimension
(Megatron-Core): the dp coordinate splits as ``d = e + ep * k``, the EP group varies ``e`` (``ep``
DP ranks one DP stride apart), the expert-data-parallel group varies ``k`` (DP ranks ``ep`` apart).

Groups of a kind (every group of a kind has the same size):
- ``tp``, ``cp``: ranks differing only in that coordinate;
- ``dp``: dense-gradient reduction over data and context parallelism (dp x cp);
- ``ep``, ``edp``: as above;
- ``pp``: the pipeline group (same tp, cp, dp coordinates on every stage). Its span is the one of
  two neighbouring stages, the hop a pipeline send takes.

Topology coordinates of a rank: (local index = rank mod gpus_per_node, node = rank div
gpus_per_node). ASTRA-sim's multi-dimensional network charges a message to the first dimension where
source and destination differ (reference/astra-sim-and-chakra.md §3, ``MultiDimTopology.cpp``):
:meth:`RankLayout.hop_dim`. A group's span (size, members per node) is counted on the group of rank
0, as the calibrated models have always priced it (on a regular layout every group looks alike).
Device pools fill the ranks in order (``pool_counts``: pool 0 holds ranks ``[0, c0)``, pool 1 the
next ``c1``, ...; one pool when empty): :meth:`RankLayout.device_of`, :meth:`RankLayout.stage_pools`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

from simcore.errors import InputError, require
from simcore.specs.parallel import ParallelSpec

__all__ = ["DIMS", "GROUP_KINDS", "Coords", "GroupSpan", "RankLayout"]

IntArray = NDArray[np.int64]

DIMS = ("tp", "cp", "dp", "pp")
GROUP_KINDS = ("tp", "cp", "dp", "ep", "edp", "pp")
# axes (digits of the mixed-radix rank) each group kind varies; dpi/dpo: d mod ep, d div ep
_KIND_AXES = {"tp": ("tp",), "cp": ("cp",), "dp": ("dpi", "dpo", "cp"), "ep": ("dpi",),
              "edp": ("dpo",), "pp": ("pp",)}


class GroupSpan(NamedTuple):
    """A communication group as the cost models see it."""

    size: int
    ranks_per_node: int

    @property
    def cross_node(self) -> bool:
        """True when the group spans more than one scale-up domain."""
        return self.ranks_per_node < self.size


class Coords(NamedTuple):
    """Parallel coordinates of one rank."""

    tp: int
    cp: int
    dp: int
    pp: int


@dataclass(frozen=True)
class RankLayout:
    """Real ranks of a resolved plan on nodes of ``gpus_per_node`` GPUs.

    Attributes:
        tp, cp, dp, pp, ep: parallel degrees (``dp`` resolved, ``ep`` divides ``dp``).
        rank_order: dimensions innermost first, joined by ``-`` (``parallel.rank_order``).
        gpus_per_node: GPUs of one scale-up domain (dimension 0 of the network).
    """

    tp: int
    cp: int
    dp: int
    pp: int
    ep: int = 1
    rank_order: str = "tp-cp-dp-pp"
    gpus_per_node: int = 1
    pool_counts: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        require(sorted(self.rank_order.split("-")) == sorted(DIMS), "parallel.rank_order",
                self.rank_order, "must order the four dimensions tp, cp, dp, pp joined by '-'")
        require(self.dp % self.ep == 0, "parallel.ep", self.ep, f"must divide dp={self.dp}")
        require(self.gpus_per_node >= 1, "system.gpus_per_node", self.gpus_per_node, "must be >= 1")

    @classmethod
    def of(cls, parallel: ParallelSpec, gpus_per_node: int,
           pool_counts: tuple[int, ...] = ()) -> RankLayout:
        """The layout of a resolved plan (``parallel.dp`` set) on pools of ``pool_counts``
        ranks (rank order; empty = one pool)."""
        p = parallel
        return cls(p.tp, p.cp, p.dp_size, p.pp, p.ep, p.rank_order, gpus_per_node,
                   tuple(pool_counts))

    # --- coordinates -------------------------------------------------------------------------
    @property
    def num_ranks(self) -> int:
        """tp x cp x dp x pp."""
        return self.tp * self.cp * self.dp * self.pp

    @cached_property
    def strides(self) -> dict[str, int]:
        """Rank stride of each dimension (the product of the sizes before it in the order)."""
        sizes = {"tp": self.tp, "cp": self.cp, "dp": self.dp, "pp": self.pp}
        out: dict[str, int] = {}
        acc = 1
        for dim in self.rank_order.split("-"):
            out[dim] = acc
            acc *= sizes[dim]
        return out

    @cached_property
    def _axes(self) -> dict[str, tuple[int, int]]:
        """(size, stride) of every digit: tp, cp, dpi (d mod ep), dpo (d div ep), pp."""
        s = self.strides
        return {"tp": (self.tp, s["tp"]), "cp": (self.cp, s["cp"]), "dpi": (self.ep, s["dp"]),
                "dpo": (self.dp // self.ep, s["dp"] * self.ep), "pp": (self.pp, s["pp"])}

    def rank(self, t: int, c: int, d: int, s: int) -> int:
        """Rank of coordinates (tp, cp, dp, pp)."""
        st = self.strides
        return t * st["tp"] + c * st["cp"] + d * st["dp"] + s * st["pp"]

    def coords(self, rank: int) -> Coords:
        """(tp, cp, dp, pp) coordinates of ``rank``."""
        st = self.strides
        return Coords(rank // st["tp"] % self.tp, rank // st["cp"] % self.cp,
                      rank // st["dp"] % self.dp, rank // st["pp"] % self.pp)

    @cached_property
    def coord_table(self) -> IntArray:
        """(R, 4) coordinates (tp, cp, dp, pp) of every rank."""
        r = np.arange(self.num_ranks, dtype=np.int64)
        sizes = {"tp": self.tp, "cp": self.cp, "dp": self.dp, "pp": self.pp}
        return np.stack([r // self.strides[d] % sizes[d] for d in DIMS], axis=1)

    def stage_of(self, rank: int) -> int:
        """Pipeline stage of ``rank``."""
        return rank // self.strides["pp"] % self.pp

    def ranks_of_stage(self, stage: int) -> IntArray:
        """(R / pp,) ranks of pipeline stage ``stage``, ascending."""
        return np.flatnonzero(self.coord_table[:, 3] == stage).astype(np.int64)

    def moved(self, rank: int, dim: str, value: int) -> int:
        """The rank with ``rank``'s coordinates except ``dim`` set to ``value``."""
        here = self.coords(rank)[DIMS.index(dim)]
        return rank + (value - here) * self.strides[dim]

    def peer(self, rank: int, stage: int) -> int:
        """The rank of the same (tp, cp, dp) coordinates on pipeline stage ``stage``."""
        return self.moved(rank, "pp", stage)

    def at_stages(self, rank: int, stages: tuple[int, ...]) -> tuple[int, ...]:
        """Sorted ranks of ``rank``'s (tp, cp, dp) coordinates on each of ``stages``."""
        return tuple(sorted({self.peer(rank, s) for s in stages}))

    def device_of(self, rank: int) -> int:
        """Device pool of ``rank`` (pools fill the ranks in order)."""
        require(0 <= rank < self.num_ranks, "rank", rank, f"must be in [0, {self.num_ranks})")
        return int(self.rank_pool[rank])

    @cached_property
    def rank_pool(self) -> IntArray:
        """(R,) device pool of every rank."""
        if not self.pool_counts:
            return np.zeros(self.num_ranks, dtype=np.int64)
        require(sum(self.pool_counts) == self.num_ranks, "system.pools", list(self.pool_counts),
                f"pool counts must sum to the ranks tp*cp*dp*pp={self.num_ranks}")
        return np.repeat(np.arange(len(self.pool_counts)), self.pool_counts).astype(np.int64)

    @cached_property
    def stage_pools(self) -> IntArray:
        """(pp, D) ranks of each pipeline stage on each device pool."""
        d = max(1, len(self.pool_counts))
        out = np.zeros((self.pp, d), dtype=np.int64)
        np.add.at(out, (self.coord_table[:, 3], self.rank_pool), 1)
        return out

    @cached_property
    def stage_tp_spans_pools(self) -> NDArray[np.bool_]:
        """(pp,) whether some tensor-parallel group of each stage has ranks on several device
        pools (its work is then split by tensor-shard ratios, not by batch shares)."""
        out = np.zeros(self.pp, dtype=bool)
        if len(self.pool_counts) <= 1:
            return out
        tab = self.table("tp")
        pools = self.rank_pool[tab]
        spans = (pools != pools[:, :1]).any(axis=1)
        np.logical_or.at(out, self.coord_table[tab[:, 0], 3], spans)
        return out

    # --- groups ------------------------------------------------------------------------------
    def _kind_axes(self, kind: str) -> list[tuple[int, int]]:
        if kind not in _KIND_AXES:
            raise InputError("group kind", kind, f"must be one of {', '.join(GROUP_KINDS)}")
        return [self._axes[a] for a in _KIND_AXES[kind]]

    def _offsets(self, kind: str) -> IntArray:
        """Sorted rank offsets of a group's members from its smallest member."""
        off = np.zeros(1, dtype=np.int64)
        for size, stride in self._kind_axes(kind):
            off = np.add.outer(off, np.arange(size, dtype=np.int64) * stride).ravel()
        return np.sort(off)

    def _leaders(self, kind: str) -> IntArray:
        """(R,) the smallest member of each rank's group of ``kind``."""
        r = np.arange(self.num_ranks, dtype=np.int64)
        lead = r.copy()
        for size, stride in self._kind_axes(kind):
            lead -= r // stride % size * stride
        return lead

    def table(self, kind: str) -> IntArray:
        """(G, n) every group of ``kind`` once, members ascending, rows by smallest member."""
        lead = self._leaders(kind)
        firsts = np.flatnonzero(lead == np.arange(self.num_ranks))
        return firsts[:, None] + self._offsets(kind)[None, :]

    def group_index(self, kind: str) -> IntArray:
        """(R,) the row of :meth:`table` holding each rank's group of ``kind``."""
        lead = self._leaders(kind)
        firsts = np.flatnonzero(lead == np.arange(self.num_ranks))
        return np.searchsorted(firsts, lead).astype(np.int64)

    def across_stages(self, stages: tuple[int, ...]) -> tuple[IntArray, IntArray]:
        """Groups of the ranks sharing (tp, cp, dp) coordinates on ``stages`` (e.g. the tied
        embedding of the first and last stage): ((G, n) members ascending, rows by smallest
        member; (R,) row of each rank, -1 off those stages)."""
        st = np.unique(np.asarray(stages, dtype=np.int64))
        base = self.ranks_of_stage(int(st[0]))
        stride = self.strides["pp"]
        tab = base[:, None] + (st - st[0])[None, :] * stride
        r = np.arange(self.num_ranks, dtype=np.int64)
        stage = self.coord_table[:, 3]
        row = np.searchsorted(base, r - (stage - st[0]) * stride).astype(np.int64)
        return tab, np.where(np.isin(stage, st), row, -1)

    def members(self, kind: str, rank: int) -> tuple[int, ...]:
        """Sorted ranks of ``rank``'s group of ``kind`` (tp, cp, dp = dp x cp, ep, edp, pp)."""
        lead = rank
        for size, stride in self._kind_axes(kind):
            lead -= rank // stride % size * stride
        return tuple(int(x) for x in lead + self._offsets(kind))

    def span(self, kind: str) -> GroupSpan:
        """Size and most members per node of the group of rank 0 (pp: two neighbouring stages)."""
        members = self._offsets(kind)
        if kind == "pp":
            members = members[:2] if self.pp > 1 else members[:1]
        if members.size <= 1:
            return GroupSpan(1, 1)
        per_node = int(np.bincount(members // self.gpus_per_node).max())
        return GroupSpan(int(members.size), per_node)

    def spans(self) -> dict[str, GroupSpan]:
        """:meth:`span` of every group kind."""
        return {k: self.span(k) for k in GROUP_KINDS}

    # --- topology ----------------------------------------------------------------------------
    def hop_dim(self, src: IntArray, dst: IntArray) -> IntArray:
        """Network dimension a message from ``src`` to ``dst`` is charged to: the first where
        their topology coordinates differ (0: local index in the node, 1: node)."""
        g = self.gpus_per_node
        return np.where(np.asarray(src) % g != np.asarray(dst) % g, 0, 1).astype(np.int64)

    def crosses(self, kind: str) -> tuple[int, ...]:
        """Topology dimensions along which some group of ``kind`` has members that differ."""
        tab, g = self.table(kind), self.gpus_per_node
        local, node = tab % g, tab // g
        return tuple(d for d, x in enumerate((local, node)) if bool((x != x[:, :1]).any()))
