"""The breakdown's cover lookup and running end against straightforward references.

``_Cover.covered`` checks column 0's row on every entry; misses are searched per column (a
column that misses often) or from the neighbouring row, then by binary search. The running
end of an in-order stream is its ends. References: a per-column ``searchsorted`` and the
formula ``prefix[k] - max(end[k] - t, 0)`` written as a plain loop, and the previous
implementation (``_breakdown_previous``). Every result must be bit-identical.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from simcore.api import compiled_workload
from simcore.engine import breakdown, evaluate
from simcore.engine.breakdown import _Cover, _running_end, exposed_by_kind
from simcore.engine.evaluate import evaluate_times, template_durations
from simcore.hardware.batch import SystemBatch
from simcore.specs.parallel import ParallelSpec
from simcore.specs.system import SystemSpec
from tests.simcore.engine import _breakdown_previous as previous
from tests.simcore.engine._graphs import MODEL


def _covered_by_loop(starts: np.ndarray, ends: np.ndarray, t: np.ndarray) -> np.ndarray:
    """G(t) one column and one query at a time: the row by ``searchsorted`` of the column,
    the prefix summed in a loop in the order ``np.cumsum`` sums."""
    n, b = starts.shape
    out = np.empty(t.shape)
    for c in range(b):
        prefix = [0.0]
        for i in range(n):
            prefix.append(prefix[-1] + (ends[i, c] - starts[i, c]))
        for r in range(t.shape[0]):
            k = int(np.searchsorted(starts[:, c], t[r, c], side="right"))
            if k == 0:
                out[r, c] = prefix[0] - max(-np.inf - t[r, c], 0.0)
                continue
            out[r, c] = prefix[k] - max(ends[k - 1, c] - t[r, c], 0.0)
    return out


def _stream(rng: np.random.Generator, n: int, b: int, grid: float) -> tuple[np.ndarray,
                                                                           np.ndarray]:
    """An in-order stream of ``n`` intervals in ``b`` columns: scaled copies of one timeline,
    some columns shifted, starts and ends on a coarse grid (touching intervals, zero-length
    ones, equal starts)."""
    gaps = rng.uniform(0.0, 1.0, (2 * n, 1)) * rng.uniform(0.7, 1.3, (1, b))
    gaps[rng.random(gaps.shape) < 0.15] = 0.0  # touching / zero-length intervals
    edges = np.round(np.cumsum(gaps, axis=0) / grid) * grid
    edges[:, rng.random(b) < 0.3] += grid * rng.integers(-3, 4, 1)
    return edges[0::2], edges[1::2]


@pytest.mark.parametrize("share", [0, 4, 10**9], ids=["near-only", "default", "own-only"])
@pytest.mark.parametrize("seed", range(4))
def test_covered_equals_the_per_column_loop(seed: int, share: int,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(seed)
    starts, ends = _stream(rng, 30, 12, 0.25)
    t = np.sort(np.vstack([starts, ends, (starts + ends) / 2, starts - 5.0, ends + 5.0,
                           rng.uniform(-1, float(ends.max()) + 1, (20, 12))]), axis=0)
    monkeypatch.setattr(_Cover, "OWN_SEARCH_SHARE", share)
    got = _Cover(starts, ends).covered(t)
    np.testing.assert_array_equal(got, _covered_by_loop(starts, ends, t))


def test_every_search_path_is_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    """A column equal to column 0 (shared rows), one whose queries fall one row off
    (neighbour), one far off (binary search) and one off on most queries (own search)."""
    n, m = 40, 60
    base = np.arange(n, dtype=np.float64) * 2.0
    starts = np.repeat(base[:, None], 4, axis=1)
    ends = starts + 1.0
    t = np.repeat(np.linspace(-1.0, 2.0 * n, m)[:, None], 4, axis=1)
    t[10, 1] = starts[int(t[10, 0] // 2) + 1, 1]  # on the next start: one row above
    t[:6, 2] = -1.0  # before every interval: up to 3 rows below the shared ones
    starts[:, 3] += 0.9  # most queries of column 3 off by one
    ends[:, 3] += 0.9
    calls: dict[str, int] = {}

    def spy(name: str) -> None:
        orig = getattr(_Cover, name)

        def wrapped(self: _Cover, *args: object) -> object:
            calls[name] = calls.get(name, 0) + 1
            return orig(self, *args)
        monkeypatch.setattr(_Cover, name, wrapped)

    spy("_search_columns")
    spy("_search_near")
    far: list[int] = []
    bisect = _Cover._bisect

    def spied_bisect(self: _Cover, *args: np.ndarray) -> np.ndarray:
        far.append(args[0].size)
        return bisect(self, *args)
    monkeypatch.setattr(_Cover, "_bisect", spied_bisect)
    got = _Cover(starts, ends).covered(t)
    np.testing.assert_array_equal(got, _covered_by_loop(starts, ends, t))
    assert calls == {"_search_columns": 1, "_search_near": 1}
    assert far and far[0] > 0


def test_running_end_of_an_in_order_stream_is_its_ends() -> None:
    rng = np.random.default_rng(0)
    ends = np.cumsum(rng.uniform(0.0, 1.0, (50, 8)), axis=0) + 0.5
    out = np.empty_like(ends)
    assert _running_end(ends, out) is ends
    np.testing.assert_array_equal(ends, np.maximum.accumulate(ends, axis=0))
    nested = ends.copy()
    nested[10, 3] = 100.0  # one long interval: the later ends are inside it
    np.testing.assert_array_equal(_running_end(nested, out),
                                  np.maximum.accumulate(nested, axis=0))
    zero_first = ends.copy()
    zero_first[0, 2] = 0.0  # a zero end: the accumulate decides which zero it keeps
    assert _running_end(zero_first, out) is out


def _random_comm(rng: np.random.Generator, comp_s: np.ndarray, comp_e: np.ndarray
                 ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Three kinds: an in-order stream (dp), nested and overlapping intervals (pp), intervals
    on the compute edges (tp): ties with each other and with compute."""
    b = comp_s.shape[1]
    dp_s, dp_e = _stream(rng, 25, b, 0.25)
    span = float(comp_e.max())
    pp_s = np.round(rng.uniform(0, span, (12, 1)) * rng.uniform(0.9, 1.1, (1, b)) * 4) / 4
    pp_e = pp_s + np.round(rng.uniform(0, 6, (12, b)) * 4) / 4  # nested in / over others
    rows = rng.integers(0, comp_s.shape[0], 10)
    tp_s, tp_e = comp_e[rows], comp_e[rows] + 0.5  # starting where compute ends
    return {"dp": (dp_s, dp_e), "pp": (pp_s, pp_e), "tp": (tp_s, tp_e)}


