"""Import a PyTorch execution trace (``torch.profiler.ExecutionTraceObserver`` JSON), torch-free.

The JSON holds one node per recorded op: ``id``, ``name``, ``ctrl_deps`` (the id of the parent
op: the call tree under ``[pytorch|profiler|execution_trace|thread]`` roots), ``inputs`` /
``outputs`` (``values``, ``shapes``, ``types``; a tensor value is ``[tensor_id, storage_id,
offset, numel, elem_bytes, device]``) and ``attrs`` (``rf_id``, ``tid``, ``op_schema``, ...).

:func:`et_to_chakra` converts it the way the official converter (``chakra_converter PyTorch``,
reference/astra-sim-and-chakra.md §4.3) treats host ops when no Kineto trace is linked: every
top-level op of a thread (in the call tree of :mod:`.et_tree`: an op the observer filed under an
asynchronous collective's record, or under an op that had closed, is its caller's own) becomes
one node, ``COMP_NODE`` with ``is_cpu_op`` true, and every c10d collective (at top level, or
issued from inside an op such as DDP's gradient hook) a ``COMM_COLL_NODE`` (``comm_type`` from
the op name, ``comm_size`` = bytes of its input tensors, ``pg_name`` from its process group when
recorded) that waits for the op issuing it; the backends' own records (``nccl:*``, ``gloo:*``)
mirror a c10d op and are dropped; the ``## process_group:init ##`` op becomes the
``METADATA_NODE`` carrying the process groups (``inputs.values``) as ASTRA-sim reads them; data
dependencies come from tensor storage ids of the op and of the kernels it runs (an op waits for
the last op that wrote a storage it reads; a module or autograd record has no tensors of its
own), control dependencies chain the ops of a thread in order; ``num_ops`` (the FLOPs of the
op's aten leaves, :mod:`.flops`) and ``tensor_size`` are added for re-costing. Durations are 0
(the host ET has no kernel times) unless the ET was linked with a Kineto trace
(:mod:`.kineto_link`): then each compute node carries its measured time.

:func:`et_to_step` reads the same JSON as a :class:`TracedStep` for the traced family: the
kernel-level aten ops in order (an aten op doing arithmetic, or one without children; phase: under ``autograd::engine::evaluate_function`` -> backward, under
``Optimizer.*`` -> optimizer), and one parameter per ``AccumulateGrad`` (its gradient's size;
ready at the last op of that call). The first use of a parameter is not linked in a host ET, so
ZeRO-3 units are not formed from an imported step.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

from simcore.errors import InputError
from simcore.ir.graph import CommType
from simcore.limits import decode_utf8
from simcore.traces.chakra.build import AttrValue, EtTraceBuilder
from simcore.traces.chakra.schema import AttrKind, NodeType
from simcore.traces.chakra.trace import EtTrace
from simcore.traces.pytorch.et_tree import BACKEND_RECORDS, THREAD_ROOT, callers
from simcore.traces.pytorch.flops import arithmetic
from simcore.traces.pytorch.record import NO_KERNEL
from simcore.traces.pytorch.step import PHASES, TracedOp, TracedParam, TracedStep

__all__ = ["COLLECTIVE_OPS", "et_to_chakra", "et_to_step", "read_pytorch_et"]

_PG_INIT = "## process_group:init ##"

#: collective op name fragments (c10d dispatcher ops and NCCL record names) -> comm type
COLLECTIVE_OPS: dict[str, CommType] = {
    "allreduce": CommType.ALL_REDUCE, "all_reduce": CommType.ALL_REDUCE,
    "allgather": CommType.ALL_GATHER, "all_gather": CommType.ALL_GATHER,
    "reduce_scatter": CommType.REDUCE_SCATTER, "reducescatter": CommType.REDUCE_SCATTER,
    "alltoall": CommType.ALL_TO_ALL, "all_to_all": CommType.ALL_TO_ALL,
    "broadcast": CommType.BROADCAST, "barrier": CommType.BARRIER,
    "gather": CommType.GATHER, "scatter": CommType.SCATTER, "reduce": CommType.REDUCE,
}
_BYTES_OF = {"float": 4, "double": 8, "c10::Half": 2, "c10::BFloat16": 2, "long int": 8,
             "int": 4, "bool": 1}


def read_pytorch_et(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The JSON of an execution trace.

    Raises:
        InputError: not JSON, or not an execution trace (no ``nodes`` list of ops with ``id``,
            ``name`` and ``ctrl_deps``).
    """
    try:
        with open(path, "rb") as fh:
            data = json.loads(decode_utf8(fh.read(), f"execution trace {path}"))
    except json.JSONDecodeError as err:
        raise InputError(f"execution trace {path}", "", f"is not JSON: {err}") from None
    _check(data, str(path))
    return dict(data)


