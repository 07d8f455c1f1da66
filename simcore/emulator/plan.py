"""How ASTRA-sim splits a collective into chunks and per-dimension phases (reference §1.2, §1.5).

``Sys::generate_collective``: chunk = size // preferred-dataset-splits; unless it is an
all-gather, a chunk is at least one byte per NPU (chunk = NPUs, size = splits * chunk); one
stream per chunk. Each chunk's phases, one per involved dimension of size > 1:
- not all-reduce, or ``baseline``: the same collective on dims 0..D-1 (all-gather D-1..0);
- all-reduce with ``localBWAware``: reduce-scatter on the dims before the last active one,
  all-reduce on the last, all-gather back down;
each phase's input is the previous phase's final size; every phase uses the collective's own
per-dimension implementation. A communicator group that is not the whole machine is one
logical ring over its sorted NPUs with the ``ring`` algorithm and the fixed 10-cycle "Local"
transfer delay (``CommunicatorGroup.cc``). ``one*`` algorithms use one dimension over all NPUs.
"""

from __future__ import annotations

from dataclasses import dataclass

from simcore.emulator.network.topology import Topology
from simcore.emulator.specs import SystemSpec, split_algorithm
from simcore.errors import InputError
from simcore.network.collectives import astra_algorithm
from simcore.network.collectives._base import AG, AR

__all__ = ["Phase", "chunk_sizes", "phases_for"]

LOCAL_DELAY_NS = 10


@dataclass(frozen=True)
class Phase:
    """One phase of one chunk: ``comm`` on the logical ring ``members`` (real NPU ids, ring order)."""

    comm: str
    members: tuple[int, ...]
    algorithm: str
    window: int
    size: int
    queue: int
    transfer_delay_ns: int
    custom: str | None = None  # path prefix of a custom algorithm (reference §1.4)


def chunk_sizes(comm: str, size: int, splits: int, total_nodes: int) -> list[int]:
    """Chunk sizes in stream order (``Sys::generate_collective``)."""
    chunk = size // splits
    if comm != AG and total_nodes > chunk:
        chunk = total_nodes
        size = splits * chunk
    if chunk <= 0:
        return []
    out = []
    while size > 0:
        out.append(min(chunk, size))
        size -= out[-1]
    return out


def _dim_members(topo: Topology, npu: int, dim: int) -> tuple[int, ...]:
    stride, size = topo.strides[dim], topo.sizes[dim]
    base = npu - topo.coord(npu, dim) * stride
    return tuple(base + c * stride for c in range(size))


def _world_dims(topo: Topology, npu: int, impl: tuple[str, ...], involved: tuple[bool, ...] | None
                ) -> list[tuple[tuple[int, ...], str, int, int]]:
    """(members, algorithm, window, queue) per logical dimension, skipping inactive ones."""
    if not impl:
        raise InputError("implementation", None, "is missing from the system config; the workload issues this collective")
    base0, win0 = split_algorithm(impl[0])
    if base0.startswith("one"):
        return [(tuple(range(topo.npus)), base0, win0, 0)]
    if len(impl) > len(topo.sizes):
        raise InputError("implementation", list(impl), f"lists more dimensions than the network's {len(topo.sizes)}")
    dims = []
    for dim, name in enumerate(impl):
        on = True if involved is None or dim >= len(involved) else involved[dim]
        if topo.sizes[dim] > 1 and on:
            base, window = split_algorithm(name)
            dims.append((_dim_members(topo, npu, dim), base, window, dim))
    return dims


def phases_for(spec: SystemSpec, topo: Topology, npu: int, comm: str, chunk: int,
               group: tuple[int, ...] | None, involved: tuple[bool, ...] | None) -> list[Phase]:
    """The phase list of one chunk of ``comm`` issued by ``npu``."""
    if group is not None and len(group) < topo.npus:
        if len(group) == 1:  # a 1-NPU dimension is skipped: the collective has no phase at all
            return []
        return [Phase(comm, group, "ring", 0, chunk, 0, LOCAL_DELAY_NS)]
    try:
        return _world_phases(spec, topo, npu, comm, chunk, involved)
    except InputError as err:  # name the system key of this collective
        if err.key != "implementation":
            raise
        raise InputError(f"{comm.replace('_', '-')}-implementation", err.value, err.rule) from None


def _world_phases(spec: SystemSpec, topo: Topology, npu: int, comm: str, chunk: int,
                  involved: tuple[bool, ...] | None) -> list[Phase]:
    delay = spec.endpoint_delay_ns
    dims = _world_dims(topo, npu, spec.implementation(comm), involved)
    phases: list[Phase] = []
    size = chunk
    if comm != AR or spec.collective_optimization == "baseline":
        for members, alg, win, queue in (reversed(dims) if comm == AG else dims):
            phases.append(Phase(comm, members, alg, win, size, queue, delay))
            size = astra_algorithm(alg).final_size(comm, size, len(members))
        return phases
    for k, (members, alg, win, queue) in enumerate(dims):
        kind = AR if k == len(dims) - 1 else "reduce_scatter"
        phases.append(Phase(kind, members, alg, win, size, queue, delay))
        size = astra_algorithm(alg).final_size(kind, size, len(members))
    for members, alg, win, queue in reversed(dims[:-1]):
        phases.append(Phase(AG, members, alg, win, size, queue, delay))
        size = astra_algorithm(alg).final_size(AG, size, len(members))
    return phases
