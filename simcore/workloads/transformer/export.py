"""Generated transformer workload -> one Chakra ET per real rank, plus its communicator groups.

The generator (:mod:`simcore.workloads.transformer.generator`) builds one representative rank per
pipeline stage; every rank of that stage runs the same program (its symmetry argument). Here each
real rank (coordinates (t, c, d, s) numbered by ``parallel.rank_order``: the
:class:`simcore.workloads.layout.RankLayout` the generator prices its groups with) gets its
stage's nodes, in program order, as:
- a compute template -> COMP (``is_cpu_op`` false) with ``duration_micros`` = the template's
  duration (rounded to 1 us, the ET's unit), e.g. from the direct simulation's models;
- a ``coll`` kernel (tp / cp / dp / ep / edp collectives) -> COMM_COLL with ``comm_type``,
  ``comm_size`` = bytes x weight, and ``pg_name`` = the id of this rank's group of that kind
  in ``comm_groups`` (reference §2.4: ASTRA-sim selects the group by ``pg_name``); the tied
  embedding all-reduce (``embedding_tied_*``, one half on the first and one on the last stage,
  or one node without a rank on both stages' streams) uses the group of the same (t, c, d) on
  those stages;
- a pipeline send (a ``p2p`` node on a ``pp{a}>{b}`` stream) -> COMM_SEND on the sending rank
  and COMM_RECV on the rank of stage b with the same (t, c, d); the consumers depend on the
  RECV. The tag is the send node's index, unique per send;
- the context-parallel KV exchange (``p2p`` of kind cp) -> SEND to the next and RECV from the
  previous cp rank (a ring step); the consumers depend on both.
Streams are in-order (the direct engine's model, a CUDA stream): each node gets a control
dependency on the previous node of its stream, so ASTRA-sim's workload layer, which issues any
ready node (lowest id first), keeps the same order. Ids: the graph index of the node; an extra
RECV gets ``N + index``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

import numpy as np
from numpy.typing import NDArray

from simcore.errors import InputError
from simcore.ir.graph import Graph
from simcore.ir.ops import COMPUTE
from simcore.traces.chakra.build import AttrValue, EtTraceBuilder, encode_value, infer_kind
from simcore.traces.chakra.encode import (
    encode_attr,
    encode_metadata_fields,
    encode_node_fields,
    encode_record,
    encode_record_field,
    varint,
)
from simcore.traces.chakra.schema import NodeType
from simcore.traces.chakra.trace import EtTrace
from simcore.workloads.layout import RankLayout
from simcore.workloads.transformer.generator import TransformerWorkload

__all__ = ["collective_group", "cross_stage", "node_stages", "transformer_to_files",
           "transformer_to_traces"]

_KINDS = ("tp", "dp", "pp", "cp", "ep")
_GPU: dict[str, AttrValue] = {"is_cpu_op": False}  # a GPU kernel, whatever the feeder's default
_STAGE_STREAM = re.compile(r"s(\d+)\.")  # template kind index -> comm kind (engine COMM_KINDS)


@dataclass(frozen=True)
class _Op:
    """What one graph node becomes, independent of the real rank."""

    index: int
    kind: str  # comp | coll | pp_send | cp_kv
    name: str
    micros: int
    deps: tuple[int, ...]
    attrs: tuple[tuple[str, float], ...]
    after: tuple[tuple[int, int], ...] = ()  # (stage, previous node on the same stream)
    stages: tuple[int, ...] = ()  # the stages whose programs hold this node
    group: str = ""  # communicator kind of a collective (tp, cp, dp, ep, edp, x<stages>)


def _ops(w: TransformerWorkload, template_us: NDArray[np.float64]) -> list[_Op]:
    g, ops = w.graph, w.ops
    tmpl = g.attr("template").astype(np.int64)
    out: list[_Op] = []
    last_on: dict[int, int] = {}
    for i in range(g.num_nodes):
        t = int(tmpl[i])
        parts = ops.templates[t]
        deps = tuple(int(d) for d in g.deps_of(i))
        streams = g.resources_of(i).tolist()
        stages = node_stages(g, i)
        after = tuple((st, max((last_on.get(x, -1) for x in streams if _stream_stage(g, x) in (st, -1)),
                               default=-1)) for st in stages)
        last_on.update({x: i for x in streams})
        name = g.names[i] or ops.template_names[t]
        kind_idx = ops.template_kind[t]
        if kind_idx == COMPUTE or not parts:
            out.append(_Op(i, "comp", name, int(round(float(template_us[t]))), deps, (), after, stages))
            continue
        (kid, weight), = parts
        cost, args = ops.kernels[kid]
        if cost == "coll":
            group = collective_group(ops.template_names[t], kind_idx, stages, w.num_stages)
            out.append(_Op(i, "coll", name, 0, deps, (("comm_type", args[0]),
                                                       ("comm_size", args[1] * weight)),
                           after, stages, group))
        elif _KINDS[kind_idx] == "pp":
            out.append(_Op(i, "pp_send", name, 0, deps, (("comm_size", args[0] * weight),
                                                          ("peer", float(g.attr("peer")[i]))),
                           after, stages))
        else:
            out.append(_Op(i, "cp_kv", name, 0, deps, (("comm_size", args[0] * weight),), after, stages))
    return out


def _stream_stage(g: Graph, resource: int) -> int:
    """The stage of a per-stage stream ``s<k>.<kind>`` (-1 for a link stream ``pp<a>><b>``)."""
    m = _STAGE_STREAM.match(g.resource_names[resource])
    return int(m.group(1)) if m else -1


def node_stages(g: Graph, i: int) -> tuple[int, ...]:
    """The stages a node belongs to: its rank, or (rank -1, a rendezvous) its streams' stages."""
    if int(g.rank[i]) >= 0:
        return (int(g.rank[i]),)
    found = sorted({_stream_stage(g, int(x)) for x in g.resources_of(i)} - {-1})
    if not found:
        raise InputError(f"graph node {int(g.node_ids[i])}", g.names[i],
                         "a node without a rank must sit on per-stage streams s<k>.*")
    return tuple(found)