def _check(data: Any, where: str) -> None:
    if not isinstance(data, dict) or not isinstance(data.get("nodes"), list):
        raise InputError(f"execution trace {where}", type(data).__name__,
                         "must be an object with a 'nodes' list (ExecutionTraceObserver JSON)")
    for n in data["nodes"]:
        missing = [k for k in ("id", "name", "ctrl_deps") if not isinstance(n, dict) or k not in n]
        if missing:
            raise InputError(f"execution trace {where} node", n.get("id") if isinstance(n, dict)
                             else n, f"lacks {', '.join(missing)}")


class _Tree:
    """The ops and their callers (:func:`.et_tree.callers`: the recorded parents, corrected where
    an asynchronous collective's record misfiled them)."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.nodes = {int(n["id"]): n for n in data["nodes"]}
        self.kids: dict[int, list[int]] = {}
        for i, caller in callers(data["nodes"]).items():
            self.kids.setdefault(caller, []).append(i)
        for v in self.kids.values():
            v.sort()

    def attrs(self, i: int) -> dict[str, Any]:
        return {a["name"]: a.get("value") for a in self.nodes[i].get("attrs", [])}

    def top_level(self) -> list[int]:
        """Ops directly under a thread root, in id (call) order."""
        threads = [i for i, n in self.nodes.items() if n["name"] == THREAD_ROOT]
        return sorted(k for t in threads for k in self.kids.get(t, []))

    def descendants(self, i: int) -> Iterator[int]:
        for k in self.kids.get(i, []):
            yield k
            yield from self.descendants(k)


def _tensors(io: dict[str, Any]) -> Iterator[tuple[int, int, int]]:
    """(storage id, numel, elem bytes) of every tensor value (also inside lists)."""
    for value, typ in zip(io.get("values", []), io.get("types", []), strict=False):
        if isinstance(typ, str) and typ.startswith("Tensor") and _is_tensor(value):
            yield int(value[1]), int(value[3]), int(value[4])
        elif isinstance(typ, str) and typ.startswith("GenericList[Tensor") and isinstance(value, list):
            for v in value:
                if _is_tensor(v):
                    yield int(v[1]), int(v[3]), int(v[4])


def _is_tensor(v: Any) -> bool:
    return isinstance(v, list) and len(v) >= 5 and all(isinstance(x, int) for x in v[:5])


def _nbytes(io: dict[str, Any]) -> int:
    return sum(n * e for _, n, e in _tensors(io))


def _collective(name: str) -> CommType | None:
    """The comm type of a c10d op (None for any other op).

    Raises:
        InputError: a c10d op that is no known collective (point-to-point included).
    """
    if not name.startswith("c10d::"):
        return None
    low = name.lower()
    for frag, ct in COLLECTIVE_OPS.items():
        if frag in low:
            return ct
    raise InputError("execution trace op", name, "is an unknown collective (known: "
                     + ", ".join(COLLECTIVE_OPS) + "; point-to-point ops are not imported)")


def _collectives_under(tree: _Tree, i: int) -> Iterator[int]:
    """The outermost c10d collectives strictly below ``i``."""
    for k in tree.kids.get(i, []):
        if _collective(tree.nodes[k]["name"]) is not None:
            yield k
        else:
            yield from _collectives_under(tree, k)


def _pg_name(tree: _Tree, i: int) -> str:
    a = tree.attrs(i)
    if a.get("pg_name"):
        return str(a["pg_name"])
    for k in tree.descendants(i):  # record_param_comms(seq, (pg_name, pg_desc), ...)
        n = tree.nodes[k]
        if n["name"] == "record_param_comms":
            vals = n.get("inputs", {}).get("values", [])
            if len(vals) > 1 and isinstance(vals[1], list) and vals[1]:
                return str(vals[1][0])
    return ""


def _kernels(tree: _Tree, i: int) -> Iterator[int]:
    """The ops under ``i`` (itself included) that stand for one kernel each: an aten op that
    does arithmetic (:mod:`.flops`; its children are its own plumbing) or has no children."""
    n = tree.nodes[i]
    kids = tree.kids.get(i, [])
    if n["name"].startswith("aten::") and (not kids or _arith(n).flops > 0):
        yield i
        return
    for k in kids:
        yield from _kernels(tree, k)


def _leaf_flops(tree: _Tree, i: int) -> float:
    return float(sum(_arith(tree.nodes[k]).flops for k in _kernels(tree, i)))


def _arith(n: dict[str, Any]) -> Any:
    ins, outs = n.get("inputs", {}), n.get("outputs", {})
    shapes = [tuple(s) if isinstance(t, str) and t.startswith("Tensor") else None
              for s, t in zip(ins.get("shapes", []), ins.get("types", []), strict=False)]
    out_shapes = [tuple(s) for s, t in zip(outs.get("shapes", []), outs.get("types", []), strict=False)
                  if isinstance(t, str) and t.startswith("Tensor")]
    return arithmetic(n["name"], shapes, out_shapes, ins.get("values", []))


def _measured_us(attrs: dict[str, Any]) -> int:
    """A linked node's measured time in whole µs (:mod:`.kineto_link`): its device time when it
    launched kernels, else the host op's inclusive time; 0 when not linked."""
    return int(round(float(attrs.get("gpu_dur") or attrs.get("inclusive_dur") or 0.0)))


