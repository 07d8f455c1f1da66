"""``compile_levels`` (all levels at once) against the per-level peel + ``compile_steps``.

The reference is the straightforward path: :func:`levels_by_peel` (numpy Kahn peel, one level
at a time) and :func:`compile_steps` per level. Same levels, same compiled steps, on random
condensed DAGs of several shapes (deep, wide, ragged) and on a cycle.
"""

from __future__ import annotations

import numpy as np
import pytest

from simcore.engine._steps import compile_steps
from simcore.engine.schedule import compile_levels, levels_by_peel


def _random_dag(rng: np.random.Generator, c: int, segs_per_chain: int, max_preds: int
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A DAG over chains in a random topological order: chain waits for segments of earlier
    chains in that order."""
    topo = rng.permutation(c)
    rank = np.empty(c, dtype=np.int64)
    rank[topo] = np.arange(c)
    counts = rng.integers(1, segs_per_chain + 1, size=c)
    seg_chain = np.repeat(np.arange(c, dtype=np.int64), counts)
    first_seg = np.concatenate([[0], np.cumsum(counts)[:-1]])
    ptr, preds = [0], []
    for i in range(c):
        earlier = topo[:rank[i]]
        k = 0 if earlier.size == 0 else int(rng.integers(0, min(max_preds, earlier.size) + 1))
        chosen = rng.choice(earlier, size=k, replace=False) if k else []
        segs = sorted(int(first_seg[j] + rng.integers(0, counts[j])) for j in chosen)
        preds.extend(segs)
        ptr.append(len(preds))
    return (np.asarray(ptr, dtype=np.int64), np.asarray(preds, dtype=np.int64), seg_chain)


@pytest.mark.parametrize(("c", "segs", "max_preds", "seed"),
                         [(1, 1, 0, 0), (50, 3, 1, 1), (300, 2, 2, 2), (400, 4, 5, 3),
                          (1000, 1, 3, 4), (200, 2, 12, 5)])
def test_compile_levels_matches_the_peel_and_compile_steps(c: int, segs: int, max_preds: int,
                                                           seed: int) -> None:
    cptr, pred_seg, seg_chain = _random_dag(np.random.default_rng(seed), c, segs, max_preds)
    ref_levels = levels_by_peel(cptr, pred_seg, seg_chain, c)
    assert ref_levels is not None
    ref_steps, ref_pos = compile_steps(
        [(lv.chains, lv.pred_segs, lv.seg, lv.pred_chains) for lv in ref_levels], c)
    got = compile_levels(cptr, pred_seg, seg_chain, c)
    assert got is not None
    levels, steps, pos = got
    np.testing.assert_array_equal(pos, ref_pos)
    assert len(levels) == len(ref_levels)
    for a, b in zip(levels, ref_levels, strict=True):
        for name in ("chains", "pred_segs", "seg", "pred_chains"):
            np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
        assert a.single == b.single
    assert len(steps) == len(ref_steps)
    for a, b in zip(steps, ref_steps, strict=True):
        assert (a.lo, a.hi, a.k) == (b.lo, b.hi, b.k)
        for name in ("pred_chains", "pred_segs", "seg"):
            np.testing.assert_array_equal(getattr(a, name), getattr(b, name))


def test_compile_levels_reports_a_cycle() -> None:
    cptr = np.array([0, 1, 2], dtype=np.int64)  # chain 0 waits for 1, 1 for 0
    pred_seg = np.array([1, 0], dtype=np.int64)
    seg_chain = np.array([0, 1], dtype=np.int64)
    assert compile_levels(cptr, pred_seg, seg_chain, 2) is None
    assert levels_by_peel(cptr, pred_seg, seg_chain, 2) is None
