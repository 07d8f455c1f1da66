"""Exposed-communication accounting on hand-made timelines."""

from __future__ import annotations

import numpy as np

from simcore.engine.breakdown import exposed_by_kind, union_measure


def _col(*values: float) -> np.ndarray:
    return np.array(values, dtype=np.float64)[:, None]


def test_union_measure_merges_overlaps() -> None:
    assert union_measure(_col(0, 1, 5), _col(2, 3, 6))[0] == 4.0


def test_exposed_is_the_part_outside_compute_charged_to_the_opener() -> None:
    # compute busy [0,4] and [6,10]; dp [3,8] (exposed 4..6 = 2); pp [5,7] inside dp's span
    comp_s, comp_e = _col(0, 6), _col(4, 10)
    comm = {"dp": (_col(3), _col(8)), "pp": (_col(5), _col(7))}
    exposed, length = exposed_by_kind(comp_s, comp_e, comm)
    assert exposed["dp"][0] == 2.0 and exposed["pp"][0] == 0.0
    assert length[0] == 5.0  # |[3,8]|


def test_batch_columns_are_independent() -> None:
    comp_s = np.array([[0.0, 0.0], [6.0, 2.0]])
    comp_e = np.array([[4.0, 1.0], [10.0, 3.0]])
    comm = {"tp": (np.array([[4.0, 0.0]]), np.array([[7.0, 5.0]]))}
    exposed, _ = exposed_by_kind(comp_s, comp_e, comm)
    np.testing.assert_array_equal(exposed["tp"], [2.0, 3.0])  # 4..6 ; 1..2 and 3..5
