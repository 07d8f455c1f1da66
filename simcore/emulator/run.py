"""Run an ASTRA-sim workload: every (representative) NPU's workload layer on one clock.

What is emulated and why (reference/astra-sim-and-chakra.md §1-§3): ASTRA-sim's analytical
binaries are a discrete-event simulation; their results depend on the *order* of events (which
ready node gets the one communication slot, which chunk waits in which queue, how messages queue
on links), so this is an exact event-driven emulation of the same rules rather than a closed
form: the workload layer (:mod:`simcore.emulator.workload`), the system layer's streams, queues and
ring steps (:mod:`simcore.emulator.system`), send/recv matching (:mod:`simcore.emulator.network.messaging`)
and the two analytical networks. Two reductions keep it fast without changing any number:
- ranks that are equivalent by symmetry are simulated once (:mod:`simcore.emulator.symmetry`);
- with the congestion-unaware network and a folded run, a collective runs alone on its NPU
  (one communication op in flight) and nothing else touches its messages, so its duration
  depends only on (type, size, group, dims): it is simulated once in isolation and reused.
"""

from __future__ import annotations

import gc
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from simcore.emulator.context import AstraContext, make_context
from simcore.emulator.network import BACKENDS
from simcore.emulator.network.topology import Topology
from simcore.emulator.program import NodeType, RankProgram, check_acyclic
from simcore.emulator.specs import CommGroupsSpec, NetworkSpec, RemoteMemorySpec, SystemSpec
from simcore.emulator.symmetry import representatives
from simcore.emulator.system import SystemLayer
from simcore.emulator.workload import WorkloadRank
from simcore.errors import InputError

__all__ = ["NpuResult", "simulate_astra"]


@dataclass(frozen=True)
class NpuResult:
    """ASTRA-sim's end-of-run line for one NPU: finish time and exposed communication (ns)."""

    npu: int
    finish_ns: int
    exposed_comm_ns: int


def _self_folded(ctx: AstraContext, npu: int, group: tuple[int, ...] | None, cache: dict[Any, bool]) -> bool:
    """Whether every member of ``group`` (None = all NPUs) folds onto ``npu``."""
    found = cache.get(group)
    if found is None:
        members = range(ctx.topology.npus) if group is None else group
        found = cache[group] = all(ctx.rep[m] == npu for m in members)
    return found


class _IsolatedCollectives:
    """Collective durations simulated once in isolation and reused (unaware, folded runs).

    Only for a collective whose group folds onto this representative; a group whose members are
    of different classes (each simulated) runs step by step in the shared run.
    """

    def __init__(self, ctx: AstraContext, npu: int, system: SystemLayer) -> None:
        self.ctx = ctx
        self.npu = npu
        self.system = system
        self.cache: dict[tuple[Any, ...], int] = {}
        self.folded: dict[Any, bool] = {}

    def __call__(self, comm: str, size: int, group: tuple[int, ...] | None, involved: tuple[bool, ...] | None,
                 priority: int, on_done: Callable[[Any], None], arg: Any) -> None:
        if not _self_folded(self.ctx, self.npu, group, self.folded):
            self.system.generate(comm, size, group, involved, priority, on_done, arg)
            return
        key = (comm, size, group, involved)
        duration = self.cache.get(key)
        if duration is None:
            ctx = self.ctx
            alone = make_context(ctx.system, ctx.topology, "unaware", [self.npu] * ctx.topology.npus, ctx.groups,
                                 ctx.remote_memory)
            SystemLayer(self.npu, alone).generate(comm, size, group, involved, priority, _noop, None)
            duration = alone.events.run()
            self.cache[key] = duration
        self.ctx.events.after(duration, on_done, arg)


def _mixed_to_layer(ctx: AstraContext, npu: int, layer: SystemLayer, isolated: Callable[..., None]
                    ) -> Callable[..., None]:
    """``isolated`` for collectives whose group folds onto ``npu``, the system layer otherwise."""
    cache: dict[Any, bool] = {}

    def handler(comm: str, size: int, group: tuple[int, ...] | None, involved: tuple[bool, ...] | None,
                priority: int, on_done: Callable[[Any], None], arg: Any) -> None:
        if _self_folded(ctx, npu, group, cache):
            isolated(comm, size, group, involved, priority, on_done, arg)
        else:
            layer.generate(comm, size, group, involved, priority, on_done, arg)
    return handler


def _run_events(ctx: AstraContext) -> None:
    """Run the event loop with the cyclic garbage collector's first generation collected every
    100,000 allocations instead of 700 (restored after): an unfolded run allocates a few container
    objects per message (5.6 M messages on the 256-NPU export), freed by reference counting, and
    the default threshold runs a collection every few hundred messages for nothing (3-10% of the
    unfolded aware run of that export here, measured under load)."""
    threshold = gc.get_threshold()
    gc.set_threshold(100_000, *threshold[1:])
    try:
        ctx.events.run()
    finally:
        gc.set_threshold(*threshold)


