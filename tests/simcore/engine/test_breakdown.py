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


def test_a_plan_without_pipeline_stages_has_no_bubble_not_a_rounding_residue() -> None:
    """bubble = T - compute - exposed is left as the subtraction's rounding (~1e-16 s on about
    half of 64 hardware variants of a pp 1 plan before) when a stage never waits; it is 0, and
    a pp 4 plan keeps its bubble, with compute + exposed + bubble = T on every point."""
    from dataclasses import replace

    from simcore.api import simulate_batch
    from simcore.specs.parallel import ParallelSpec
    from simcore.specs.system import SystemSpec
    from simcore.workloads.transformer.spec import ModelSpec

    model = ModelSpec(num_layers=24, hidden_size=2304, num_heads=24, seq_len=2048,
                      vocab_size=51200)
    rng = np.random.default_rng(0)
    base = SystemSpec(num_gpus=32)
    systems = [replace(base, scaleup=replace(base.scaleup, bandwidth_GBps=float(up)),
                       scaleout=replace(base.scaleout, bandwidth_GBps=float(out)))
               for up, out in zip(rng.uniform(50, 900, 64), rng.uniform(5, 100, 64), strict=True)]
    flat = simulate_batch(model, ParallelSpec(tp=2, pp=1, global_batch=64), systems)
    assert np.all(flat.bubble_s == 0.0)
    deep = simulate_batch(model, ParallelSpec(tp=2, pp=4, global_batch=64), systems)
    assert np.all(deep.bubble_s > 0.01)
    for res in (flat, deep):
        np.testing.assert_allclose(res.compute_s + res.exposed_comm_s + res.bubble_s,
                                   res.iteration_time_s, rtol=1e-12)
