"""Per-point systems and batch evaluation inside a worker process (search/run/workers.py)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from search.run.batch import SpecBatch, evaluate_batch, materialize_systems
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
