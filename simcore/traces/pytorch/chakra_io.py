"""A :class:`TracedStep` as one Chakra ET file and back (torch-free).

Every op becomes a ``COMP_NODE`` (id = its index in program order) with the attributes
ASTRA-sim's roofline reads (reference/astra-sim-and-chakra.md §4.1: ``num_ops`` = FLOPs,
``tensor_size`` = bytes read + written, ``is_cpu_op`` false), ``data_deps`` = the ops whose
outputs it reads, ``inputs``/``outputs`` with the shapes and dtype (as the PyTorch converter
fills them), and simsweep's own attributes: ``phase``, ``bytes_read``, ``bytes_written``,
``gemm`` (flattened ``m, n, k, count`` quadruples), ``attention``, ``view``, ``block``,
``param`` (the weight a kernel reads) and ``twin`` (a backward op's forward op). Durations are
left 0 (a traced op has no measured time; :func:`step_to_trace` takes optional per-op
microseconds, e.g. from the calibrated kernel models). The global metadata carries the
parameters and the step's scalars as a JSON string attribute ``simsweep_step``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from simcore.errors import InputError
from simcore.traces.chakra.build import AttrValue, EtTraceBuilder
from simcore.traces.chakra.json import _io
from simcore.traces.chakra.schema import AttrKind, NodeType
from simcore.traces.chakra.trace import EtTrace
from simcore.traces.pytorch.step import TracedOp, TracedParam, TracedStep

__all__ = ["SCHEMA", "step_from_trace", "step_to_trace"]

SCHEMA = "simsweep-pytorch-trace-1"


def _shapes(shapes: Sequence[tuple[int, ...]]) -> str:
    return json.dumps([list(s) for s in shapes], separators=(",", ":"))


def step_to_trace(step: TracedStep, micros: Sequence[int] | None = None) -> EtTrace:
    """The ET of ``step`` (``micros``: optional duration of each op in microseconds)."""
    meta = {
        "name": step.name, "batch_size": step.batch_size,
        "activation_bytes": step.activation_bytes, "buffer_bytes": step.buffer_bytes,
        "block_out_bytes": list(step.block_out_bytes),
        "params": [[p.name, p.numel, p.elem_bytes, p.first_forward, p.first_backward,
                    p.grad_ready] for p in step.params],
    }
    b = EtTraceBuilder(metadata=[("schema", AttrKind.STRING, SCHEMA),
                                 ("simsweep_step", AttrKind.STRING,
                                  json.dumps(meta, separators=(",", ":")))])
    for i, op in enumerate(step.ops):
        attrs: dict[str, AttrValue] = {
            "is_cpu_op": False, "num_ops": int(op.flops),
            "tensor_size": op.bytes_read + op.bytes_written, "phase": op.phase,
            "bytes_read": op.bytes_read, "bytes_written": op.bytes_written, "view": op.view,
            "block": op.block, "param": op.param, "twin": op.twin,
        }
        if op.gemms:
            attrs["gemm"] = [int(x) for g in op.gemms for x in g]
        if op.attention:
            attrs["attention"] = [float(x) for x in op.attention]
        b.add_node(i, op.name, NodeType.COMP_NODE, data_deps=op.deps, attrs=attrs,
                   duration_micros=int(micros[i]) if micros is not None else 0,
                   inputs={"shapes": _shapes(op.in_shapes), "types": f"[{op.dtype}]"},
                   outputs={"shapes": _shapes(op.out_shapes), "types": f"[{op.dtype}]"})
    return b.build(path=step.name)


def _meta(trace: EtTrace) -> dict[str, Any]:
    table = trace.metadata
    found = {table.names[int(table.name[r])]: table.payload.text(r) for r in range(table.num_rows)
             if int(table.kind[r]) == AttrKind.STRING}
    if found.get("schema") != SCHEMA or "simsweep_step" not in found:
        raise InputError(f"trace {trace.path}", found.get("schema", ""),
                         f"is not a simsweep PyTorch trace (metadata schema {SCHEMA!r})")
    return dict(json.loads(found["simsweep_step"]))


def step_from_trace(trace: EtTrace) -> TracedStep:
    """Read back a :class:`TracedStep` written by :func:`step_to_trace`.

    Raises:
        InputError: the trace was not written by :func:`step_to_trace`.
    """
    meta = _meta(trace)
    order = np.argsort(trace.ids, kind="stable")
    n = trace.num_nodes
    if not np.array_equal(trace.ids[order], np.arange(n, dtype=np.uint64)):
        raise InputError(f"trace {trace.path}", "node ids", "must be 0..N-1 (one per op)")
    ints = {k: trace.int_attr(k)[0] for k in ("num_ops", "phase", "bytes_read", "bytes_written",
                                               "view", "block")}
    ints.update({k: trace.int_attr(k, -1)[0] for k in ("param", "twin")})
    gptr, gval = trace.list_attr("gemm")
    aptr, aval = trace.list_attr("attention")
    deps = trace.data_dep_index()
    bulk = trace.bulk
    ops = []
    for i in order.tolist():
        q = gval[gptr[i]:gptr[i + 1]].astype(np.int64).reshape(-1, 4)
        io_in = _io(bulk.inputs.item(i)) if bulk.inputs_present[i] else {}
        io_out = _io(bulk.outputs.item(i)) if bulk.outputs_present[i] else {}
        ops.append(TracedOp(
            name=trace.name(i), phase=int(ints["phase"][i]),
            in_shapes=tuple(tuple(s) for s in json.loads(io_in.get("shapes", "[]"))),
            out_shapes=tuple(tuple(s) for s in json.loads(io_out.get("shapes", "[]"))),
            dtype=io_out.get("types", "[]")[1:-1], flops=float(ints["num_ops"][i]),
            bytes_read=int(ints["bytes_read"][i]), bytes_written=int(ints["bytes_written"][i]),
            deps=tuple(sorted(int(trace.ids[d]) for d in deps[trace.data_ptr[i]:trace.data_ptr[i + 1]])),
            gemms=tuple((int(a), int(b), int(c), int(d)) for a, b, c, d in q.tolist()),
            attention=tuple(float(x) for x in aval[aptr[i]:aptr[i + 1]]),
            view=bool(ints["view"][i]), block=int(ints["block"][i]),
            param=int(ints["param"][i]), twin=int(ints["twin"][i]),
        ))
    params = tuple(TracedParam(str(p[0]), *(int(x) for x in p[1:])) for p in meta["params"])
    return TracedStep(name=str(meta["name"]), batch_size=int(meta["batch_size"]), ops=tuple(ops),
                      params=params, activation_bytes=int(meta["activation_bytes"]),
                      buffer_bytes=int(meta["buffer_bytes"]),
                      block_out_bytes=tuple(int(x) for x in meta.get("block_out_bytes", [])))
