"""Import of a real DDP (gloo) trace whose bucket all-reduce is asynchronous: the ops the step
runs while gloo's record of the all-reduce is still open are imported as the step's own.

ExecutionTraceObserver files the ops recorded while gloo's record is open under it, or, when the
record opened inside DDP's hook, under the hook's autograd op after that closed (closing, each
pops the top of the thread's stack: the other's entry); if the observer stops first, the record
is never written and its children name an absent parent. The recording (two ranks,
``ddp_async_recording.py``) makes the late close certain instead of a matter of load. The
expected ops are counted in the JSON itself.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from simcore.traces.pytorch.et_import import et_to_chakra, et_to_step, read_pytorch_et
from simcore.traces.pytorch.step import PHASES

STEPS = 2
BATCH = 8  # as in ddp_async_recording.py
LAYERS = ((16, 32), (32, 4))
THREAD = "[pytorch|profiler|execution_trace|thread]"
#: ops a DDP training step runs on the main thread outside any other op: in a trace the observer
#: filed right, each is directly under the thread root
STEP_OPS = ("DistributedDataParallel.forward", "torch.distributed.ddp.reducer::copy_bucket_to_grad",
            "Optimizer.step#SGD.step", "Optimizer.zero_grad#SGD.zero_grad")
RECORD_S = 600.0  # bounds a failed recording; a working one takes seconds


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SIMSWEEP_CACHE_DIR", str(tmp_path / "et-cache"))


@pytest.fixture(scope="module")
def async_et(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``STEPS`` real DDP steps of rank 0 (gloo, two ranks, SGD), gloo's all-reduce record held
    open until each step's optimizer ran (:mod:`ddp_async_recording`)."""
    folder = tmp_path_factory.mktemp("et-async")
    script = Path(__file__).with_name("ddp_async_recording.py")
    ranks = [subprocess.Popen([sys.executable, str(script), str(rank), str(folder), str(STEPS)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for rank in (0, 1)]
    try:
        errors = [rank.communicate(timeout=RECORD_S)[1] for rank in ranks]
    finally:
        for rank in ranks:
            if rank.poll() is None:
                rank.kill()
                rank.wait()
    for k, rank in enumerate(ranks):
        assert rank.returncode == 0, f"rank {k}: {errors[k][-3000:]}"
    return folder / "steps.json"


def _raw_counts(data: dict[str, Any]) -> tuple[Counter[str], Counter[str]]:
    """(every node of a step op, by name; those directly under a thread root), from the JSON."""
    threads = {n["id"] for n in data["nodes"] if n["name"] == THREAD}
    ops = [n for n in data["nodes"] if n["name"] in STEP_OPS]
    return Counter(n["name"] for n in ops), Counter(n["name"] for n in ops if n["ctrl_deps"] in threads)


def test_the_recording_files_step_ops_under_the_open_collective(async_et: Path) -> None:
    """The case under test happened: the trace holds every step op, but not all at top level."""
    every, top = _raw_counts(json.loads(async_et.read_text()))
    assert every == {"DistributedDataParallel.forward": STEPS, "Optimizer.step#SGD.step": STEPS,
                     "Optimizer.zero_grad#SGD.zero_grad": STEPS,
                     "torch.distributed.ddp.reducer::copy_bucket_to_grad": 4 * STEPS}
    assert top["Optimizer.step#SGD.step"] < STEPS


def test_ops_run_while_the_collective_is_open_are_imported(async_et: Path) -> None:
    """One compute node per step op of the trace, the step's FLOPs once, and the optimizer after
    the gradients it reads."""
    data = read_pytorch_et(async_et)
    every, _ = _raw_counts(data)
    trace = et_to_chakra(data)
    names = [trace.name(i) for i in range(trace.num_nodes)]
    comp = Counter(names[i] for i in range(trace.num_nodes) if trace.types[i] == 4)
    assert {name: comp[name] for name in STEP_OPS} == every
    # every c10d collective of the trace once (DDP's all-reduces, its bucket-order broadcast)
    comm = Counter(names[i] for i in range(trace.num_nodes) if trace.types[i] == 7)
    assert comm == Counter(n["name"] for n in data["nodes"] if n["name"].startswith("c10d::"))
    assert comm["c10d::allreduce_"] == STEPS
    # the step's GEMMs, each once: forward (both layers), backward (dW1, dW2, dX2)
    (i1, o1), (i2, o2) = LAYERS
    per_step = 2 * BATCH * (i1 * o1 + i2 * o2) + 2 * BATCH * (i1 * o1 + 2 * i2 * o2)
    assert int(trace.int_attr("num_ops")[0][trace.types == 4].sum()) == STEPS * per_step
    # each optimizer step waits for the gradients DDP copied back from its all-reduce bucket
    deps = trace.data_dep_index()
    for i in (k for k, name in enumerate(names) if name == "Optimizer.step#SGD.step"):
        waits_for = {names[int(d)] for d in deps[trace.data_ptr[i]:trace.data_ptr[i + 1]]}
        assert "torch.distributed.ddp.reducer::copy_bucket_to_grad" in waits_for


def test_the_traced_step_keeps_every_optimizer_update(async_et: Path) -> None:
    """The optimizer phase holds the in-place updates the trace records inside the optimizer
    steps (``aten::add_`` under ``Optimizer.step``: the observer files an op's own calls right)."""
    data = read_pytorch_et(async_et)
    steps = {n["id"] for n in data["nodes"] if n["name"] == "Optimizer.step#SGD.step"}
    updates = [n for n in data["nodes"] if n["ctrl_deps"] in steps and n["name"] == "aten::add_"]
    assert len(updates) == 4 * STEPS  # one per parameter tensor per step
    step = et_to_step(data)
    assert [op.name for op in step.ops if op.phase == PHASES.index("optimizer")] == ["aten::add_"] * len(updates)
