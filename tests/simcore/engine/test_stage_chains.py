"""``_stage_chains`` (one sort per grouping) against the pass per stage it replaced, kept here."""

from __future__ import annotations

import numpy as np
import pytest

from simcore.engine.evaluate import _stage_chains
from simcore.engine.result import COMM_KINDS
from simcore.ir.intsets import unique_first
from simcore.ir.streams import CommKind, StreamKind

IntArray = np.ndarray


def _per_stage(p: int, skind: IntArray, sstage: IntArray, speer: IntArray,
               chain_kind: IntArray) -> tuple[list[IntArray], list[dict[str, IntArray]]]:
    compute_chains = []
    comm_chains = []
    own = (skind != StreamKind.COMPUTE) & (skind != StreamKind.LINK) & (skind != StreamKind.OTHER)
    link = skind == StreamKind.LINK
    code = np.where(link, int(CommKind.PP), chain_kind)
    comp = skind == StreamKind.COMPUTE
    for s in range(p):
        compute_chains.append(np.flatnonzero(comp & (sstage == s)))
        mine = np.flatnonzero((own & (sstage == s)) | (link & ((sstage == s) | (speer == s))))
        codes = code[mine]
        present, first = unique_first(codes)
        comm_chains.append({COMM_KINDS[int(k)]: mine[codes == k]
                            for k in present[np.argsort(first)].tolist()})
    return compute_chains, comm_chains


@pytest.mark.parametrize("seed", range(30))
def test_one_sort_grouping_is_the_pass_per_stage(seed: int) -> None:
    rng = np.random.default_rng(seed)
    p = int(rng.integers(1, 9))
    c = int(rng.integers(0, 400))
    kinds = np.asarray([int(k) for k in StreamKind], dtype=np.int64)
    skind = rng.choice(kinds, c)
    sstage = rng.integers(-1, p + 2, c)  # a few stages outside 0..p-1
    speer = np.where(rng.random(c) < 0.3, sstage, rng.integers(-1, p + 1, c))
    chain_kind = rng.integers(0, len(COMM_KINDS), c)
    got = _stage_chains(p, skind, sstage, speer, chain_kind)
    want = _per_stage(p, skind, sstage, speer, chain_kind)
    for a, b in zip(got[0], want[0], strict=True):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)
    for a, b in zip(got[1], want[1], strict=True):
        assert list(a) == list(b)  # kinds in the same order
        for k in a:
            assert a[k].dtype == b[k].dtype
            np.testing.assert_array_equal(a[k], b[k])
