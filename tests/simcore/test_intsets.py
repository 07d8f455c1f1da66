"""``unique_sorted`` / ``unique_first`` against ``np.unique`` (the reference they replace)."""

from __future__ import annotations

import numpy as np
import pytest

from simcore.ir.intsets import unique_first, unique_inverse, unique_sorted


@pytest.mark.parametrize(("size", "high", "seed"),
                         [(0, 1, 0), (1, 5, 1), (2, 1, 2), (50, 7, 3), (4000, 300, 4),
                          (40000, 2**40, 5), (3000, 3000, 6)])
def test_unique_matches_np_unique(size: int, high: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    a = rng.integers(-high, high, size=size, dtype=np.int64)
    got = unique_sorted(a)
    ref = np.unique(a)
    assert got.dtype == ref.dtype
    np.testing.assert_array_equal(got, ref)
    vals, first = unique_first(a)
    ref_vals, ref_first = np.unique(a, return_index=True)
    np.testing.assert_array_equal(vals, ref_vals)
    np.testing.assert_array_equal(first, ref_first)  # first occurrence of repeated values
    vals, first, inverse = unique_inverse(a)
    ref_vals, ref_first, ref_inverse = np.unique(a, return_index=True, return_inverse=True)
    np.testing.assert_array_equal(vals, ref_vals)
    np.testing.assert_array_equal(first, ref_first)
    np.testing.assert_array_equal(inverse, ref_inverse.reshape(-1))


def test_unique_first_picks_the_earliest_of_repeats() -> None:
    vals, first = unique_first(np.array([5, 3, 5, 3, 1], dtype=np.int64))
    assert vals.tolist() == [1, 3, 5]
    assert first.tolist() == [4, 1, 0]