def _p2p_keys(programs: Sequence[RankProgram], rep: list[int]) -> frozenset[tuple[int, int, int, int]]:
    """The messenger keys ``(tag, src, dst, size)`` of every simulated NPU's sends and receives."""
    keys: set[tuple[int, int, int, int]] = set()
    for npu in sorted(set(rep)):
        program = programs[npu]
        for kind, peer_attr in ((NodeType.SEND, "comm_dst"), (NodeType.RECV, "comm_src")):
            at = np.flatnonzero(program.types == kind)
            if at.shape[0] == 0:
                continue
            peers = program.attr(peer_attr)[at].tolist()
            tags = program.attr("comm_tag")[at].tolist()
            sizes = np.maximum(program.attr("comm_size")[at], 0).tolist()
            for peer, tag, size in zip(peers, tags, sizes, strict=True):
                end = rep[peer] if 0 <= peer < len(rep) else peer
                keys.add((tag, npu, end, size) if kind == NodeType.SEND else (tag, end, npu, size))
    return frozenset(keys)


def _noop(_: Any) -> None:
    return None


def simulate_astra(programs: Sequence[RankProgram], system: SystemSpec, network: NetworkSpec,
                   backend: str = "unaware", groups: CommGroupsSpec | None = None,
                   remote_memory: RemoteMemorySpec | None = None, fold: bool = True,
                   custom_loader: Callable[[str, int], RankProgram] | None = None) -> list[NpuResult]:
    """Simulate one ET program per NPU; returns one :class:`NpuResult` per NPU in id order.

    ``custom_loader(prefix, pos)`` supplies custom-algorithm graphs (default: read ``<prefix>.<pos>.et``).
    """
    if backend not in BACKENDS:
        raise InputError("network-backend", backend, f"must be one of {', '.join(BACKENDS)}")
    topology = Topology(network)
    if len(programs) != topology.npus:
        raise InputError("workload", len(programs), f"needs one ET file per NPU ({topology.npus})")
    groups = groups or CommGroupsSpec()
    custom = system.per_node_custom_implementation or any(
        getattr(system, f"{c}_implementation_custom") for c in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")
    )  # a custom algorithm's per-rank graphs need not be alike: never fold then
    shared_memory = remote_memory is not None and remote_memory.memory_type in (
        "PER_NODE_MEMORY_EXPANSION", "MEMORY_POOL")  # NPUs contend for it: folding would hide that
    if system.model_shared_bus:
        warnings.warn("model-shared-bus: the LogGP bus model is not emulated; endpoint-delay is used",
                      stacklevel=2)
    safe = fold and not custom and not shared_memory
    rep = representatives(programs, groups, topology, backend) if safe else list(range(topology.npus))
    ctx = make_context(system, topology, backend, rep, groups, remote_memory)
    if custom_loader is not None:
        ctx.custom_loader = custom_loader
    ctx.p2p_keys = _p2p_keys(programs, rep)
    ctx.p2p_tags = frozenset(key[0] for key in ctx.p2p_keys)
    folded = rep != list(range(topology.npus))
    # the isolated-collective shortcuts assume one communication op in flight per NPU; a CPU-op
    # collective or send can overlap a GPU one (separate slots), so then every step is simulated
    overlap = any(
        bool((((programs[r].types == NodeType.COLL) | (programs[r].types == NodeType.SEND))
              & programs[r].is_cpu_op).any())
        for r in set(rep)
    )
    isolated = folded and not overlap and not system.replay_only
    fast_aware = None
    if isolated and backend == "aware":  # folding implies one Switch dim here
        from simcore.emulator.folded_switch import FoldedSwitchCollectives, FoldedSwitchNetwork

        switch = FoldedSwitchNetwork(ctx)
        ctx.messenger.network = switch
        fast_aware = FoldedSwitchCollectives(ctx, switch)
    ranks = {}
    for npu in sorted(set(rep)):
        layer = SystemLayer(npu, ctx)
        rank = WorkloadRank(npu, programs[npu], ctx, layer)
        if isolated and backend == "unaware":
            rank.collective_handler = _IsolatedCollectives(ctx, npu, layer)
        elif fast_aware is not None:
            rank.collective_handler = _mixed_to_layer(ctx, npu, layer, fast_aware.handler(npu))
        ranks[npu] = rank
    for rank in ranks.values():
        rank.start()
    _run_events(ctx)
    stalled = [npu for npu, rank in ranks.items() if rank.completed != rank.program.num_nodes]
    if stalled:
        for npu in stalled:  # a cycle also stalls: name it (folded ranks share their rep's deps)
            check_acyclic(programs[npu])
        rank = ranks[stalled[0]]
        raise InputError("workload", f"NPUs {stalled[:8]}",
                         f"stalled ({rank.program.num_nodes - rank.completed} nodes of {rank.program.source} never "
                         "finished): a recv without a matching send, a collective not joined by its group, or a deadlock")
    out = []
    for npu in range(topology.npus):
        rank = ranks[rep[npu]]
        out.append(NpuResult(npu, rank.finish_ns, rank.finish_ns - rank.gpu_compute_ns))
    return out