def collective_group(template_name: str, kind_idx: int, stages: tuple[int, ...],
                     num_stages: int) -> str:
    """Communicator kind of a collective template: a :data:`simcore.workloads.layout.GROUP_KINDS`
    entry, or ``x<s1>,<s2>,...`` for the ranks of one (tp, cp, dp) on several stages."""
    if len(stages) > 1:  # one rendezvous node on several stages
        return "x" + ",".join(map(str, stages))
    if template_name.startswith("embedding_tied"):  # each end carries its half
        return f"x0,{num_stages - 1}"
    return "edp" if template_name.startswith("edp") else _KINDS[kind_idx]


def cross_stage(kind: str) -> tuple[int, ...] | None:
    """The stages of a cross-stage communicator kind ``x<s1>,...`` (None for a group kind)."""
    return tuple(int(x) for x in kind[1:].split(",")) if kind.startswith("x") else None


def _group_ids(lay: RankLayout, extra: Sequence[str]
               ) -> tuple[dict[int, tuple[int, ...]], dict[str, NDArray[np.int64]]]:
    """(group id -> members, kind -> (R,) group id of each rank, 0 = none); ids from 1 in the
    order kinds then smallest member, groups of one skipped, equal member sets share one id.

    ``extra``: cross-stage kinds ``x<s1>,<s2>,...``, defined for ranks of those stages.
    """
    ids: dict[tuple[int, ...], int] = {}
    of: dict[str, NDArray[np.int64]] = {}
    for kind in ("tp", "cp", "dp", "ep", "edp", *extra):
        stages = cross_stage(kind)
        tab, row = lay.across_stages(stages) if stages else (lay.table(kind), lay.group_index(kind))
        if tab.shape[1] <= 1:
            continue
        gid = np.array([ids.setdefault(tuple(m), len(ids) + 1) for m in tab.tolist()], dtype=np.int64)
        of[kind] = np.where(row >= 0, gid[row], 0)
    return {g: m for m, g in ids.items()}, of