@pytest.mark.parametrize("seed", range(8))
def test_exposed_by_kind_equals_the_previous_implementation(seed: int) -> None:
    rng = np.random.default_rng(seed)
    comp_s, comp_e = _stream(rng, 40, 24, 0.5)
    comm = _random_comm(rng, comp_s, comp_e)
    for kinds in (["dp"], ["pp", "dp"], ["dp", "pp", "tp"]):
        sub = {k: comm[k] for k in kinds}
        got, length = exposed_by_kind(comp_s, comp_e, sub)
        want, want_length = previous.exposed_by_kind(comp_s, comp_e, sub)
        assert list(got) == list(want)
        for k in want:
            np.testing.assert_array_equal(got[k], want[k])
        np.testing.assert_array_equal(length, want_length)


ZERO_PLANS = [ParallelSpec(tp=2, pp=2, global_batch=32, zero_stage=3),
              ParallelSpec(tp=2, pp=4, global_batch=64, zero_stage=2, recompute="selective"),
              ParallelSpec(tp=1, pp=1, global_batch=32, zero_stage=3)]


@pytest.mark.parametrize("plan", ZERO_PLANS, ids=["zero3-pp2", "zero2-pp4", "zero3-pp1"])
def test_zero_plans_give_the_previous_breakdown(plan: ParallelSpec,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """A hardware batch of a ZeRO-2 / ZeRO-3 plan (pipeline stages, several micro-batches):
    the new breakdown vs the previous one, the same bits; and the compute intervals handed
    to the breakdown are sorted and disjoint in every column (what the cover relies on)."""
    base = SystemSpec(num_gpus=32)
    systems = [replace(base, scaleout=replace(base.scaleout, bandwidth_GBps=2.0 + 3.0 * (i % 23)),
                       accelerator=replace(base.accelerator,
                                           peak_tflops_bf16=100.0 + 37.0 * (i % 11)))
               for i in range(96)]
    cw = compiled_workload(MODEL, plan, base)
    tdur = template_durations(cw, SystemBatch.from_specs(systems), "bf16")
    slow = np.linspace(0.0, 0.3, len(systems))
    seen: list[int] = []

    def checked(comp_s: np.ndarray, comp_e: np.ndarray, *rest: object) -> object:
        s, e = comp_s[1:-1], comp_e[1:]
        assert (e >= s).all() and (s[1:] >= e[:-1]).all()
        seen.append(s.shape[0])
        return breakdown.exposed_on_padded(comp_s, comp_e, *rest)  # type: ignore[arg-type]

    monkeypatch.setattr(evaluate, "exposed_on_padded", checked)
    new = evaluate_times(cw, tdur, slow)
    assert seen and min(seen) > 1
    monkeypatch.setattr(evaluate, "exposed_on_padded", previous.exposed_on_padded)
    old = evaluate_times(cw, tdur, slow)
    for name in ("iteration_time_s", "compute_s", "bubble_s"):
        np.testing.assert_array_equal(getattr(new, name), getattr(old, name))
    assert list(new.exposed_by_kind) == list(old.exposed_by_kind)
    for k, v in old.exposed_by_kind.items():
        np.testing.assert_array_equal(new.exposed_by_kind[k], v)
    assert new.exposed_by_kind["dp"].max() > 0
