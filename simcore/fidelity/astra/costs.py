"""The ``astra`` fidelity mode: the direct simulation with ASTRA-sim's analytical costs and issue rules.

What ``simsweep chakra export`` + ``simsweep astra`` would compute for the same workload, without
writing ET files (DESIGN.md, "fidelity modes"; reference/astra-sim-and-chakra.md §1-§3, §5.1).
The system and network are the ones the exporter writes (``search/commands/chakra.py``): a
``ring`` per dimension, ``preferred-dataset-splits`` 4, ``active-chunks-per-dimension`` 1,
``endpoint-delay`` 10, ``local-mem-bw`` = HBM GB/s, ``roofline-enabled`` 0, and the analytical
network of the scale-up (and scale-out) dimension with bandwidths written in GiB/s.

Durations (per template, (U, B) seconds, vectorized over the batch):
- compute: the calibrated kernel models rounded to the ET's 1 us (``duration_micros``; ASTRA-sim
  replays it as ``micros * 1000`` ns, 1 ns when 0), as the exporter writes it;
- a collective of comm_size D on a communicator group of n ranks (one logical ring, the fixed
  10-cycle transfer delay, ``CommunicatorGroup.cc``): chunks :func:`simcore.emulator.plan.chunk_sizes`
  run one after another (one active chunk), each chunk's ring steps
  :meth:`~simcore.network.collectives.ring.Ring.lanes` cost ``10 + sum_steps (hop + 10 + 3 floor(msg /
  local-mem-bw) [reducing])`` ns with hop = ``int(hops x latency + msg / bytes_per_ns)``
  (:mod:`simcore.emulator.network.topology`, the unaware network) on the dimension the hop crosses. A ring
  mixing scale-up and scale-out hops costs the slowest rank's window of consecutive hops;
- a pipeline send / context-parallel KV exchange: one message, ``int(hops x latency + size /
  bytes_per_ns)``.

Issue rules: ASTRA-sim's workload layer keeps one communication op (collective or send) in flight
per NPU. Here the communication ops of a stage (its tp, cp, dp and embedding streams, the
sender's pipeline link, blocking collectives on the compute stream; typed streams,
:mod:`simcore.ir.streams`) run one at a time in one
order: a topological order taking the lowest ready node index (= exported node id) first, which
is ASTRA-sim's issue rule wherever readiness follows the order. ASTRA-sim decides at run time: a
ready op may overtake an earlier one that is not ready yet, the one source of residual
difference (the direct time is then later).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, cast

import numpy as np
from numpy.typing import NDArray

from simcore.emulator.plan import LOCAL_DELAY_NS, chunk_sizes
from simcore.engine._chains import predecessors
from simcore.errors import InputError
from simcore.fidelity.astra.export_system import DATASET_SPLITS, GIB_PER_GB
from simcore.fidelity.astra.groups import CommEndpoints, comm_endpoints
from simcore.fidelity.astra.machine import machine_collective_ns
from simcore.ir.dag import priority_order
from simcore.ir.graph import CommType, Graph
from simcore.ir.ops import COMPUTE, OpTable
from simcore.ir.streams import Stream, StreamKind
from simcore.network.collectives import REGISTRY
from simcore.specs.parallel import ParallelSpec
from simcore.specs.system import SystemSpec, TopologyDimSpec
from simcore.workloads._base import Workload

__all__ = ["astra_graph", "astra_template_durations", "astra_workload"]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]

_COMMS = {CommType.ALL_REDUCE: "all_reduce", CommType.ALL_GATHER: "all_gather",
          CommType.ALL_TO_ALL: "all_to_all", CommType.REDUCE_SCATTER: "reduce_scatter"}
_GIB_PER_GB = GIB_PER_GB  # the exporter writes GB/s as GiB/s numbers with 6 decimals
_SPLITS = DATASET_SPLITS  # preferred-dataset-splits of the exported system JSON
_ENDPOINT_NS = LOCAL_DELAY_NS  # comm-group rings use the fixed 10-cycle delay


def _issue_order(graph: Graph) -> IntArray:
    """Topological order of ``graph`` (dependencies and stream order) taking the lowest ready index.

    ASTRA-sim issues the lowest-id ready node (ids = node indices in the export); where the index
    order is already topological this is the identity.
    """
    ptr, idx = predecessors(graph)
    return priority_order(ptr, idx, graph.num_nodes)


def _permuted(graph: Graph, order: IntArray) -> Graph:
    """``graph`` with node ``order[k]`` moved to index ``k`` (so stream order follows ``order``)."""
    new_of = np.empty_like(order)
    new_of[order] = np.arange(order.size)
    dcount, rcount = np.diff(graph.dep_ptr)[order], np.diff(graph.res_ptr)[order]
    dep_ptr = np.concatenate([[0], np.cumsum(dcount)]).astype(np.int64)
    res_ptr = np.concatenate([[0], np.cumsum(rcount)]).astype(np.int64)
    deps = [graph.dep_idx[graph.dep_ptr[i]:graph.dep_ptr[i + 1]] for i in order.tolist()]
    res = [graph.res_idx[graph.res_ptr[i]:graph.res_ptr[i + 1]] for i in order.tolist()]
    empty = np.zeros(0, dtype=np.int64)
    return replace(
        graph, kind=graph.kind[order], rank=graph.rank[order], dep_ptr=dep_ptr,
        dep_idx=new_of[np.concatenate(deps or [empty])].astype(np.int64), res_ptr=res_ptr,
        res_idx=np.concatenate(res or [empty]).astype(np.int64),
        names=tuple(graph.names[i] for i in order.tolist()), node_ids=graph.node_ids[order],
        attrs={k: v[order] for k, v in graph.attrs.items()})


def astra_graph(graph: Graph, ops: OpTable) -> Graph:
    """``graph`` with every stage's communication ops in one in-order sequence per stage.

    The nodes are first put in ASTRA-sim's issue order (:func:`_issue_order`) so that the merged
    sequence never waits for a node that depends on a later one. Communication off the compute
    stream moves to one ``s<k>.comm`` stream; a blocking collective stays on the compute stream
    only; between the two kinds the order is an explicit dependency (edges already implied by a
    shared stream are left out, so compute runs keep collapsing into chains).
    """
    graph = _permuted(graph, _issue_order(graph))
    tmpl = graph.attr("template").astype(np.int64)
    names = list(graph.resource_names)
    streams = [graph.stream(r) for r in range(graph.num_resources)]
    comm_ids: dict[int, int] = {}

    def comm_stream(stage: int) -> int:
        if stage not in comm_ids:
            comm_ids[stage] = len(streams)
            streams.append(Stream(StreamKind.COMM, stage))
            names.append(streams[-1].name)
        return comm_ids[stage]

    for r, st in enumerate(streams):
        if st.kind == StreamKind.OTHER:
            raise InputError("resource", names[r], "astra mode expects typed stage streams")
    is_compute = [st.kind == StreamKind.COMPUTE for st in streams]
    owner = [st.stage for st in streams]  # a link: the sender's comm slot

    res_ptr: list[int] = [0]
    res_idx: list[int] = []
    dep_ptr, dep_idx = [0], []
    last: dict[int, tuple[int, bool]] = {}  # stage -> (last comm node, on the compute stream)
    for i in range(graph.num_nodes):
        res = graph.resources_of(i).tolist()
        comp = [r for r in res if is_compute[r]]
        other = [r for r in res if not is_compute[r]]
        deps = graph.deps_of(i).tolist()
        if ops.template_kind[int(tmpl[i])] != COMPUTE or other:
            on_compute = bool(comp)
            stages = sorted({owner[r] for r in res})
            for st in stages:
                prev = last.get(st)
                if prev is not None and prev[1] != on_compute and prev[0] not in deps:
                    deps.append(prev[0])
                last[st] = (i, on_compute)
            new = comp if on_compute else [comm_stream(st) for st in stages]
        else:
            new = comp
        res_idx.extend(new)
        res_ptr.append(len(res_idx))
        dep_idx.extend(deps)
        dep_ptr.append(len(dep_idx))
    return replace(graph, res_ptr=np.asarray(res_ptr, dtype=np.int64),
                   res_idx=np.asarray(res_idx, dtype=np.int64), resource_names=tuple(names),
                   streams=tuple(streams),
                   dep_ptr=np.asarray(dep_ptr, dtype=np.int64),
                   dep_idx=np.asarray(dep_idx, dtype=np.int64))


def astra_workload(workload: Workload) -> Workload:
    """The workload with ASTRA-sim's one-communication-op-per-NPU streams."""
    return replace(workload, graph=astra_graph(workload.graph, workload.ops))


