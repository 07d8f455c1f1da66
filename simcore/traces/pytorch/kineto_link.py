"""Link a PyTorch host execution trace with a Kineto trace for measured times (torch-free).

The Kineto trace is the Chrome-trace JSON ``torch.profiler.profile(...).export_chrome_trace``
writes (``traceEvents``); recorded in the same step as the ``ExecutionTraceObserver`` (pass it
as the profiler's ``execution_trace_observer``), both carry the record-function id of every op.
The matching follows Chakra's ``chakra_trace_link`` (reference/astra-sim-and-chakra.md §4.3):

- a host op (an ET node) is the Kineto ``cpu_op`` (or, for a ``record_function`` range such
  as ``Optimizer.step``, ``user_annotation``) event whose ``Record function id`` equals
  the node's ``rf_id`` attribute (the event index ``Ev Idx`` when the Kineto trace has no
  record-function ids, older PyTorch) and has the same name; ops the profiler did not see stay
  unlinked;
- a device event (``kernel``, ``gpu_memcpy``, ``gpu_memset``) belongs to the host op that
  launched it: the runtime call (``cuda_runtime`` / ``cuda_driver`` / ``hip_runtime``) with the
  same ``correlation`` id lies inside that op's time span on its thread (the innermost one).

Each linked node gains the attributes ``ts`` (start, µs), ``inclusive_dur`` (the event's
duration, µs), ``exclusive_dur`` (minus the durations of its linked children) and, when it
launched device work, ``gpu_dur`` (the summed durations of the device events it and its
children launched, µs). The converter (:func:`~simcore.traces.pytorch.et_import.et_to_chakra`)
then gives each compute node its measured time: the device time when it launched kernels (a
GPU run), else the host op's inclusive time (a CPU run: the op and every kernel below it, all of
which the node stands for).
"""

from __future__ import annotations

import bisect
import copy
import json
import os
from typing import Any

from simcore.errors import InputError
from simcore.limits import decode_utf8
from simcore.traces.pytorch.et_tree import callers

__all__ = ["DEVICE_CATEGORIES", "link_kineto", "read_kineto"]

#: Kineto categories of device work and of the host runtime calls that launch it
DEVICE_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
_HOST = ("cpu_op", "user_annotation")  # aten ops; record_function ranges (Optimizer.step)
_RUNTIME = ("cuda_runtime", "cuda_driver", "hip_runtime", "hip_driver")


def read_kineto(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The Chrome-trace JSON of a Kineto trace.

    Raises:
        InputError: not JSON, or no ``traceEvents`` list.
    """
    try:
        with open(path, "rb") as fh:
            data = json.loads(decode_utf8(fh.read(), f"kineto trace {path}"))
    except json.JSONDecodeError as err:
        raise InputError(f"kineto trace {path}", "", f"is not JSON: {err}") from None
    if not isinstance(data, dict) or not isinstance(data.get("traceEvents"), list):
        raise InputError(f"kineto trace {path}", type(data).__name__,
                         "must be a Chrome trace with a traceEvents list (torch.profiler's "
                         "export_chrome_trace)")
    return data


def _cpu_ops(events: list[dict[str, Any]]) -> tuple[dict[int, dict[str, Any]], str]:
    """Kineto host events (``cpu_op``, ``user_annotation``) by record-function id (else by event index) and the key used."""
    ops = [e for e in events if e.get("cat") in _HOST and e.get("ph") == "X"]
    key = "Record function id" if any("Record function id" in e.get("args", {}) for e in ops) else "Ev Idx"
    return {int(e["args"][key]): e for e in ops if key in e.get("args", {})}, key


def _launcher(events: list[dict[str, Any]], cpu: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """Device event index -> the innermost cpu_op whose span holds its runtime launch."""
    launch = {e["args"]["correlation"]: e for e in events
              if e.get("cat") in _RUNTIME and "correlation" in e.get("args", {})}
    by_tid: dict[Any, list[dict[str, Any]]] = {}
    for e in sorted(cpu, key=lambda e: (float(e["ts"]), -float(e["dur"]))):
        by_tid.setdefault(e.get("tid"), []).append(e)
    starts = {t: [float(e["ts"]) for e in v] for t, v in by_tid.items()}
    out: dict[int, dict[str, Any]] = {}
    for j, e in enumerate(events):
        if e.get("cat") not in DEVICE_CATEGORIES:
            continue
        rt = launch.get(e.get("args", {}).get("correlation"))
        if rt is None or rt.get("tid") not in by_tid:
            continue
        ops, ts = by_tid[rt["tid"]], float(rt["ts"])
        best = None
        for k in range(bisect.bisect_right(starts[rt["tid"]], ts) - 1, -1, -1):
            op = ops[k]
            if float(op["ts"]) + float(op["dur"]) >= ts and (best is None or op["dur"] <= best["dur"]):
                best = op
        if best is not None:
            out[j] = best
    return out


def link_kineto(et: dict[str, Any], kineto: dict[str, Any]) -> dict[str, Any]:
    """A copy of the execution trace ``et`` with the measured times of ``kineto`` on its nodes
    (see the module docstring).

    Raises:
        InputError: no ET node matches a Kineto cpu_op (traces of different runs).
    """
    events = kineto["traceEvents"]
    by_id, key = _cpu_ops(events)
    out = copy.deepcopy(et)
    nodes = {int(n["id"]): n for n in out["nodes"]}
    linked: dict[int, dict[str, Any]] = {}
    for i, n in nodes.items():
        attrs = {a["name"]: a.get("value") for a in n.get("attrs", [])}
        ref = attrs.get("rf_id") if key == "Record function id" else attrs.get("ev_idx", attrs.get("rf_id"))
        event = by_id.get(int(ref)) if ref is not None else None
        if event is not None and event.get("name") == n["name"]:
            linked[i] = event
    if not linked:
        raise InputError("kineto trace", f"{len(by_id)} host events",
                         f"match no node of the execution trace by {key!r} (traces of different runs?)")
    gpu: dict[int, float] = {}
    event_node = {id(e): i for i, e in linked.items()}
    for j, op in _launcher(events, list(by_id.values())).items():
        owner = event_node.get(id(op))
        if owner is not None:
            gpu[owner] = gpu.get(owner, 0.0) + float(events[j]["dur"])
    kids: dict[int, list[int]] = {}
    for i, caller in callers(out["nodes"]).items():  # the call tree the importer uses
        kids.setdefault(caller, []).append(i)

    def device(i: int) -> float:
        return gpu.get(i, 0.0) + sum(device(k) for k in kids.get(i, []))

    for i, e in linked.items():
        inclusive = float(e["dur"])
        children = sum(float(linked[k]["dur"]) for k in kids.get(i, []) if k in linked)
        extra = [("ts", "double", float(e["ts"])), ("inclusive_dur", "double", inclusive),
                 ("exclusive_dur", "double", max(inclusive - children, 0.0))]
        dev = device(i)
        if dev > 0:
            extra.append(("gpu_dur", "double", dev))
        nodes[i].setdefault("attrs", []).extend(
            {"name": name, "type": kind, "value": value} for name, kind, value in extra)
    return out
