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
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from simcore.errors import InputError
from simcore.ir.graph import Graph
from simcore.ir.ops import COMPUTE
from simcore.traces.chakra.build import AttrValue, EtTraceBuilder
from simcore.traces.chakra.schema import NodeType
from simcore.traces.chakra.trace import EtTrace
from simcore.workloads.layout import RankLayout
from simcore.workloads.transformer.generator import TransformerWorkload

__all__ = ["collective_group", "cross_stage", "node_stages", "transformer_to_traces"]

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
        # a rendezvous node's deps on the other stages are the other members' business
        deps = sorted({x for dep in op.deps if dep in here or dep in alias for x in alias.get(dep, [dep])})
        prev = dict(op.after).get(s, -1)
        ctrl = [prev] if prev >= 0 and prev not in deps else []
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
    ops = _ops(workload, template_us)
    extra = sorted({op.group for op in ops if op.group.startswith("x")})
    groups, group_of = _group_ids(lay, extra)
    g = workload.graph
    stage = g.rank.astype(np.int64)
    by_stage: list[list[_Op]] = [[] for _ in range(lay.pp)]
    incoming: list[list[_Op]] = [[] for _ in range(lay.pp)]
    for op in ops:
        for st in op.stages:
            by_stage[st].append(op)
        if op.kind == "pp_send":
            dst = int(dict(op.attrs)["peer"])
            incoming[dst].append(_Op(op.index, op.kind, op.name, 0, (), op.attrs + (
                ("src_stage", float(stage[op.index])),)))
    want = range(lay.num_ranks) if ranks is None else ranks
    out = {r: _rank_trace(r, lay, by_stage[lay.stage_of(r)], incoming[lay.stage_of(r)],
                          group_of, g.num_nodes) for r in want}
    return out, groups
