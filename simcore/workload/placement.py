"""Mapping of parallel groups onto the topology: group size and members per scale-up domain.

Ranks are numbered in Megatron-LM's order ``tp-cp-dp-pp`` (tensor innermost), consecutive
ranks filling a node of ``gpus_per_node`` GPUs. A group of ``size`` members at ``stride``
(the product of the degrees inside it) has ``min(size, gpus_per_node // stride)`` members per
node when ``stride < gpus_per_node`` and one per node otherwise; it spans several nodes when
``size * stride > gpus_per_node``. This is what tells a collective which links it runs on
(DESIGN.md: each collective runs on the links it would use). Expert parallelism is carved out
of the data-parallel ranks (Megatron-Core), so an EP group has stride ``tp * cp``.
"""

from __future__ import annotations

from typing import NamedTuple

from simcore.specs.parallel import ParallelSpec

__all__ = ["GroupSpan", "group_spans"]


class GroupSpan(NamedTuple):
    """A communication group as the cost models see it."""

    size: int
    ranks_per_node: int

    @property
    def cross_node(self) -> bool:
        """True when the group spans more than one scale-up domain."""
        return self.ranks_per_node < self.size


def _span(size: int, stride: int, gpus_per_node: int) -> GroupSpan:
    if size <= 1:
        return GroupSpan(1, 1)
    per_node = 1 if stride >= gpus_per_node else max(1, min(size, gpus_per_node // stride))
    return GroupSpan(size, per_node)


def group_spans(parallel: ParallelSpec, gpus_per_node: int) -> dict[str, GroupSpan]:
    """Spans of the tp, cp, dp (dense gradients: dp x cp), ep, edp (expert gradients) and pp
    (neighbouring stages) groups of a resolved plan."""
    tp, cp, dp, ep = parallel.tp, parallel.cp, parallel.dp_size, parallel.ep
    g = gpus_per_node
    return {
        "tp": _span(tp, 1, g),
        "cp": _span(cp, tp, g),
        "dp": _span(dp * cp, tp, g),
        "ep": _span(ep, tp * cp, g),
        "edp": _span(dp // ep, tp * cp * ep, g),
        "pp": _span(2 if parallel.pp > 1 else 1, tp * cp * dp, g),
    }