def _rank_trace(r: int, lay: RankLayout, stage_ops: list[_Op], incoming: list[_Op],
                group_of: dict[str, NDArray[np.int64]], n: int) -> EtTrace:
    c, s = lay.coords(r).cp, lay.stage_of(r)
    b = EtTraceBuilder(metadata={"schema": "simsweep transformer export", "rank": r})
    alias: dict[int, list[int]] = {}  # graph index -> node ids a consumer must wait for
    for op in incoming:  # receives of activations/gradients sent to this stage
        size = int(round(dict(op.attrs)["comm_size"]))
        src = lay.peer(r, int(dict(op.attrs)["src_stage"]))
        b.add_node(n + op.index, f"{op.name}_recv", NodeType.COMM_RECV_NODE, attrs={
            "is_cpu_op": False, "comm_size": size, "comm_src": src, "comm_tag": op.index})
        alias[op.index] = [n + op.index]
    here = {op.index for op in stage_ops}
    for op in stage_ops:
        deps, ctrl = _stage_deps(op, s, here, alias)
        attrs: dict[str, AttrValue] = {}
        a = dict(op.attrs)
        if op.kind == "comp":
            b.add_node(op.index, op.name, NodeType.COMP_NODE, data_deps=deps, ctrl_deps=ctrl,
                       duration_micros=op.micros, attrs=_GPU)
            continue
        attrs["is_cpu_op"] = False
        attrs["comm_size"] = int(round(a["comm_size"]))
        if op.kind == "coll":
            attrs["comm_type"] = int(a["comm_type"])
            gid = int(group_of[op.group][r]) if op.group in group_of else 0
            if gid == 0:  # a group of one: nothing to communicate
                b.add_node(op.index, op.name, NodeType.COMP_NODE, data_deps=deps, ctrl_deps=ctrl,
                           attrs=_GPU)
                continue
            attrs["pg_name"] = str(gid)
            b.add_node(op.index, op.name, NodeType.COMM_COLL_NODE, data_deps=deps, ctrl_deps=ctrl,
                       attrs=attrs)
        elif op.kind == "pp_send":
            attrs["comm_dst"] = lay.peer(r, int(a["peer"]))
            attrs["comm_tag"] = op.index
            b.add_node(op.index, op.name, NodeType.COMM_SEND_NODE, data_deps=deps, ctrl_deps=ctrl,
                       attrs=attrs)
        else:  # cp ring step: send to the next cp rank, receive from the previous one
            b.add_node(op.index, op.name + "_send", NodeType.COMM_SEND_NODE, data_deps=deps,
                       ctrl_deps=ctrl, attrs={
                **attrs, "comm_dst": lay.moved(r, "cp", (c + 1) % lay.cp), "comm_tag": op.index})
            b.add_node(n + op.index, op.name + "_recv", NodeType.COMM_RECV_NODE, data_deps=deps, attrs={
                **attrs, "comm_src": lay.moved(r, "cp", (c - 1) % lay.cp), "comm_tag": op.index})
            alias[op.index] = [op.index, n + op.index]
    return b.build(path=f"rank {r}")


