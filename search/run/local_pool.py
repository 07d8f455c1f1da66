"""The sweep's worker pool without Ray: batches evaluated one after another in this process.

Model: the :class:`~search.run.workers.WorkerPool` interface that
:func:`search.sweep.driver.run_sweep` drives (``actors``, ``warm``, ``wait_ready``,
``imap_unordered``, ``retries``, ``batches_per_node``, ``close``) over the same evaluation
(:func:`search.run.batch.evaluate_timed`), so a sweep gives the same table either way. For
sweeps whose evaluation is shorter than a local Ray's start and stop (``sweep.in_process=true``):
the default 16-point sweep evaluates in ~0.05 s, while Ray took ~5 s to start and ~1.3 s to
stop on a 2-core machine. One evaluator: batches are sized as for one worker, nothing runs in
parallel, and a batch that raises stops the sweep (there is no process to lose and replace).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from search.run.batch import BatchOutput, SpecBatch, evaluate_timed
from search.run.workers import keep_heap

__all__ = ["LocalPool", "local_pool"]


class LocalPool:
    """Evaluates :class:`SpecBatch` es in the calling process, in submission order."""

    def __init__(self) -> None:
        keep_heap()  # as a Ray worker does: batches reuse the heap instead of faulting it in
        self.node_id = f"local:{socket.gethostname()}"
        self.actors: list[str] = [self.node_id]  # one evaluator (guided batch sizes count it)
        self.retries = 0
        self.batches_per_node: dict[str, int] = {}

    def warm(self, batch: SpecBatch) -> None:
        """Nothing to do ahead: the first batch builds its structure when it is evaluated."""

    def wait_ready(self) -> list[tuple[str, int]]:
        """This process: (node id, pid)."""
        return [(self.node_id, os.getpid())]

    def imap_unordered(self, batches: Iterable[SpecBatch]) -> Iterator[BatchOutput]:
        """Evaluate ``batches`` one by one; yield each output as it is done. BLAS runs one
        thread meanwhile, as in a Ray worker (Ray sets ``OMP_NUM_THREADS=1``): the engine's
        products are small, and a second OpenBLAS thread only spins (the GPT-3 grid in process:
        10.9 s of CPU for 7.9 s of wall with two BLAS threads, 7.1 s with one, same wall)."""
        from threadpoolctl import threadpool_limits

        with threadpool_limits(limits=1, user_api="blas"):  # restored when the loop ends
            for batch in batches:
                out = evaluate_timed(batch, self.node_id, os.getpid())
                self.batches_per_node[self.node_id] = self.batches_per_node.get(self.node_id, 0) + 1
                yield out

    def close(self) -> None:
        """Nothing to stop."""


@contextmanager
def local_pool() -> Iterator[LocalPool]:
    """A :class:`LocalPool` (the counterpart of :func:`search.run.workers.ray_pool`)."""
    yield LocalPool()