def et_to_chakra(data: dict[str, Any], rank: int = 0) -> EtTrace:
    """The Chakra ET of one rank's execution trace (see the module docstring).

    Raises:
        InputError: malformed JSON structure or an unknown collective op.
    """
    _check(data, f"rank {rank}")
    tree = _Tree(data)
    meta = [(k, AttrKind.STRING, str(data[k])) for k in ("schema", "pid", "time") if k in data]
    b = EtTraceBuilder(version="0.0.4", metadata=meta)
    writer: dict[int, int] = {}
    last_on: dict[Any, int] = {}
    def comm(k: int, ct: CommType, deps: list[int], ctrl: list[int]) -> None:
        ins = tree.nodes[k].get("inputs", {})
        attrs: dict[str, AttrValue] = {"is_cpu_op": False, "comm_type": int(ct),
                                       "comm_size": _nbytes(ins)}
        pg = _pg_name(tree, k)
        if pg:
            attrs["pg_name"] = pg
        b.add_node(k, tree.nodes[k]["name"], NodeType.COMM_COLL_NODE, data_deps=deps,
                   ctrl_deps=ctrl, attrs=attrs)
        for s, _, _ in _tensors(tree.nodes[k].get("outputs", {})) or _tensors(ins):
            writer[s] = k

    for i in tree.top_level():
        n = tree.nodes[i]
        if n["name"].startswith(BACKEND_RECORDS):
            continue
        ins = n.get("inputs", {})
        # what the op reads and writes: its own tensors and those of the kernels it runs (a
        # module or autograd record has none of its own)
        parts = [n, *(tree.nodes[k] for k in _kernels(tree, i) if k != i)]
        reads = {s for p in parts for s, _, _ in _tensors(p.get("inputs", {}))}
        writes = {s for p in parts for s, _, _ in _tensors(p.get("outputs", {}))}
        deps = sorted({writer[s] for s in reads if s in writer and writer[s] != i})
        tid = tree.attrs(i).get("tid", 0)
        ctrl = [last_on[tid]] if tid in last_on else []
        if n["name"] == _PG_INIT:
            b.add_node(i, n["name"], NodeType.METADATA_NODE,
                       inputs={"values": str(ins.get("values", [""])[0])})
            continue
        ct = _collective(n["name"])
        if ct is not None:
            comm(i, ct, deps, ctrl)
            continue
        last_on[tid] = i
        outs = n.get("outputs", {})
        nbytes = sum(_nbytes(p.get("inputs", {})) + _nbytes(p.get("outputs", {})) for p in parts[1:])
        b.add_node(i, n["name"], NodeType.COMP_NODE, data_deps=deps, ctrl_deps=ctrl,
                   duration_micros=_measured_us(tree.attrs(i)),
                   attrs={"is_cpu_op": True, "num_ops": int(_leaf_flops(tree, i)),
                          "tensor_size": nbytes or _nbytes(ins) + _nbytes(outs)},
                   inputs={"shapes": json.dumps(ins.get("shapes", [])),
                           "types": json.dumps(ins.get("types", []))},
                   outputs={"shapes": json.dumps(outs.get("shapes", [])),
                            "types": json.dumps(outs.get("types", []))})
        for s in writes:
            writer[s] = i
        for k in _collectives_under(tree, i):  # issued from inside the op (e.g. a DDP hook)
            ct_k = _collective(tree.nodes[k]["name"])
            assert ct_k is not None
            comm(k, ct_k, [i], [])
    return b.build(path=f"rank {rank}")