def _stage_ops(workload: TransformerWorkload, lay: RankLayout, template_us: NDArray[np.float64]
               ) -> tuple[Any, Any, list[list[_Op]], list[list[_Op]]]:
    """(groups, group of each op, ops of each stage, pipeline receives of each stage): what
    every rank of a stage shares, whichever way its files are then written."""
    ops = _ops(workload, template_us)
    extra = sorted({op.group for op in ops if op.group.startswith("x")})
    groups, group_of = _group_ids(lay, extra)
    stage = workload.graph.rank.astype(np.int64)
    by_stage: list[list[_Op]] = [[] for _ in range(lay.pp)]
    incoming: list[list[_Op]] = [[] for _ in range(lay.pp)]
    for op in ops:
        for st in op.stages:
            by_stage[st].append(op)
        if op.kind == "pp_send":
            dst = int(dict(op.attrs)["peer"])
            incoming[dst].append(_Op(op.index, op.kind, op.name, 0, (), op.attrs + (
                ("src_stage", float(stage[op.index])),)))
    return groups, group_of, by_stage, incoming


def transformer_to_traces(
    workload: TransformerWorkload, layout: RankLayout, template_us: NDArray[np.float64],
    ranks: Sequence[int] | None = None,
) -> tuple[dict[int, EtTrace], dict[int, tuple[int, ...]]]:
    """Per-rank traces (for ``ranks``, default all) and the communicator groups.

    Args:
        workload: the generated graph (one representative rank per stage).
        layout: the real ranks of the resolved plan (:meth:`RankLayout.of`).
        template_us: (U,) duration of each template in microseconds (compute templates).
    """
    lay = layout
    g = workload.graph
    groups, group_of, by_stage, incoming = _stage_ops(workload, lay, template_us)
    want = range(lay.num_ranks) if ranks is None else ranks
    out = {r: _rank_trace(r, lay, by_stage[lay.stage_of(r)], incoming[lay.stage_of(r)],
                          group_of, g.num_nodes) for r in want}
    return out, groups


# --- the same files as bytes, each distinct node encoded once ------------------------------------
# A rank's file differs from the other files of its stage only in a few values: the metadata's
# rank, the communicator id (pg_name) of each collective, and the peer of each send / receive.
# Each stage's program is therefore laid out once as fixed bytes and *slots* (a node whose bytes
# depend on one such value); a rank's file is the fixed bytes joined with each slot's node for
# the rank's value, encoded once per distinct (node, value). The logic mirrors
# :func:`_rank_trace` node for node; tests check the bytes equal ``encode_trace`` of its traces.

_META_SCHEMA = "simsweep transformer export"
_VERSION = "0.0.4"  # EtTraceBuilder's default


def _attr(name: str, value: AttrValue) -> bytes:
    kind = infer_kind(name, value)
    raw, payload = encode_value(kind, value)
    return encode_attr(name, int(kind), raw, payload)


def _attrs(items: Mapping[str, AttrValue]) -> tuple[bytes, ...]:
    return tuple(_attr(k, v) for k, v in items.items())


class _VarNode:
    """A node whose attributes are fixed except one (``name`` = the slot's value): its bytes
    before and after that attribute are encoded once, the attribute per value."""

    def __init__(self, node_id: int, name: str, node_type: int, ctrl: list[int], deps: list[int],
                 before: Mapping[str, AttrValue], var: str, after: Mapping[str, AttrValue],
                 as_str: bool = False) -> None:
        self.head = encode_node_fields(node_id, name, node_type, ctrl_deps=ctrl, data_deps=deps,
                                       attrs=_attrs(before))
        self.tail = b"".join(encode_record_field(a) for a in _attrs(after))
        self.var, self.as_str = var, as_str

    def __call__(self, value: int) -> bytes:
        attr = _VAR_FIELDS.get((self.var, self.as_str, value))
        if attr is None:  # the attribute field of one value, shared by every node of the slot
            attr = encode_record_field(_attr(self.var, str(value) if self.as_str else value))
            _VAR_FIELDS[(self.var, self.as_str, value)] = attr
        return varint(len(self.head) + len(attr) + len(self.tail)) + self.head + attr + self.tail


_VAR_FIELDS: dict[tuple[str, bool, int], bytes] = {}


@dataclass(frozen=True)
class _Either:
    """A collective's node: ``alone`` (a COMP node) for communicator 0, else ``coll(gid)``."""

    alone: bytes
    coll: _VarNode

    def __call__(self, gid: int) -> bytes:
        return self.coll(gid) if gid else self.alone


