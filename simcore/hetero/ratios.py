"""HAP's sharding-ratio linear program (Zhang et al., EuroSys 2024, Eq. (3) of Sec. 5.1).

For a fixed distributed program (one strategy per instruction) every instruction ``i`` costs, on
a device of pool ``d``, an affine function of that device's ratio ``B_d`` (its fraction of the
sharded dimension: its batch share or its tensor shard)::

    comp_{i,d}(B) = comp_const_{i,d} + comp_slope_{i,d} * B_d
    comm_{i,d}(B) = comm_const_{i,d} + comm_slope_{i,d} * B_d      (padded collectives: n * B_d)

and the program costs ``sum_i max_d comp_{i,d} + max_d comm_{i,d}`` (no overlap, as HAP's model;
reference/methods-hap-ace-echo.md §1.4-1.5). The LP::

    minimise   sum_i c_i + m_i
    subject to comp_{i,d}(B) <= c_i,  comm_{i,d}(B) <= m_i    for every i, d with devices
               sum_d n_d B_d = 1,  0 <= B_d <= 1

with ``n_d`` devices in pool ``d`` (devices of one pool are identical, so they share one ratio;
HAP has one ratio per device). Unlike the released HAP code the constant terms are kept
(§1.5 notes it drops them). Solved by scipy's HiGHS.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy.optimize import linprog

from simcore.errors import InputError

__all__ = ["AffineCosts", "program_cost_s", "solve_ratios"]

FloatArray = NDArray[np.float64]


@dataclass(frozen=True)
class AffineCosts:
    """Per-instruction, per-pool affine costs of a fixed program, (I, D) arrays of seconds
    (slopes: seconds per unit of ratio ``B_d``)."""

    comp_const: FloatArray
    comp_slope: FloatArray
    comm_const: FloatArray
    comm_slope: FloatArray

    @property
    def shape(self) -> tuple[int, int]:
        """(I, D)."""
        i, d = np.shape(self.comp_const)
        return int(i), int(d)


def program_cost_s(costs: AffineCosts, ratios: FloatArray) -> float:
    """Seconds of the program at ``ratios`` (D,): ``sum_i max_d comp + max_d comm``."""
    b = np.asarray(ratios, dtype=np.float64)[None, :]
    comp = np.asarray(costs.comp_const) + np.asarray(costs.comp_slope) * b
    comm = np.asarray(costs.comm_const) + np.asarray(costs.comm_slope) * b
    return float(comp.max(axis=1).sum() + comm.max(axis=1).sum())


def solve_ratios(costs: AffineCosts, counts: FloatArray) -> tuple[FloatArray, float]:
    """The LP's optimal ratio ``B_d`` of one device of each pool and the program's seconds.

    Args:
        costs: the fixed program's affine costs, (I, D).
        counts: (D,) devices per pool (all > 0).

    Raises:
        InputError: shapes disagree, a count is not positive, or HiGHS finds no optimum.
    """
    n = np.asarray(counts, dtype=np.float64)
    i, d = costs.shape
    if n.shape != (d,) or (n <= 0).any():
        raise InputError("counts", n.tolist(), f"must be {d} positive device counts")
    # variables: B (D), c (I), m (I)
    nv = d + 2 * i
    obj = np.concatenate([np.zeros(d), np.ones(2 * i)])
    rows, rhs = [], []
    for block, (const, slope) in enumerate(((costs.comp_const, costs.comp_slope),
                                            (costs.comm_const, costs.comm_slope))):
        const, slope = np.asarray(const), np.asarray(slope)
        for ii in range(i):
            for dd in range(d):
                row = np.zeros(nv)
                row[dd] = slope[ii, dd]
                row[d + block * i + ii] = -1.0
                rows.append(row)
                rhs.append(-const[ii, dd])
    eq = np.concatenate([n, np.zeros(2 * i)])[None, :]
    bounds = [(0.0, 1.0)] * d + [(0.0, None)] * (2 * i)
    res = linprog(obj, A_ub=np.array(rows), b_ub=np.array(rhs), A_eq=eq, b_eq=[1.0],
                  bounds=bounds, method="highs")
    if res.status != 0:
        raise InputError("ratios", res.message, "the sharding-ratio LP has no optimum")
    ratios = np.asarray(res.x[:d], dtype=np.float64)
    return ratios, program_cost_s(costs, ratios)
