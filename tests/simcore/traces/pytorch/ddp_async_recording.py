"""One rank of a real DDP (gloo, two ranks on this machine) run of a small MLP whose bucket
all-reduce is asynchronous; rank 0 records ``STEPS`` training steps with ExecutionTraceObserver.

``python ddp_async_recording.py RANK FOLDER STEPS``: both ranks share the store file
``FOLDER/store``; rank 0 writes ``FOLDER/steps.json``.

gloo opens its ``gloo:all_reduce`` record function on its worker thread when the work starts and
closes it there after completing the work's future and running the future's callbacks; under
load the worker gets there late, at random. Here it does every time: the comm hook is DDP's
default all-reduce (it returns the work's future, DDP goes on when the sum is in), and on rank 0
the future has one more callback, after DDP's, that keeps the worker from closing the record
until the step's optimizer ran. Rank 1 issues its all-reduce only once rank 0 has added that
callback, so rank 0's work cannot complete before it. Each step is released before the next
begins (``Work.wait`` returns once the record closed); the observer stops before the last one
is released.
"""

import sys
import threading
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch.profiler import ExecutionTraceObserver

BATCH = 8
LAYERS = ((16, 32), (32, 4))  # Linear(16, 32), ReLU, Linear(32, 4): four parameter tensors
WAIT_S = 120.0  # bounds a wait for the other rank or a release; a working run waits far less


class _AsyncAllReduce:
    """DDP comm hook (:meth:`hook`): the bucket's all-reduce (its sum: the values do not matter here), not
    waited for; on rank 0 held open until :meth:`release`."""

    def __init__(self, rank: int, store: dist.Store) -> None:
        self.rank, self.store, self.issued = rank, store, 0
        self.holds: list[tuple[threading.Event, Any]] = []

    def hook(self, _: object, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
        self.issued += 1
        key = f"rank 0 issued all-reduce {self.issued}"
        if self.rank != 0:
            self.store.wait([key])
        work = dist.all_reduce(bucket.buffer(), async_op=True)
        future = work.get_future()
        reduced = future.then(lambda f: f.value()[0])  # what DDP waits for
        if self.rank == 0:
            hold = threading.Event()
            future.add_done_callback(lambda _: hold.wait(WAIT_S))  # runs after DDP's callback
            self.holds.append((hold, work))
            self.store.set(key, "1")
        return reduced

    def release(self) -> None:
        """Let the held all-reduces close their records; returns once they did."""
        while self.holds:
            hold, work = self.holds.pop(0)
            hold.set()
            work.wait()


def main(rank: int, folder: Path, steps: int) -> None:
    store = dist.FileStore(str(folder / "store"), 2)
    store.set_timeout(timedelta(seconds=WAIT_S))
    dist.init_process_group("gloo", store=store, rank=rank, world_size=2,
                            timeout=timedelta(seconds=WAIT_S))
    try:
        torch.manual_seed(0)
        model = torch.nn.parallel.DistributedDataParallel(torch.nn.Sequential(
            torch.nn.Linear(*LAYERS[0]), torch.nn.ReLU(), torch.nn.Linear(*LAYERS[1])))
        comm = _AsyncAllReduce(rank, store)
        model.register_comm_hook(None, comm.hook)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        x = torch.randn(BATCH, LAYERS[0][0])

        def step() -> None:
            model(x).pow(2).mean().backward()
            opt.step()
            opt.zero_grad()

        step()  # warm-up outside the trace (DDP rebuilds its buckets after the first step)
        comm.release()
        obs = ExecutionTraceObserver()
        if rank == 0:
            obs.register_callback(str(folder / "steps.json"))
            obs.start()
        for k in range(steps):
            step()
            if k < steps - 1:
                comm.release()
        if rank == 0:
            obs.stop()
            obs.unregister_callback()
        comm.release()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main(int(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]))
