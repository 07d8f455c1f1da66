"""Batch sizes paced by measured cost: guided self-scheduling in seconds, not points.

Model: guided self-scheduling (Polychronopoulos and Kuck, IEEE Trans. Computers 36(12), 1987)
hands out 1/(2 x workers) of the work that remains per batch, so the workers run out of work
within a small batch of each other. :func:`search.sweep.driver.guided_batch_size` counts that
work in points, which holds while every point costs the same; points of different structures
do not (GPT-3 175B at tp 8, pp 8 on 1,024 GPUs: ~30 us a point in a batch, ~24 ms with TP
communication overlap). :class:`GroupPace` counts it in seconds: each structure group's cost
per point is measured on its finished batches (``BatchOutput.elapsed_s``, the evaluation inside
the worker; the lowest seconds per point seen, since a group's first batch on an actor also
builds its structure), a group not measured yet gets probe batches of the smallest size, and a
measured group's batch holds its share of the remaining seconds (groups not measured yet count
at the mean of the measured rates). With one group, or groups of equal cost, the sizes are the
point-counted ones.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

__all__ = ["GroupPace"]


class GroupPace:
    """Batch sizes of a sweep's structure groups from their measured seconds per point.

    Args:
        workers: actors evaluating batches.
        lo, hi: the smallest and largest batch, in points (the probe size is ``lo``).
    """

    def __init__(self, workers: int, lo: int, hi: int) -> None:
        self.workers = max(int(workers), 1)
        self.lo, self.hi = int(lo), int(hi)
        self.remaining: dict[str, int] = {}  # points per group not handed out yet
        self._rate: dict[str, float] = {}  # lowest seconds per point seen, per group
        self._group_of: dict[int, str] = {}  # batch id -> group
        # kept as batches are drawn and observed, so a batch costs O(1), not O(groups):
        self._rate_sum = 0.0  # of the measured rates (their mean prices the others)
        self._known_s = 0.0  # seconds left in the measured groups
        self._unknown = 0  # points left in the groups not measured yet

    def start(self, remaining: Mapping[str, int]) -> None:
        """The points of each group still to be handed out."""
        self.remaining = dict(remaining)
        self._known_s = sum(n * self._rate[g] for g, n in self.remaining.items()
                            if g in self._rate)
        self._unknown = sum(n for g, n in self.remaining.items() if g not in self._rate)

    def take(self, group: str, batch_id: int) -> int:
        """Points in batch ``batch_id`` of ``group`` (counted as handed out)."""
        left = self.remaining.get(group, 0)
        rate = self._rate.get(group)
        if rate is None:
            size = self.lo  # a probe: the group's cost is not known yet
        else:
            mean = self._rate_sum / len(self._rate)
            share_s = max(0.0, self._known_s + self._unknown * mean) / (2 * self.workers)
            # sizes are whole points: the tolerance absorbs rounding in the running sums
            size = self.hi if rate <= 0 else math.ceil(share_s / rate - 1e-6)
            size = min(self.hi, max(self.lo, size))
        size = max(1, min(size, left))
        self.remaining[group] = left - size
        if rate is None:
            self._unknown -= size
        else:
            self._known_s -= size * rate
        self._group_of[batch_id] = group
        return size

    def observe(self, batch_id: int, points: int, seconds: float) -> None:
        """A finished batch: ``points`` evaluated in ``seconds`` inside the worker."""
        group = self._group_of.pop(batch_id, None)
        if group is None or points <= 0 or not math.isfinite(seconds) or seconds < 0:
            return
        rate = seconds / points
        old = self._rate.get(group)
        if old is not None and rate >= old:
            return
        left = self.remaining.get(group, 0)
        if old is None:
            self._unknown -= left
            self._known_s += left * rate
            self._rate_sum += rate
        else:
            self._known_s += left * (rate - old)
            self._rate_sum += rate - old
        self._rate[group] = rate

    def rate(self, group: str) -> float | None:
        """The group's measured seconds per point (None: not measured yet)."""
        return self._rate.get(group)
