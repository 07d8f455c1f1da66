"""Per-point systems and batch evaluation inside a worker process (search/run/workers.py)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from search.run.batch import SpecBatch, evaluate_batch, materialize_systems
from search.run.workers import pick_actor
from simcore.api import simulate_batch
from simcore.specs.parallel import ParallelSpec
from simcore.specs.system import SystemSpec
from simcore.workloads.transformer.spec import ModelSpec


def _batch(scaleout_GBps, hbm_GBps):
    base = SystemSpec(num_gpus=16)
    n = len(scaleout_GBps)
    return base, SpecBatch(
        batch_id=0, group="g", point_ids=np.arange(n), model=ModelSpec(name="m", num_layers=4),
        parallel=ParallelSpec(tp=2, global_batch=16), bases=(base,),
        base_index=np.zeros(n, dtype=np.int64),
        overrides={"scaleout.bandwidth_GBps": np.asarray(scaleout_GBps, dtype=float),
                   "accelerator.hbm_bandwidth_GBps": np.asarray(hbm_GBps, dtype=float)})


def test_systems_equal_validated_replacements_and_bad_values_are_reported_per_point():
    base, batch = _batch([25.0, -1.0, 50.0, 25.0], [2000.0, 2000.0, 0.0, 3000.0])
    systems, errors = materialize_systems(batch)
    assert systems[1] is None and errors[1].startswith("invalid_spec: system.scaleout.bandwidth_GBps")
    assert systems[2] is None and "hbm_bandwidth_GBps" in errors[2]
    for i in (0, 3):
        want = replace(base, scaleout=replace(base.scaleout, bandwidth_GBps=batch.overrides[
            "scaleout.bandwidth_GBps"][i]), accelerator=replace(
            base.accelerator, hbm_bandwidth_GBps=batch.overrides["accelerator.hbm_bandwidth_GBps"][i]))
        assert systems[i] == want and errors[i] == ""


def test_invalid_points_are_infeasible_rows_and_the_rest_match_simulate_batch():
    _, batch = _batch([25.0, -1.0, 50.0], [2000.0, 2000.0, 3000.0])
    cols = evaluate_batch(batch)
    assert cols["feasible"].tolist()[1] is False and cols["reason"][1].startswith("invalid_spec")
    assert np.isnan(cols["iteration_time_s"][1])
    systems, _ = materialize_systems(batch)
    direct = simulate_batch(batch.model, batch.parallel, [systems[0], systems[2]])
    assert cols["iteration_time_s"][[0, 2]].tolist() == direct.iteration_time_s.tolist()
    assert cols["feasible"][[0, 2]].tolist() == direct.feasible.tolist()


def _reference(base: SystemSpec, subs: dict[str, float]) -> tuple[SystemSpec | None, str]:
    """A point's system by full copies, field by field in the order of ``subs``: each value
    set on the sub-spec with ``replace`` (an accelerator checks itself on each), then the
    system copied with that sub-spec and every rule run (``replace``)."""
    from simcore.errors import InputError

    heads: dict[str, list[tuple[str, float]]] = {}
    for key, value in subs.items():
        head, name = key.split(".")
        heads.setdefault(head, []).append((name, value))
    try:
        for head, leaves in heads.items():
            sub = getattr(base, head)
            for name, value in leaves:
                typed = float(value) if isinstance(getattr(sub, name), float) else value
                sub = replace(sub, **{name: typed})
            base = replace(base, **{head: sub})
    except InputError as err:
        return None, f"invalid_spec: {err}"
    return base, ""


def test_column_checked_values_give_the_systems_and_errors_of_full_copies():
    """materialize_systems checks a column of values on listed float fields at once
    (FIELD_RANGES); it must give, per point, the system and the error that copying the spec
    with every check gives, for valid and invalid values, ints in float fields, two leaves of
    one field set in order (the fp16-or-bf16 rule after each), and two bases."""
    rng = np.random.default_rng(3)
    n = 400
    edges = np.array([0.0, -1.0, np.nan, np.inf, -np.inf, 1.0, 1.5, 0.5, 1e-300])

    def column(low: float, high: float) -> np.ndarray:
        col = rng.uniform(low, high, n)
        pick = rng.random(n) < 0.15
        col[pick] = rng.choice(edges, int(pick.sum()))
        return col

    bases = (SystemSpec(num_gpus=16),
             SystemSpec(num_gpus=16, accelerator=replace(SystemSpec().accelerator,
                                                         peak_tflops_fp16=0.0)))
    overrides = {
        "scaleout.bandwidth_GBps": column(1, 400),
        "scaleout.latency_ns": rng.integers(-2, 6000, n),  # an int column on a float field
        "accelerator.peak_tflops_bf16": column(-50, 1000),
        "accelerator.peak_tflops_fp16": column(-50, 1000),
        "accelerator.hbm_bandwidth_GBps": column(-10, 3500),
        "calibration.scaleup_pair_loss": column(-0.2, 1.2),
        "calibration.hbm_efficiency": column(0, 1.3),
    }
    base_index = rng.integers(0, 2, n)
    batch = SpecBatch(batch_id=0, group="g", point_ids=np.arange(n),
                      model=ModelSpec(name="m", num_layers=4),
                      parallel=ParallelSpec(tp=2, global_batch=16), bases=bases,
                      base_index=base_index, overrides=overrides)
    systems, errors = materialize_systems(batch)
    valid = 0
    for i in range(n):
        point = {k: v[i].item() for k, v in overrides.items()}
        want, want_err = _reference(bases[base_index[i]], point)
        assert errors[i] == want_err, (i, point)
        assert systems[i] == want, (i, point)
        if want is not None:
            valid += 1
            assert type(systems[i].scaleout.latency_ns) is float
    assert 20 < valid < n - 20  # both outcomes are exercised


def test_an_idle_actor_takes_the_next_batch_before_a_busy_one_of_its_group() -> None:
    """The first fill spreads one structure group over both actors (0, 1, 0, 1) instead of
    queueing two batches on the first; an idle actor takes a batch another actor last ran."""
    load, last = [0, 0], ["", ""]
    picks = []
    for _ in range(4):
        i = pick_actor(load, last, "X", inflight=2)
        picks.append(i)
        load[i] += 1
        last[i] = "X"
    assert picks == [0, 1, 0, 1]
    assert pick_actor([1, 0], ["X", "Y"], "X", inflight=2) == 1


def test_without_an_idle_actor_the_group_s_last_actor_then_the_least_loaded() -> None:
    assert pick_actor([1, 1], ["Y", "X"], "X", inflight=2) == 1  # warm structure
    assert pick_actor([2, 1], ["X", "Y"], "X", inflight=2) == 1  # its actor is full
    assert pick_actor([2, 1, 1], ["Y", "Y", "Y"], "X", inflight=3) == 1  # least loaded
    assert pick_actor([0, 0], ["Y", "X"], "X", inflight=1) == 1  # idle ones: warm first