def _gib_bytes_per_ns(bandwidth_GBps: FloatArray) -> FloatArray:
    return np.round(bandwidth_GBps * _GIB_PER_GB, 6) * 2**30 / 1e9


def _hops(dim: TopologyDimSpec, key: str) -> int:
    """Hops between two NPUs of one dimension: Switch 2, FullyConnected 1 (topology.hops_in_dim).

    A Ring dimension's hops depend on the members' coordinates, which the kernels do not carry.
    """
    if dim.kind not in ("Switch", "FullyConnected"):
        raise InputError(key, dim.kind, "astra fidelity supports Switch and FullyConnected dimensions")
    return 2 if dim.kind == "Switch" else 1


class _Links:
    """(B,) hop delays of the scale-up (intra-node) and scale-out (inter-node) dimensions."""

    def __init__(self, systems: Sequence[SystemSpec]) -> None:
        kinds = {(s.scaleup.kind, s.scaleout.kind) for s in systems}
        if len(kinds) != 1:
            raise InputError("system.scaleup.kind", sorted(kinds), "astra mode needs one topology kind per batch")
        s0 = systems[0]
        self.hops = (_hops(s0.scaleup, "system.scaleup.kind"),
                     _hops(s0.scaleout, "system.scaleout.kind") if s0.num_nodes > 1 else 0)
        self.lat = tuple(np.array([d.latency_ns for d in ds]) for ds in
                         ([s.scaleup for s in systems], [s.scaleout for s in systems]))
        self.bpn = tuple(_gib_bytes_per_ns(np.array([d.bandwidth_GBps for d in ds])) for ds in
                         ([s.scaleup for s in systems], [s.scaleout for s in systems]))
        self.mem_Bps = np.array([s.accelerator.hbm_bandwidth_GBps for s in systems]) * 1e9

    def delay_ns(self, dim: int, nbytes: float) -> FloatArray:
        """``int(hops * latency + size / bytes_per_ns)`` (topology.unaware_delay_ns) per point."""
        return np.floor(self.hops[dim] * self.lat[dim] + nbytes / self.bpn[dim])

    def reduction_ns(self, nbytes: float) -> FloatArray:
        """``int(nbytes / (local-mem-bw * 1e9) * 1e9)`` (SystemLayer.reduction_ns)."""
        return np.floor(nbytes / self.mem_Bps * 1e9)


