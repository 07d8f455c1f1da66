"""Detect ranks that behave identically, so that one representative per class is simulated.

Two ranks are equivalent when their traces are identical except for *who* their peers are: same
nodes, dependencies, durations and attributes, with each send/recv peer and each communicator
group replaced by the class of the peer / the classes of the members. Classes are found by colour
refinement (start from the peer-blind trace hash, refine with the peers' colours until the
partition is stable), so the partition is equitable: every rank of a class sends to and receives
from the same classes, in the same order. Folding each class onto its lowest rank is then exact
if, in addition,
- every collective's group lies inside one class (its members start it together), and
- the network treats every pair of NPUs alike: one Switch or FullyConnected dimension for the
  congestion-unaware backend (all pairs cost the same), one Switch dimension for the
  congestion-aware one (the up-link of x and the down-link to x are x's own, so folding NPUs
  folds links).
Otherwise every rank is simulated. Nothing here looks at expected results.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from simcore.astra.program import NodeType, RankProgram
from simcore.network.topology import Topology
from simcore.specs.astra import CommGroupsSpec

__all__ = ["representatives"]


def _base_hash(program: RankProgram, groups: CommGroupsSpec) -> bytes:
    h = hashlib.blake2b(digest_size=16)
    for arr in (program.ids, program.types, program.duration_us, program.is_cpu_op, program.parents_ptr,
                program.parents):
        h.update(np.ascontiguousarray(arr).tobytes())
    for name in sorted(program.ints):
        if name not in ("comm_src", "comm_dst"):
            h.update(np.ascontiguousarray(program.ints[name]).tobytes())
    sizes = []
    for pg in program.pg_name:
        members = groups.members(int(pg)) if pg and pg.isdigit() and pg != "0" else None
        sizes.append(-1 if members is None else len(members))
    h.update(np.array(sizes, dtype=np.int64).tobytes())
    h.update(repr(program.involved_dim).encode())
    return h.digest()


def _peers(program: RankProgram) -> list[int]:
    types = program.types
    src, dst = program.attr("comm_src"), program.attr("comm_dst")
    peer = np.where(types == NodeType.SEND, dst, np.where(types == NodeType.RECV, src, -1))
    return [int(p) for p in peer[peer >= 0]]


def _group_lists(program: RankProgram, groups: CommGroupsSpec, npus: int) -> list[tuple[int, ...]]:
    out = []
    for i in np.flatnonzero(program.types == NodeType.COLL).tolist():
        pg = program.pg_name[i]
        members = groups.members(int(pg)) if pg and pg.isdigit() and pg != "0" else None
        out.append(tuple(range(npus)) if members is None else members)
    return out


def _symmetric_network(topology: Topology, backend: str) -> bool:
    if len(topology.kinds) != 1:
        return False
    return topology.kinds[0] == "Switch" or (backend == "unaware" and topology.kinds[0] == "FullyConnected")


def representatives(programs: Sequence[RankProgram], groups: CommGroupsSpec, topology: Topology,
                    backend: str) -> list[int]:
    """``rep[r]``: the rank that stands for rank ``r`` (itself if no safe folding exists)."""
    n = len(programs)
    identity = list(range(n))
    if not _symmetric_network(topology, backend):
        return identity
    colors = [_base_hash(p, groups) for p in programs]
    peers = [_peers(p) for p in programs]
    members = [_group_lists(p, groups, n) for p in programs]
    classes = len(set(colors))
    while True:
        new = []
        for r in range(n):
            h = hashlib.blake2b(colors[r], digest_size=16)
            h.update(b"".join(colors[p] for p in peers[r] if 0 <= p < n))
            for group in members[r]:
                h.update(b"|" + b"".join(sorted(colors[m] for m in group if 0 <= m < n)))
            new.append(h.digest())
        colors = new
        if len(set(colors)) == classes:
            break
        classes = len(set(colors))
    first: dict[bytes, int] = {}
    rep = [first.setdefault(c, r) for r, c in enumerate(colors)]
    for r in range(n):
        for group in members[r]:
            if any(colors[m] != colors[r] for m in group if 0 <= m < n):
                return identity
    return rep