@dataclass(frozen=True)
class _Slot:
    """A node whose bytes depend on one per-rank value: ("peer", stage) = the rank of the same
    (t, c, d) on that stage, ("group", kind) = the rank's communicator id of that kind (0: none),
    ("cp", step) = the rank ``step`` cp positions away."""

    key: tuple[str, int | str]
    encode: Callable[[int], bytes]  # the node record for the slot's value


def _stage_layout(s: int, stage_ops: list[_Op], incoming: list[_Op], n: int
                  ) -> list[bytes | _Slot]:
    gpu = _attrs(_GPU)
    parts: list[bytes | _Slot] = []
    alias: dict[int, list[int]] = {}
    recv_t, send_t = int(NodeType.COMM_RECV_NODE), int(NodeType.COMM_SEND_NODE)
    for op in incoming:
        size, src_stage = int(round(dict(op.attrs)["comm_size"])), int(dict(op.attrs)["src_stage"])
        recv = _VarNode(n + op.index, f"{op.name}_recv", recv_t, [], [],
                        {"is_cpu_op": False, "comm_size": size}, "comm_src", {"comm_tag": op.index})
        parts.append(_Slot(("peer", src_stage), recv))
        alias[op.index] = [n + op.index]
    here = {op.index for op in stage_ops}
    for op in stage_ops:
        deps, ctrl = _stage_deps(op, s, here, alias)
        a = dict(op.attrs)
        if op.kind == "comp":
            parts.append(encode_record(encode_node_fields(
                op.index, op.name, int(NodeType.COMP_NODE), ctrl_deps=ctrl, data_deps=deps,
                duration_micros=op.micros, attrs=gpu)))
            continue
        fixed: dict[str, AttrValue] = {"is_cpu_op": False, "comm_size": int(round(a["comm_size"]))}
        if op.kind == "coll":
            alone = encode_record(encode_node_fields(  # a group of one: nothing to communicate
                op.index, op.name, int(NodeType.COMP_NODE), ctrl_deps=ctrl, data_deps=deps, attrs=gpu))
            coll = _VarNode(op.index, op.name, int(NodeType.COMM_COLL_NODE), ctrl, deps,
                            {**fixed, "comm_type": int(a["comm_type"])}, "pg_name", {}, as_str=True)
            parts.append(_Slot(("group", op.group), _Either(alone, coll)))
        elif op.kind == "pp_send":
            send = _VarNode(op.index, op.name, send_t, ctrl, deps, fixed, "comm_dst", {"comm_tag": op.index})
            parts.append(_Slot(("peer", int(a["peer"])), send))
        else:  # cp ring step: send to the next cp rank, receive from the previous one
            tag = {"comm_tag": op.index}
            parts.append(_Slot(("cp", 1), _VarNode(op.index, op.name + "_send", send_t, ctrl, deps,
                                                   fixed, "comm_dst", tag)))
            parts.append(_Slot(("cp", -1), _VarNode(n + op.index, op.name + "_recv", recv_t, [], deps,
                                                    fixed, "comm_src", tag)))
            alias[op.index] = [op.index, n + op.index]
    return _merge_runs(parts)


def _merge_runs(parts: list[bytes | _Slot]) -> list[bytes | _Slot]:
    """Each run of fixed nodes as one bytes object."""
    merged: list[bytes | _Slot] = []
    run: list[bytes] = []
    for p in parts:
        if isinstance(p, bytes):
            run.append(p)
            continue
        if run:
            merged.append(b"".join(run))
            run = []
        merged.append(p)
    if run:
        merged.append(b"".join(run))
    return merged


