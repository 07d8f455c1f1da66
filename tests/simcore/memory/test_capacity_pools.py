"""Memory per stage against its own pool's HBM capacity (simcore.memory.check_memory)."""

from __future__ import annotations

import numpy as np
import pytest

from simcore.errors import InputError
from simcore.hardware.batch import SystemBatch
from simcore.memory import check_memory, footprint_bytes
from simcore.specs.parallel import ParallelSpec
from simcore.specs.system import AcceleratorSpec, DevicePool, SystemSpec
from simcore.workloads.transformer.spec import ModelSpec

GIB = 2**30
MODEL = ModelSpec(name="tiny", num_layers=4, hidden_size=256, num_heads=4, seq_len=512,
                  vocab_size=1024)
PAR = ParallelSpec(pp=2, global_batch=16).resolve(16)


def _cluster(small_gib: float) -> SystemSpec:
    small = AcceleratorSpec(name="small", hbm_capacity_gib=small_gib)
    return SystemSpec(num_gpus=16, pools=(DevicePool(count=8), DevicePool(small, count=8)))


def test_each_stage_is_checked_against_its_pool() -> None:
    need = [footprint_bytes(MODEL, PAR, s)["total"] for s in (0, 1)]
    # pool 1's capacity sits between stage 0's and stage 1's needs (or the other way round)
    lo, hi = sorted(need)
    gap = (lo + hi) / 2 / GIB
    sb = SystemBatch.from_specs([_cluster(gap), _cluster(80.0)])
    big_stage = int(np.argmax(need))
    small_stage = 1 - big_stage
    ok_map = [1 if s == small_stage else 0 for s in (0, 1)]
    bad_map = [1 if s == big_stage else 0 for s in (0, 1)]
    fits, peak, reasons = check_memory(MODEL, PAR, sb, ok_map)
    assert fits.tolist() == [True, True] and reasons == ("", "")
    np.testing.assert_array_equal(peak, [hi / GIB, hi / GIB])
    fits, _, reasons = check_memory(MODEL, PAR, sb, lambda s: bad_map[s])
    assert fits.tolist() == [False, True]
    assert reasons[0].startswith(f"out of memory: stage {big_stage} on pool 1 (small) needs")
    assert f"> {gap:.1f} GiB" in reasons[0]


def test_default_map_is_pool_zero_and_same_as_all_zero_map() -> None:
    sb = SystemBatch.from_specs([_cluster(1e-3)])
    fits, peak, reasons = check_memory(MODEL, PAR, sb)
    assert fits.tolist() == [True] and reasons == ("",)  # pool 1's tiny HBM is not used
    fits0, peak0, _ = check_memory(MODEL, PAR, sb, [0, 0])
    assert fits0.tolist() == [True]
    np.testing.assert_array_equal(peak0, peak)


def test_unknown_pool_in_the_map_is_an_input_error() -> None:
    sb = SystemBatch.from_specs([_cluster(80.0)])
    with pytest.raises(InputError) as err:
        check_memory(MODEL, PAR, sb, [0, 2])
    assert (err.value.key, err.value.value) == ("pool_of_stage[1]", 2)