def _collective_ns(links: _Links, ends: CommEndpoints, template: int, comm_type: int, size: int,
                   n: int) -> FloatArray:
    comm = _COMMS.get(CommType(comm_type))
    if comm is None:
        raise InputError("comm_type", comm_type, "astra mode supports all-reduce, all-gather, "
                         "reduce-scatter and all-to-all")
    total = np.zeros_like(links.mem_Bps)
    for chunk in chunk_sizes(comm, size, _SPLITS, n):
        (steps,) = REGISTRY["ring"].lanes(comm, n, 0, chunk)
        total += _ENDPOINT_NS
        for st in steps:
            total += _ENDPOINT_NS + 3 * links.reduction_ns(st.nbytes) * st.reduce
        k = len(steps)
        msg = steps[0].nbytes if steps else 0  # the ring steps of one phase carry one size
        lo, hi = ends.intra_window(template, k)
        d0, d1 = links.delay_ns(0, msg), links.delay_ns(1, msg)
        total += np.maximum(lo * d0 + (k - lo) * d1, hi * d0 + (k - hi) * d1)
    return total


def astra_template_durations(workload: Workload, par: ParallelSpec,
                             systems: Sequence[SystemSpec], calibrated: FloatArray) -> FloatArray:
    """(U, B) seconds of every template under ASTRA-sim's analytical model.

    Args:
        workload: the generated workload (its ops and graph).
        par: the resolved plan (the exporter's rank layout and groups).
        systems: the B systems (one topology kind per batch).
        calibrated: (U, B) calibrated template seconds (compute templates are replayed from them).
    """
    ops = workload.ops
    links = _Links(systems)
    ends = _endpoints(workload, par, systems[0].gpus_per_node)
    out = np.zeros_like(calibrated)
    for t, parts in enumerate(ops.templates):
        if ops.template_kind[t] == COMPUTE or not parts:
            micros = np.round(calibrated[t] * 1e6)
            out[t] = np.where(micros > 0, micros * 1e3, 1.0) * 1e-9
            continue
        (kid, weight), = parts
        cost, args = ops.kernels[kid]
        if cost == "coll":
            size = int(round(args[1] * weight))
            n = int(args[2])
            if n <= 1 or t not in ends.rings:  # a group of one: a 0 us compute node
                out[t] = 1e-9
            elif n == systems[0].num_gpus and systems[0].num_nodes > 1:  # not a comm-group ring
                comm = _COMMS.get(CommType(int(args[0])), "")
                out[t] = machine_collective_ns(systems, comm, size) * 1e-9
            else:
                out[t] = _collective_ns(links, ends, t, int(args[0]), size, n) * 1e-9
        elif cost == "p2p":
            size = int(round(args[0] * weight))
            delays = [links.delay_ns(d, size) for d in ends.p2p_dims(t)] if t in ends.pairs else []
            out[t] = np.max(delays, axis=0) * 1e-9 if delays else 0.0
        else:
            raise InputError(f"template {ops.template_names[t]}", cost, "unknown communication kernel")
    return out


_ENDS: dict[tuple[int, ParallelSpec, int], tuple[Workload, CommEndpoints]] = {}


def _endpoints(w: Workload, par: ParallelSpec, gpus_per_node: int) -> CommEndpoints:
    """:func:`comm_endpoints`, cached per workload object (bounded)."""
    key = (id(w), par, gpus_per_node)
    hit = _ENDS.get(key)
    if hit is not None and hit[0] is w:
        return hit[1]
    if len(_ENDS) >= 32:
        _ENDS.pop(next(iter(_ENDS)))
    ends = comm_endpoints(cast(Any, w), par, gpus_per_node)  # reads graph, ops, num_stages
    _ENDS[key] = (w, ends)
    return ends