def _phase_of(name: str, current: int) -> int:
    if name.startswith("autograd::engine::evaluate_function"):
        return PHASES.index("backward")
    if name.startswith("Optimizer."):
        return PHASES.index("optimizer")
    return current


def _is_view(n: dict[str, Any], attrs: dict[str, Any]) -> bool:
    schema = str(attrs.get("op_schema", ""))
    ret = schema.split("->", 1)[1] if "->" in schema else ""
    return n["name"] in NO_KERNEL or ("(a)" in ret and "!" not in ret) or not n["name"].startswith("aten::")


def _parameters(tree: _Tree, top: list[int]) -> tuple[set[int], set[tuple[str, str]]]:
    """(storage ids the optimizer step updates in place: the first argument of its in-place aten
    ops, ``add_`` or ``_foreach_add_``; (type, shape) of every accumulated gradient)."""
    updated: set[int] = set()
    for i in top:
        if _phase_of(tree.nodes[i]["name"], PHASES.index("forward")) == PHASES.index("optimizer"):
            for k in tree.descendants(i):
                n = tree.nodes[k]
                ins = n.get("inputs", {})
                if n["name"].endswith("_") and ins.get("values"):
                    updated.update(s for s, _, _ in _tensors({"values": ins["values"][:1],
                                                              "types": ins.get("types", [])[:1]}))
    grads: set[tuple[str, str]] = set()
    for n in tree.nodes.values():
        if n["name"].endswith("torch::autograd::AccumulateGrad"):
            ins = n.get("inputs", {})
            grads.update((str(t), json.dumps(sh)) for sh, t in zip(ins.get("shapes", []), ins.get("types", []),
                                                                  strict=False) if str(t).startswith("Tensor("))
    return updated, grads


