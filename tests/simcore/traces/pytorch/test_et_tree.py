"""The call tree the importer reads from an execution trace, on small hand-written traces that
pin one shape each of what an asynchronous collective's record does to the recorded parents
(the real recording is in test_et_import_async.py).

ExecutionTraceObserver gives each op an id when it opens and writes its node when it closes, so
the lists below are in close order (the thread root first, the process root last) unless a
test says otherwise. Names are those of a DDP step: ``AccumulateGrad`` (the autograd op whose
hook issues the bucket all-reduce), ``c10d::allreduce_``, gloo's record, the optimizer step.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from simcore.traces.pytorch.et_import import et_to_chakra
from simcore.traces.pytorch.kineto_link import link_kineto

THREAD, PROCESS = "[pytorch|profiler|execution_trace|thread]", "[pytorch|profiler|execution_trace|process]"
GRAD = "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad"
STEP = "Optimizer.step#SGD.step"


def _node(i: int, name: str, parent: int) -> dict[str, Any]:
    empty = {"values": [], "shapes": [], "types": []}
    return {"id": i, "name": name, "ctrl_deps": parent, "inputs": empty, "outputs": empty,
            "attrs": [{"name": "rf_id", "type": "uint64", "value": i},
                      {"name": "tid", "type": "uint64", "value": 1}]}


def _trace(*nodes: tuple[int, str, int]) -> dict[str, Any]:
    """An execution trace of ``nodes`` (id, name, recorded parent) between the thread root (2,
    written first) and the process root (1, written last), in the given (file) order."""
    return {"schema": "1.1.1-chakra.0.0.4", "nodes": [
        _node(2, THREAD, 1), *(_node(*n) for n in nodes), _node(1, PROCESS, 1)]}


def _sorted_by_id(data: dict[str, Any]) -> dict[str, Any]:
    return {**data, "nodes": sorted(data["nodes"], key=lambda n: n["id"])}


def _imported(data: dict[str, Any]) -> tuple[Counter[str], Counter[str]]:
    """(compute node names, collective node names) of the conversion."""
    t = et_to_chakra(data)
    names = [t.name(i) for i in range(t.num_nodes)]
    return (Counter(names[i] for i in range(t.num_nodes) if t.types[i] == 4),
            Counter(names[i] for i in range(t.num_nodes) if t.types[i] == 7))


def test_ops_filed_under_a_top_level_backend_record_are_top_level_ops() -> None:
    """gloo opened its record after the c10d op returned: the optimizer step ran while it was
    open, and closed before it."""
    comp, comm = _imported(_trace((4, "c10d::allreduce_", 3), (3, GRAD, 2), (7, "aten::add_", 6),
                                  (6, STEP, 5), (5, "gloo:all_reduce", 2)))
    assert comp == {GRAD: 1, STEP: 1} and comm == {"c10d::allreduce_": 1}


def test_ops_whose_recorded_parent_is_absent_are_top_level_ops() -> None:
    """The observer stopped before gloo closed its record: it was never written."""
    comp, _ = _imported(_trace((4, "c10d::allreduce_", 3), (3, GRAD, 2), (7, "aten::add_", 6),
                               (6, STEP, 5)))
    assert comp == {GRAD: 1, STEP: 1}


def test_ops_filed_under_an_op_that_had_closed_are_top_level_ops() -> None:
    """gloo opened its record inside the c10d op; closing, the c10d op popped the record, the
    autograd op popped the c10d op, so the step was filed under the autograd op (written before
    it: closed)."""
    comp, comm = _imported(_trace((4, "c10d::allreduce_", 3), (3, GRAD, 2), (7, "aten::add_", 6),
                                  (6, STEP, 3), (5, "gloo:all_reduce", 4)))
    assert comp == {GRAD: 1, STEP: 1} and comm == {"c10d::allreduce_": 1}


def test_ops_run_inside_the_collective_op_stay_its_own() -> None:
    """An NCCL record opens inside the c10d op; what the op runs under it (a copy) is part of the
    collective however late the record closes, as before."""
    comp, comm = _imported(_trace((6, "aten::copy_", 5), (4, "c10d::allgather_", 3), (3, GRAD, 2),
                                  (5, "nccl:all_gather", 4)))
    assert comp == {GRAD: 1} and comm == {"c10d::allgather_": 1}


def test_a_file_sorted_by_id_keeps_the_recorded_nesting() -> None:
    """A file sorted by id (chakra_trace_link writes one) does not tell which op closed first:
    the recorded parents stand, but a backend record under a root still contains nothing."""
    nested = _trace((3, "DistributedDataParallel.forward", 2), (4, "aten::linear", 3))
    assert _imported(_sorted_by_id(nested))[0] == {"DistributedDataParallel.forward": 1}
    late = _trace((3, GRAD, 2), (4, "c10d::allreduce_", 3), (5, "gloo:all_reduce", 4), (6, STEP, 3))
    assert _imported(_sorted_by_id(late))[0] == {GRAD: 1}  # no sign the step ran after GRAD
    top = _trace((3, GRAD, 2), (4, "c10d::allreduce_", 3), (5, "gloo:all_reduce", 2), (6, STEP, 5))
    assert _imported(_sorted_by_id(top))[0] == {GRAD: 1, STEP: 1}


def test_device_time_of_a_misfiled_op_is_its_own() -> None:
    """Kineto linking sums device time over the same call tree: the kernel the optimizer step
    launched is the step's, not the closed autograd op's it was filed under."""
    data = _trace((4, "c10d::allreduce_", 3), (3, GRAD, 2), (6, STEP, 3), (5, "gloo:all_reduce", 4))
    events = [{"ph": "X", "cat": "cpu_op", "name": name, "ts": ts, "dur": 10.0, "tid": 1, "pid": 1,
               "args": {"Record function id": rf}} for rf, name, ts in ((3, GRAD, 0.0), (6, STEP, 20.0))]
    events += [{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 25.0, "dur": 1.0,
                "tid": 1, "pid": 1, "args": {"correlation": 1}},
               {"ph": "X", "cat": "kernel", "name": "sgd_kernel", "ts": 40.0, "dur": 7.0, "tid": 7,
                "pid": 0, "args": {"correlation": 1}}]
    linked = link_kineto(data, {"traceEvents": events})
    t = et_to_chakra(linked)
    micros = {t.name(i): int(t.duration_micros[i]) for i in range(t.num_nodes) if t.types[i] == 4}
    assert micros == {GRAD: 10, STEP: 7}  # the autograd op's host time, the step's kernel
