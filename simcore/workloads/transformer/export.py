"""Generated transformer workload -> one Chakra ET per real rank, plus its communicator groups.

The generator (:mod:`simcore.workloads.transformer.generator`) builds one representative rank per pipeline
stage; every rank of that stage runs the same program (its symmetry argument). Here each real
rank ``r = t + tp*(c + cp*(d + dp*s))`` (tp fastest, then cp, dp, pp: the layout of
:func:`simcore.workloads.placement.group_spans`) gets its stage's nodes, in program order, as:
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
from simcore.specs.parallel import ParallelSpec
from simcore.traces.chakra.build import AttrValue, EtTraceBuilder
from simcore.traces.chakra.schema import NodeType
from simcore.traces.chakra.trace import EtTrace
from simcore.workloads.transformer.generator import TransformerWorkload

__all__ = ["RankLayout", "transformer_to_traces"]

_KINDS = ("tp", "dp", "pp", "cp", "ep")
_GPU: dict[str, AttrValue] = {"is_cpu_op": False}  # a GPU kernel, whatever the feeder's default
_STAGE_STREAM = re.compile(r"s(\d+)\.")  # template kind index -> comm kind (engine COMM_KINDS)


@dataclass(frozen=True)
class RankLayout:
    """Real-rank coordinates (t, c, d, s) and the communicator groups of a resolved plan."""

    tp: int
    cp: int
    dp: int
    pp: int
    ep: int

    @property
    def num_ranks(self) -> int:
        """tp x cp x dp x pp."""
        return self.tp * self.cp * self.dp * self.pp

    def rank(self, t: int, c: int, d: int, s: int) -> int:
        """Global rank of coordinates (tp, cp, dp, pp)."""
        return t + self.tp * (c + self.cp * (d + self.dp * s))

    def coords(self, r: int) -> tuple[int, int, int, int]:
        """(t, c, d, s) of rank ``r``."""
        t, r = r % self.tp, r // self.tp
        c, r = r % self.cp, r // self.cp
        return t, c, r % self.dp, r // self.dp

    def members(self, kind: str, r: int) -> tuple[int, ...]:
        """The ranks of ``r``'s group of ``kind`` (tp, cp, dp = dp x cp, ep, edp)."""
        t, c, d, s = self.coords(r)
        if kind == "tp":
            return tuple(self.rank(x, c, d, s) for x in range(self.tp))
        if kind == "cp":
            return tuple(self.rank(t, x, d, s) for x in range(self.cp))
        if kind == "dp":
            return tuple(self.rank(t, x, y, s) for y in range(self.dp) for x in range(self.cp))
        block = d - d % self.ep
        if kind == "ep":
            return tuple(self.rank(t, c, block + j, s) for j in range(self.ep))
        if kind.startswith("x"):  # a rendezvous of the same (t, c, d) on several stages
            return tuple(self.rank(t, c, d, int(x)) for x in kind[1:].split(","))
        if kind == "edp":
            return tuple(self.rank(t, c, d % self.ep + self.ep * k, s) for k in range(self.dp // self.ep))
        raise ValueError(kind)

    def groups(self, extra: Sequence[str] = ()) -> tuple[dict[int, tuple[int, ...]], dict[tuple[str, int], int]]:
        """(group id -> members, (kind, rank) -> group id); ids from 1, groups of one skipped.

        ``extra``: cross-stage kinds ``x<s1>,<s2>,...``, defined for ranks of those stages.
        """
        ids: dict[tuple[int, ...], int] = {}
        of: dict[tuple[str, int], int] = {}
        for kind in ("tp", "cp", "dp", "ep", "edp", *extra):
            for r in range(self.num_ranks):
                if kind.startswith("x") and str(self.coords(r)[3]) not in kind[1:].split(","):
                    continue
                m = tuple(sorted(self.members(kind, r)))
                if len(m) > 1:
                    of[(kind, r)] = ids.setdefault(m, len(ids) + 1)
        return {g: m for m, g in ids.items()}, of


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
        stages = _stages(g, i, streams)
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
            if len(stages) > 1:  # one rendezvous node on several stages
                group = "x" + ",".join(map(str, stages))
            elif ops.template_names[t].startswith("embedding_tied"):  # each end carries its half
                group = f"x0,{w.num_stages - 1}"
            else:
                group = "edp" if ops.template_names[t].startswith("edp") else _KINDS[kind_idx]
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


def _stages(g: Graph, i: int, streams: list[int]) -> tuple[int, ...]:
    """The stages a node belongs to: its rank, or (rank -1, a rendezvous) its streams' stages."""
    if int(g.rank[i]) >= 0:
        return (int(g.rank[i]),)
    found = sorted({_stream_stage(g, x) for x in streams} - {-1})
    if not found:
        raise InputError(f"graph node {int(g.node_ids[i])}", g.names[i],
                         "a node without a rank must sit on per-stage streams s<k>.*")
    return tuple(found)


def _rank_trace(r: int, lay: RankLayout, stage_ops: list[_Op], incoming: list[_Op],
                group_of: dict[tuple[str, int], int], n: int) -> EtTrace:
    t, c, d, s = lay.coords(r)
    b = EtTraceBuilder(metadata={"schema": "simsweep transformer export", "rank": r})
    alias: dict[int, list[int]] = {}  # graph index -> node ids a consumer must wait for
    for op in incoming:  # receives of activations/gradients sent to this stage
        size = int(round(dict(op.attrs)["comm_size"]))
        src = lay.rank(t, c, d, int(dict(op.attrs)["src_stage"]))
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
            gid = group_of.get((op.group, r))
            if gid is None:  # a group of one: nothing to communicate
                b.add_node(op.index, op.name, NodeType.COMP_NODE, data_deps=deps, ctrl_deps=ctrl,
                           attrs=_GPU)
                continue
            attrs["pg_name"] = str(gid)
            b.add_node(op.index, op.name, NodeType.COMM_COLL_NODE, data_deps=deps, ctrl_deps=ctrl,
                       attrs=attrs)
        elif op.kind == "pp_send":
            attrs["comm_dst"] = lay.rank(t, c, d, int(a["peer"]))
            attrs["comm_tag"] = op.index
            b.add_node(op.index, op.name, NodeType.COMM_SEND_NODE, data_deps=deps, ctrl_deps=ctrl,
                       attrs=attrs)
        else:  # cp ring step: send to the next cp rank, receive from the previous one
            b.add_node(op.index, op.name + "_send", NodeType.COMM_SEND_NODE, data_deps=deps,
                       ctrl_deps=ctrl, attrs={
                **attrs, "comm_dst": lay.rank(t, (c + 1) % lay.cp, d, s), "comm_tag": op.index})
            b.add_node(n + op.index, op.name + "_recv", NodeType.COMM_RECV_NODE, data_deps=deps, attrs={
                **attrs, "comm_src": lay.rank(t, (c - 1) % lay.cp, d, s), "comm_tag": op.index})
            alias[op.index] = [op.index, n + op.index]
    return b.build(path=f"rank {r}")


def transformer_to_traces(
    workload: TransformerWorkload, parallel: ParallelSpec, template_us: NDArray[np.float64],
    ranks: Sequence[int] | None = None,
) -> tuple[dict[int, EtTrace], dict[int, tuple[int, ...]]]:
    """Per-rank traces (for ``ranks``, default all) and the communicator groups.

    Args:
        workload: the generated graph (one representative rank per stage).
        parallel: the resolved plan (``dp`` set).
        template_us: (U,) duration of each template in microseconds (compute templates).
    """
    lay = RankLayout(parallel.tp, parallel.cp, parallel.dp_size, parallel.pp, parallel.ep)
    ops = _ops(workload, template_us)
    extra = sorted({op.group for op in ops if op.group.startswith("x")})
    groups, group_of = lay.groups(extra)
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
    out = {r: _rank_trace(r, lay, by_stage[lay.coords(r)[3]], incoming[lay.coords(r)[3]],
                          group_of, g.num_nodes) for r in want}
    return out, groups
