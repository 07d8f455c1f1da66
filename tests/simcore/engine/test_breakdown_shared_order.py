"""The breakdown's shared sort order and cover rows against the per-column computation.

``exposed_by_kind`` tries one column's interval order and one column's cover rows on every
column and sorts / searches only where they fail. The reference is the previous code path
(kept below): a stable ``argsort`` per column and ``searchsorted`` on column-offset keys, run
one column at a time (offset 0, so its comparisons are exact). Results must be bit-identical.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from simcore.api import compiled_workload
from simcore.engine import evaluate
from simcore.engine.breakdown import _Cover, _sorted_by_start, exposed_by_kind
from simcore.engine.evaluate import evaluate_times, template_durations
from simcore.hardware.batch import SystemBatch
from simcore.specs.parallel import ParallelSpec
from simcore.specs.system import SystemSpec
from simcore.workloads.transformer.spec import ModelSpec


def _previous_cover(starts: np.ndarray, ends: np.ndarray, t: np.ndarray) -> np.ndarray:
    n, b = starts.shape
    span = float(max(np.abs(ends).max(), np.abs(starts).max())) if n else 0.0
    offset = np.arange(b, dtype=np.float64)[:, None] * (2.0 * span + 1.0)
    flat = (starts.T + offset).ravel()
    ends_t = np.ascontiguousarray(ends.T)
    prefix = np.cumsum(ends_t - starts.T, axis=1)
    m = t.shape[0]
    tt = np.ascontiguousarray(t.T)
    j = np.searchsorted(flat, (tt + offset).ravel(), side="right")
    base = (np.arange(b) * n).repeat(m)
    has = j > base
    j -= 1
    np.maximum(j, base, out=j)
    inside = ends_t.ravel().take(j)
    inside -= tt.ravel()
    np.maximum(inside, 0.0, out=inside)
    g = prefix.ravel().take(j)
    g -= inside
    np.putmask(g, ~has, 0.0)
    return np.asarray(g.reshape(b, m).T)


def _previous(comp_s: np.ndarray, comp_e: np.ndarray,
              comm: dict[str, tuple[np.ndarray, np.ndarray]]) -> dict[str, np.ndarray]:
    """The previous ``exposed_by_kind``, one column at a time up to the sums per kind, which
    run over the whole (n, B) batch as before (numpy sums a single column pairwise)."""
    b = comp_s.shape[1]
    present = [k for k, (st, _) in comm.items() if st.shape[0]]
    outs, kinds_cols = [], []
    for c in range(b):
        starts = np.vstack([comm[k][0][:, c:c + 1] for k in present])
        ends = np.vstack([comm[k][1][:, c:c + 1] for k in present])
        label = np.repeat(np.arange(len(present)), [comm[k][0].shape[0] for k in present])
        order = np.argsort(starts, axis=0, kind="stable")
        s = np.take_along_axis(starts, order, axis=0)
        e = np.take_along_axis(ends, order, axis=0)
        run = np.maximum.accumulate(e, axis=0)
        lo = np.maximum(s, np.concatenate([s[:1], run[:-1]], axis=0))
        hi = np.maximum(lo, e)
        g = _previous_cover(comp_s[:, c:c + 1], comp_e[:, c:c + 1], np.vstack([lo, hi]))
        n = lo.shape[0]
        outside = (hi - lo) - (g[n:] - g[:n])
        outs.append(outside)
        kinds_cols.append(label[order])
    outside, kinds = np.hstack(outs), np.hstack(kinds_cols)
    return {k: np.where(kinds == i, outside, 0.0).sum(axis=0) for i, k in enumerate(present)}


def _timeline(rng: np.random.Generator, b: int) -> tuple[np.ndarray, np.ndarray,
                                                         dict[str, tuple[np.ndarray, np.ndarray]]]:
    """A compute stream and two comm kinds whose columns are scaled copies of one timeline
    (shared order) with some columns jittered (order changes) and some starts rounded to
    a coarse grid (equal starts in different rows)."""
    n, m = 40, 30
    gaps = rng.uniform(0.1, 1.0, (2 * n, 1))
    edges = np.cumsum(gaps, axis=0) * rng.uniform(0.8, 1.2, (1, b))
    comp_s, comp_e = edges[0::2], edges[1::2]
    span = float(edges.max())
    cs = np.sort(rng.uniform(0, span, (m, 1)), axis=0) * np.ones((1, b))
    jitter = rng.random(b) < 0.3
    cs[:, jitter] += rng.normal(0, 0.2, (m, int(jitter.sum())))
    coarse = rng.random(b) < 0.2
    cs[:, coarse] = np.round(cs[:, coarse])  # ties across kinds and rows
    ce = cs + rng.uniform(0.05, 2.0, (m, b))
    split = m // 2
    comm = {"dp": (cs[:split], ce[:split]), "pp": (cs[split:], ce[split:])}
    return comp_s, comp_e, comm


@pytest.mark.parametrize("seed", range(6))
def test_exposed_by_kind_equals_the_per_column_sort(seed: int) -> None:
    rng = np.random.default_rng(seed)
    comp_s, comp_e, comm = _timeline(rng, 64)
    got, _ = exposed_by_kind(comp_s, comp_e, comm)
    ref = _previous(comp_s, comp_e, comm)
    assert list(got) == list(ref)
    for k in ref:
        np.testing.assert_array_equal(got[k], ref[k])


def test_the_fallbacks_are_exercised() -> None:
    """The random timelines reach the sort's paths: columns off the shared order, ties in
    row order broken differently (the cover's paths: ``test_breakdown_cover.py``)."""
    rng = np.random.default_rng(4)  # column 0 jittered and rounded: ties in another order
    comp_s, comp_e, comm = _timeline(rng, 64)
    starts = np.vstack([comm["dp"][0], comm["pp"][0]])
    ends = np.vstack([comm["dp"][1], comm["pp"][1]])
    label = np.repeat([0, 1], [comm["dp"][0].shape[0], comm["pp"][0].shape[0]])
    s, e, kinds = _sorted_by_start(starts, ends, label)
    assert kinds.ndim == 2  # some columns sorted on their own
    assert (np.diff(s, axis=0) == 0).any()  # equal starts, kept in row order
    order = np.argsort(starts, axis=0, kind="stable")
    np.testing.assert_array_equal(s, np.take_along_axis(starts, order, axis=0))
    np.testing.assert_array_equal(e, np.take_along_axis(ends, order, axis=0))
    np.testing.assert_array_equal(kinds, label[order])
    per_column = np.hstack([_previous_cover(comp_s[:, c:c + 1], comp_e[:, c:c + 1], s[:, c:c + 1])
                            for c in range(s.shape[1])])
    np.testing.assert_array_equal(_Cover(comp_s, comp_e).covered(s), per_column)


def test_one_column_and_empty_kinds() -> None:
    comp_s, comp_e = np.array([[0.0], [6.0]]), np.array([[4.0], [10.0]])
    comm = {"dp": (np.array([[3.0]]), np.array([[8.0]])), "tp": (np.zeros((0, 1)),) * 2}
    got, length = exposed_by_kind(comp_s, comp_e, comm)
    assert list(got) == ["dp"] and got["dp"][0] == 2.0 and length[0] == 5.0


MODEL = ModelSpec(name="m", num_layers=12, hidden_size=1024, num_heads=16, seq_len=1024,
                  vocab_size=8192)


@pytest.mark.parametrize("plan", [ParallelSpec(tp=2, pp=4, global_batch=32, zero_stage=1),
                                  ParallelSpec(tp=2, pp=4, vp=3, global_batch=32)],
                         ids=["1f1b", "interleaved"])
def test_batch_breakdown_equals_the_previous_path(plan: ParallelSpec,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A hardware batch (scale-out bandwidth x peak FLOP/s) through evaluate_times, new
    breakdown vs the previous one: the same bits."""
    base = SystemSpec(num_gpus=32)
    systems = [replace(base, scaleout=replace(base.scaleout, bandwidth_GBps=5.0 + 9.0 * i),
                       accelerator=replace(base.accelerator,
                                           peak_tflops_bf16=150.0 + 40.0 * (i % 7)))
               for i in range(48)]
    cw = compiled_workload(MODEL, plan, base)
    tdur = template_durations(cw, SystemBatch.from_specs(systems), "bf16")
    slow = np.linspace(0.0, 0.3, 48)
    new = evaluate_times(cw, tdur, slow)

    def previous(comp_s: np.ndarray, comp_e: np.ndarray, starts: np.ndarray, ends: np.ndarray,
                 label: np.ndarray, names: list[str]) -> dict[str, np.ndarray]:
        """The previous path on the compute intervals inside the padding rows."""
        comm = {k: (starts[label == i], ends[label == i]) for i, k in enumerate(names)}
        return _previous(comp_s[1:-1], comp_e[1:], comm)

    monkeypatch.setattr(evaluate, "exposed_on_padded", previous)
    old = evaluate_times(cw, tdur, slow)
    for k, v in old.exposed_by_kind.items():
        np.testing.assert_array_equal(new.exposed_by_kind[k], v)
    np.testing.assert_array_equal(new.bubble_s, old.bubble_s)
    assert sum(float(v.sum()) for v in new.exposed_by_kind.values()) > 0


def test_window_resort_and_its_fallback_give_each_column_its_stable_order() -> None:
    """Columns off the shared order are re-sorted over the window of out-of-order neighbour
    pairs; a column whose entry must leave the window, or whose equal starts sit out of row
    order after it, is sorted from scratch: every column gets its own stable argsort."""
    n, b = 30, 6
    starts = np.arange(n, dtype=np.float64)[:, None] * np.ones((1, b))
    starts[[5, 6], 1] = starts[[6, 5], 1]  # one swapped pair: fixed inside the window
    starts[20, 2] = -1.0  # must move to the top: outside the window, from scratch
    starts[7, 3] = starts[8, 3] = 7.5  # a tie: kept in row order
    starts[[9, 10], 4] = 9.5  # a tie out of the shared order's rows after sorting
    starts[[10, 9], 4] = [9.25, 9.5]
    ends = starts + 0.5
    label = np.arange(n) % 3
    s, e, kinds = _sorted_by_start(starts, ends, label)
    order = np.argsort(starts, axis=0, kind="stable")
    np.testing.assert_array_equal(s, np.take_along_axis(starts, order, axis=0))
    np.testing.assert_array_equal(e, np.take_along_axis(ends, order, axis=0))
    np.testing.assert_array_equal(kinds, label[order])
