"""Ray workers started by ``init_ray`` reuse their heap for large temporaries.

In a Ray worker process, glibc's malloc gave the heap back after every batch and faulted it in
again (thousands of page faults per batch); :data:`search.run.workers.WORKER_MALLOC_ENV` sets
the maxima of glibc's dynamic thresholds. Measured with the worker's own page-fault counter on
a real local Ray (without the setting: ~51,000 faults here).
"""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = [pytest.mark.ray]


def test_workers_get_the_malloc_thresholds_and_reuse_their_heap(ray_local: Any) -> None:
    from search.run.workers import WORKER_MALLOC_ENV

    def faults_of_repeated_allocations() -> tuple[dict[str, str], int]:
        import os
        import resource

        import numpy as np

        def batch() -> None:  # like a batch: many 2 MiB temporaries alive, then all freed
            live = [np.ones(2**18) for _ in range(10)]
            del live

        env = {k: v for k, v in os.environ.items() if k.startswith("MALLOC_")}
        batch()  # first use: the heap grows once
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        for _ in range(10):  # 10 x 20 MiB: 51,200 faults when the heap is given back each time
            batch()
        return env, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before

    env, faults = ray_local.get(ray_local.remote(num_cpus=1)(
        faults_of_repeated_allocations).remote())
    assert env == WORKER_MALLOC_ENV
    assert faults < 2_000, faults