def _batch_size(tree: _Tree, top: list[int]) -> int:
    """Dim 0 of the model's first input: the first tensor a forward op reads (in call order, an op
    before the ops it calls) that no earlier op wrote and that is not a parameter; 1 if none.

    Inputs, labels and parameters all exist before the step; parameters are told apart by the
    step itself (:func:`_parameters`): the tensors the optimizer updates in place (by storage
    id), or without an optimizer step, tensors of the shape and type
    of an accumulated gradient (``AccumulateGrad``'s input). An ET of a forward pass alone
    carries neither, and its first pre-existing tensor is taken.
    """
    forward = PHASES.index("forward")
    updated, grads = _parameters(tree, top)
    written: set[int] = set()

    def first(i: int) -> int | None:
        n = tree.nodes[i]
        if _phase_of(n["name"], forward) != forward:
            return None
        ins = n.get("inputs", {})
        for value, shape, typ in zip(ins.get("values", []), ins.get("shapes", []), ins.get("types", []),
                                     strict=False):
            if not (str(typ).startswith("Tensor(") and _is_tensor(value) and isinstance(shape, list) and shape):
                continue
            storage = int(value[1])
            param = storage in updated if updated else (str(typ), json.dumps(shape)) in grads
            if storage not in written and not param:
                return int(shape[0])
        written.update(s for s, _, _ in _tensors(n.get("outputs", {})))
        for k in tree.kids.get(i, []):
            got = first(k)
            if got is not None:
                return got
        return None

    for i in top:
        got = first(i)
        if got is not None:
            return got
    return 1


def et_to_step(data: dict[str, Any], name: str = "imported") -> TracedStep:
    """The leaf aten ops and the parameters of an execution trace (see the module docstring)."""
    _check(data, name)
    tree = _Tree(data)
    ops: list[TracedOp] = []
    writer: dict[int, int] = {}
    grads: list[tuple[int, int, int]] = []  # (numel, elem bytes, ready op)

    def visit(i: int, phase: int) -> None:
        n = tree.nodes[i]
        phase = _phase_of(n["name"], phase)
        if n["name"].startswith("aten::") and (not tree.kids.get(i) or _arith(n).flops > 0):
            add(i, phase)
        else:
            for k in tree.kids.get(i, []):
                visit(k, phase)
        if n["name"].endswith("torch::autograd::AccumulateGrad"):
            got = list(_tensors(n.get("inputs", {})))
            if got:
                grads.append((got[0][1], got[0][2], len(ops) - 1))

    def add(i: int, phase: int) -> None:
        n = tree.nodes[i]
        ins, outs = n.get("inputs", {}), n.get("outputs", {})
        view = _is_view(n, tree.attrs(i))
        arith = _arith(n)
        types = [t for t in outs.get("types", []) if isinstance(t, str) and t.startswith("Tensor(")]
        ops.append(TracedOp(
            name=n["name"], phase=phase,
            in_shapes=tuple(tuple(s) for s, t in zip(ins.get("shapes", []), ins.get("types", []),
                                                     strict=False) if str(t).startswith("Tensor")),
            out_shapes=tuple(tuple(s) for s, t in zip(outs.get("shapes", []), outs.get("types", []),
                                                      strict=False) if str(t).startswith("Tensor")),
            dtype=types[0][7:-1] if types else "", flops=arith.flops,
            bytes_read=0 if view else _nbytes(ins), bytes_written=0 if view else _nbytes(outs),
            deps=tuple(sorted({writer[s] for s, _, _ in _tensors(ins) if s in writer})),
            gemms=arith.gemms, attention=arith.attention, view=view))
        if not view:
            for s, _, _ in _tensors(outs):
                writer[s] = len(ops) - 1

    top = tree.top_level()
    batch = _batch_size(tree, top)
    for i in top:
        visit(i, PHASES.index("forward"))
    if not ops:
        raise InputError(f"execution trace {name}", 0, "holds no aten ops")
    params = tuple(TracedParam(f"param{k}", numel, eb, -1, -1, ready)
                   for k, (numel, eb, ready) in enumerate(reversed(grads)))
    return TracedStep(name=name, batch_size=batch, ops=tuple(ops), params=params)