def _stage_plan(parts: list[bytes | _Slot]) -> tuple[tuple[bytes, ...], dict[tuple[str, int | str], list[_Slot]],
                                                    Callable[[tuple[bytes, ...]], tuple[bytes, ...]]]:
    """A stage's fixed runs, its slots by key, and the picker that lays a rank's table out in
    file order: the table is (metadata, *fixed runs, *each key's slot records in key order)."""
    fixed: list[bytes] = []
    keyed: dict[tuple[str, int | str], list[_Slot]] = {}
    where: list[tuple[tuple[str, int | str] | None, int]] = []
    for part in parts:
        if isinstance(part, bytes):
            where.append((None, len(fixed)))
            fixed.append(part)
        else:
            where.append((part.key, len(keyed.setdefault(part.key, []))))
            keyed[part.key].append(part)
    start: dict[tuple[str, int | str] | None, int] = {None: 1}
    at = 1 + len(fixed)
    for key, slots in keyed.items():
        start[key] = at
        at += len(slots)
    order = [0, *(start[key] + i for key, i in where)]
    pick = itemgetter(*order) if len(order) > 1 else (lambda table: (table[0],))
    return tuple(fixed), keyed, pick


def transformer_to_files(
    workload: TransformerWorkload, layout: RankLayout, template_us: NDArray[np.float64],
) -> tuple[Iterator[tuple[int, bytes]], int, dict[int, tuple[int, ...]]]:
    """(rank, file bytes) of every rank in order (a generator), the node count, and the groups.

    The bytes are ``encode_trace`` of :func:`transformer_to_traces`'s traces, built without them:
    each stage is laid out once and each distinct (node, per-rank value) encoded once.
    """
    lay = layout
    g = workload.graph
    groups, group_of, by_stage, incoming = _stage_ops(workload, lay, template_us)
    layouts = [_stage_layout(s, by_stage[s], incoming[s], g.num_nodes) for s in range(lay.pp)]
    nodes_of_stage = [len(incoming[s]) + sum(2 if op.kind == "cp_kv" else 1 for op in by_stage[s])
                      for s in range(lay.pp)]
    total = sum(nodes_of_stage[lay.stage_of(r)] for r in range(lay.num_ranks))
    schema = _attr("schema", _META_SCHEMA)
    group_rows = {kind: ids.tolist() for kind, ids in group_of.items()}

    plans = [_stage_plan(parts) for parts in layouts]

    def files() -> Iterator[tuple[int, bytes]]:
        memo: dict[tuple[int, tuple[str, int | str], int], tuple[bytes, ...]] = {}
        for r in range(lay.num_ranks):
            coords = lay.coords(r)
            fixed, keyed, pick = plans[coords.pp]
            table = (encode_record(encode_metadata_fields(_VERSION, (schema, _attr("rank", r)))), *fixed)
            for key, slots in keyed.items():
                what, arg = key
                if what == "group":  # a communicator: its nodes are shared by its members
                    v = int(group_rows[str(arg)][r]) if arg in group_rows else 0
                    got = memo.get((coords.pp, key, v))
                    if got is None:
                        got = memo[(coords.pp, key, v)] = tuple(slot.encode(v) for slot in slots)
                    table += got
                    continue
                v = lay.peer(r, int(arg)) if what == "peer" else lay.moved(r, "cp", (coords.cp + int(arg)) % lay.cp)
                table += tuple(slot.encode(v) for slot in slots)  # a peer: this rank's own
            yield r, b"".join(pick(table))

    return files(), total, groups


def _stage_deps(op: Any, stage: int, here: set[int], alias: dict[int, list[int]]
                ) -> tuple[list[int], list[int]]:
    """(data deps, ctrl deps) of ``op`` in ``stage``'s program: deps within the stage or on a
    received value (a rendezvous node's deps on the other stages are the other members'
    business), and the op issued before it on the stage's stream unless already a data dep."""
    deps = sorted({x for dep in op.deps if dep in here or dep in alias for x in alias.get(dep, [dep])})
    prev = dict(op.after).get(stage, -1)
    ctrl = [prev] if prev >= 0 and prev not in deps else []
    return deps, ctrl
