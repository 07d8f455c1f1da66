"""HAP's sharding-ratio LP against closed forms on two devices."""

from __future__ import annotations

import numpy as np
import pytest

from simcore.errors import InputError
from simcore.hetero.ratios import AffineCosts, program_cost_s, solve_ratios


def _costs(comp_slope: list[float], comm_slope: list[float]) -> AffineCosts:
    z = np.zeros((1, 2))
    return AffineCosts(z, np.array([comp_slope]), z, np.array([comm_slope]))


@pytest.mark.parametrize(("f1", "f2"), [(3.0, 1.0), (3.86, 2.15), (1.0, 1.0)])
def test_compute_only_ratios_are_proportional_to_speed(f1: float, f2: float) -> None:
    """min max(B1/F1, B2/F2) s.t. B1 + B2 = 1: B = F / (F1 + F2), time 1 / (F1 + F2)."""
    ratios, t = solve_ratios(_costs([1 / f1, 1 / f2], [0.0, 0.0]), np.array([1.0, 1.0]))
    np.testing.assert_allclose(ratios, [f1 / (f1 + f2), f2 / (f1 + f2)], rtol=1e-9)
    assert t == pytest.approx(1 / (f1 + f2), rel=1e-9)


@pytest.mark.parametrize("c", [0.2, 0.9, 1.1, 3.0])
def test_a_padded_collective_pulls_the_ratios_back_towards_even(c: float) -> None:
    """Add a padded collective costing c * max_d B_d (F1 = 3, F2 = 1). For B1 in [1/2, 3/4]
    the cost is (1 - B1)/F2 + c B1, slope c - 1/F2: the optimum is the proportional split
    B1 = 3/4 when c < 1/F2 = 1, else the even split 1/2 (HAP §1.5: the LP is less skewed than
    the FLOPS-proportional split when communication matters)."""
    ratios, t = solve_ratios(_costs([1 / 3, 1.0], [c, c]), np.array([1.0, 1.0]))
    b1 = 0.75 if c < 1.0 else 0.5
    np.testing.assert_allclose(ratios, [b1, 1 - b1], atol=1e-9)
    assert t == pytest.approx(max(b1 / 3, 1 - b1) + c * b1, rel=1e-9)


def test_pool_counts_weight_the_ratios_and_constants_are_kept() -> None:
    """Pools of 2 and 6 devices, speeds 2 : 1: 2 B1 + 6 B2 = 1, B1 = 2 B2 -> B2 = 1/10."""
    costs = AffineCosts(np.array([[0.5, 0.5]]), np.array([[0.5, 1.0]]), np.array([[0.25, 0.25]]),
                        np.zeros((1, 2)))
    ratios, t = solve_ratios(costs, np.array([2.0, 6.0]))
    np.testing.assert_allclose(ratios, [0.2, 0.1], rtol=1e-9)
    assert t == pytest.approx(0.5 + 0.1 + 0.25) == program_cost_s(costs, ratios)


def test_bad_counts_are_named() -> None:
    with pytest.raises(InputError, match="counts"):
        solve_ratios(_costs([1.0, 1.0], [0.0, 0.0]), np.array([1.0, 0.0]))
