"""The call tree of a PyTorch execution trace: each op's caller, corrected where the recorded one
had closed (torch-free).

How ``torch.profiler.ExecutionTraceObserver`` records the tree (PyTorch,
``torch/csrc/profiler/standalone/execution_trace_observer.cpp``; the format is the Chakra host
trace, reference/astra-sim-and-chakra.md §4.1): it keeps one stack of open ops per thread. An op
that opens gets a new ``id`` and the top of its thread's stack as parent (``ctrl_deps``) and is
pushed; an op that closes pops the top of that stack, and its node is written then. So ids
follow the order in which ops opened and the file the order in which they closed, and the ops
of one thread nest: an op contains the ops that opened after it and closed before it.

A communication backend's record (``gloo:all_reduce``, ``nccl:all_reduce``, ...) breaks this: it
is filed on the thread that issued the collective (its ``tid``) but opened and closed by the
backend, gloo around the work on its worker thread, NCCL inside the c10d op and at the work's
completion. While it is open, the ops the issuing thread runs (DDP copying the reduced bucket
back, the optimizer step, the next forward) are filed as its children; when it closes it pops
whatever is on top, so later ops are filed under an op that had already closed (the c10d op, the
autograd hook that issued it); if the observer stops first, it is never written and its children
name a parent absent from the trace.

:func:`callers` gives every op its recorded parent, or the nearest recorded ancestor of it that
contains the op:

- a thread or process root contains every op;
- an op contains the ops written before it (they closed before it);
- a backend record contains only the ops that closed while the collective op that opened it
  ran (its nearest ancestor that is no backend record contains them). Under a root it contains
  nothing: no collective op ran around it, gloo opened it after the c10d op had returned;
- an op whose recorded parent is absent from the trace is a top-level op of its thread.

Only the observer's own file is in close order (an op after the ops it called); a file sorted by
id (``chakra_trace_link`` writes one) does not say which op closed first, so there only the
backend-record rules apply and every other recorded parent is kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["BACKEND_RECORDS", "PROCESS_ROOT", "THREAD_ROOT", "callers"]

THREAD_ROOT = "[pytorch|profiler|execution_trace|thread]"
PROCESS_ROOT = "[pytorch|profiler|execution_trace|process]"
#: records of the communication backends: asynchronous, they mirror a c10d op (its work)
BACKEND_RECORDS = ("nccl:", "gloo:", "mpi:", "ucc:")


def _tid(node: dict[str, Any]) -> Any:
    return next((a.get("value") for a in node.get("attrs", []) if a.get("name") == "tid"), None)


def _in_close_order(nodes: Sequence[dict[str, Any]]) -> bool:
    """Whether the file lists the ops as the observer wrote them, when they closed: then a caller
    follows the ops it called, so some op follows one with a larger id (the roots, written when
    a thread starts and at the end, say nothing)."""
    ids = [int(n["id"]) for n in nodes if n["name"] not in (THREAD_ROOT, PROCESS_ROOT)]
    return any(a > b for a, b in zip(ids, ids[1:], strict=False))


class _Recorded:
    """The recorded parents and the evidence of which op contains which."""

    def __init__(self, nodes: Sequence[dict[str, Any]]) -> None:
        self.nodes = {int(n["id"]): n for n in nodes}
        self.closed_at = ({int(n["id"]): k for k, n in enumerate(nodes)}
                          if _in_close_order(nodes) else None)

    def parent(self, i: int) -> int:
        return int(self.nodes[i]["ctrl_deps"])

    def is_root(self, i: int) -> bool:
        return self.nodes[i]["name"] in (THREAD_ROOT, PROCESS_ROOT)

    def is_backend_record(self, i: int) -> bool:
        return str(self.nodes[i]["name"]).startswith(BACKEND_RECORDS)

    def issuing_op(self, record: int) -> int | None:
        """The nearest recorded ancestor of a backend record that is no backend record (None
        when absent from the trace)."""
        seen = {record}
        i = record
        while i in self.nodes and self.is_backend_record(i):
            i = self.parent(i)
            if i in seen:
                return None
            seen.add(i)
        return i if i in self.nodes else None

    def contains(self, op: int, inner: int) -> bool:
        """Whether ``op`` was open while ``inner`` ran (see the module docstring)."""
        if self.is_root(op):
            return True
        if self.is_backend_record(op):
            issuer = self.issuing_op(op)
            return issuer is not None and not self.is_root(issuer) and self.contains(issuer, inner)
        return self.closed_at is None or self.closed_at[inner] < self.closed_at[op]


def callers(nodes: Sequence[dict[str, Any]]) -> dict[int, int]:
    """Op id -> id of its caller, for every node but the roots (see the module docstring).

    ``nodes`` are the execution trace's ``nodes`` in file order. An op whose recorded parent is
    absent and whose thread has no root node keeps the absent parent.
    """
    rec = _Recorded(nodes)
    thread_roots = {_tid(n): i for i, n in rec.nodes.items() if n["name"] == THREAD_ROOT}
    out: dict[int, int] = {}
    for i, n in rec.nodes.items():
        recorded = rec.parent(i)
        if recorded == i:
            continue
        caller, seen = recorded, {i}
        while caller in rec.nodes and caller not in seen and not rec.contains(caller, i):
            seen.add(caller)
            caller = rec.parent(caller)
        if caller in seen:  # a cycle of recorded parents: kept as recorded
            caller = recorded
        elif caller not in rec.nodes:
            caller = thread_roots.get(_tid(n), caller)
        out[i] = caller
    return out
