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
from numpy.typing import NDArray

from simcore.astra.program import NodeType, RankProgram
from simcore.network.topology import Topology
from simcore.specs.astra import CommGroupsSpec

__all__ = ["representatives"]


def _group_ids(program: RankProgram) -> NDArray[np.int64]:
    """Per node: the communicator group id of its ``pg_name`` (0 = all NPUs / none)."""
    table = np.array([int(p) if p.isdigit() else 0 for p in program.pg_names] + [0], dtype=np.int64)
    return table[program.pg_codes]


def _base_hash(program: RankProgram, group_ids: NDArray[np.int64], sizes: dict[int, int]) -> bytes:
    h = hashlib.blake2b(digest_size=16)
    for arr in (program.ids, program.types, program.duration_us, program.is_cpu_op, program.parents_ptr,
                program.parents):
        h.update(np.ascontiguousarray(arr).tobytes())
    for name in sorted(program.ints):
        if name not in ("comm_src", "comm_dst"):
            h.update(np.ascontiguousarray(program.ints[name]).tobytes())
    lookup = np.vectorize(lambda g: sizes.get(int(g), -1), otypes=[np.int64])
    distinct, inverse = np.unique(group_ids, return_inverse=True)
    h.update(lookup(distinct)[inverse].tobytes())
    h.update(repr(program.involved_dim).encode())
    return h.digest()


def _peers(program: RankProgram) -> NDArray[np.int64]:
    types = program.types
    src, dst = program.attr("comm_src"), program.attr("comm_dst")
    peer = np.where(types == NodeType.SEND, dst, np.where(types == NodeType.RECV, src, -1))
    return peer[peer >= 0]


def _symmetric_network(topology: Topology, backend: str) -> bool:
    if len(topology.kinds) != 1:
        return False
    return topology.kinds[0] == "Switch" or (backend == "unaware" and topology.kinds[0] == "FullyConnected")


def _ids(keys: Sequence[bytes]) -> NDArray[np.int64]:
    """Dense colour ids in order of first appearance."""
    first: dict[bytes, int] = {}
    return np.array([first.setdefault(k, len(first)) for k in keys], dtype=np.int64)


def representatives(programs: Sequence[RankProgram], groups: CommGroupsSpec, topology: Topology,
                    backend: str) -> list[int]:
    """``rep[r]``: the rank that stands for rank ``r`` (itself if no safe folding exists)."""
    n = len(programs)
    identity = list(range(n))
    if not _symmetric_network(topology, backend) or n < 2:
        return identity
    members = {gid: np.array(m, dtype=np.int64) for gid, m in groups.groups}
    members[0] = np.arange(n, dtype=np.int64)
    sizes = {gid: len(m) for gid, m in members.items()}
    coll = [np.flatnonzero(p.types == NodeType.COLL) for p in programs]
    gids = [_group_ids(p)[c] for p, c in zip(programs, coll, strict=True)]
    if any(int(g) not in members for ids in gids for g in np.unique(ids)):
        return identity  # an unknown group: the workload layer reports it
    peers = [_peers(p) for p in programs]
    if any(((p < 0) | (p >= n)).any() for p in peers):
        return identity
    color = _ids([_base_hash(p, _group_ids(p), sizes) for p in programs])
    classes = int(color.max()) + 1
    while True:
        gcolor = {gid: hashlib.blake2b(np.sort(color[m]).tobytes(), digest_size=8).digest()
                  for gid, m in members.items()}
        gcode = {gid: i for i, gid in enumerate(gcolor)}
        gnum = _ids(list(gcolor.values()))
        keys = []
        for r in range(n):
            h = hashlib.blake2b(int(color[r]).to_bytes(8, "little"), digest_size=16)
            h.update(color[peers[r]].tobytes())
            h.update(gnum[[gcode[int(g)] for g in np.unique(gids[r])]].tobytes() if gids[r].size else b"")
            h.update(np.unique(gids[r], return_inverse=True)[1].tobytes())
            keys.append(h.digest())
        color = _ids(keys)
        if int(color.max()) + 1 == classes:
            break
        classes = int(color.max()) + 1
    for r in range(n):
        for g in np.unique(gids[r]).tolist():
            if (color[members[g]] != color[r]).any():
                return identity
    first: dict[int, int] = {}
    return [first.setdefault(int(c), r) for r, c in enumerate(color)]
