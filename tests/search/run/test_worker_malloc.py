"""The pool's Ray actors reuse their heap for large temporaries.

In a Ray worker process, glibc's malloc gave the heap back after every batch and faulted it in
again (thousands of page faults per batch); :func:`search.run.workers.keep_heap`, called by
every pool actor at start, fixes glibc's thresholds at their dynamic maxima. Measured with the
actor's own page-fault counter on a real local Ray: a plain task in a fresh worker shows the
faults without the setting, an actor of the pool's worker class (its real ``__init__``) shows
them gone. The pool takes worker processes that Ray started ahead of time, which a Ray
``runtime_env`` would prevent.
"""

from __future__ import annotations

import platform
from typing import Any

import pytest

pytestmark = [pytest.mark.ray]

#: page faults of the probe below when the heap is given back after each of its 10 rounds
#: (10 x 20 MiB of 4 KiB pages: 51,200) and the bound that says it was kept
_FAULTS_IF_RETURNED = 51_200
_KEPT_BELOW = 2_000


def _glibc() -> bool:
    return platform.libc_ver()[0] == "glibc"


@pytest.mark.skipif(not _glibc(), reason="glibc's malloc only")
def test_pool_actors_keep_their_heap_and_plain_workers_do_not(ray_local: Any) -> None:
    from search.run.workers import _Worker

    def _faults_of_repeated_allocations() -> int:  # nested: Ray pickles it by value
        """Minor page faults of 10 rounds of ten live 2 MiB arrays, freed at each round's end."""
        import resource

        import numpy as np

        def batch() -> None:  # like a batch: many 2 MiB temporaries alive, then all freed
            live = [np.ones(2**18) for _ in range(10)]
            del live

        batch()  # first use: the heap grows once
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        for _ in range(10):
            batch()
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before

    class Probe(_Worker):
        def faults(self) -> int:
            return _faults_of_repeated_allocations()

    actor = ray_local.remote(num_cpus=1)(Probe).remote()
    kept = ray_local.get(actor.faults.remote())
    ray_local.kill(actor)
    plain = ray_local.get(ray_local.remote(num_cpus=1)(_faults_of_repeated_allocations).remote())
    assert kept < _KEPT_BELOW, kept
    assert plain > _FAULTS_IF_RETURNED // 2, plain  # the setting is what makes the difference


def test_keep_heap_reports_whether_glibc_took_the_thresholds() -> None:
    from search.run.workers import keep_heap

    assert keep_heap() == _glibc()
