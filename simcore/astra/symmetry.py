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
from typing import Any

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


def _columns(program: RankProgram, group_ids: NDArray[np.int64], sizes: dict[int, int]) -> list[NDArray[Any]]:
    """Everything of a trace except who the peers are (group ids become group sizes)."""
    table = np.full(max(max(sizes), int(group_ids.max(initial=0))) + 1, -1, dtype=np.int64)
    for gid, size in sizes.items():
        table[gid] = size
    group_sizes = table[group_ids]
    cols: list[NDArray[Any]] = [program.ids, program.types, program.duration_us, program.is_cpu_op, program.parents_ptr,
            program.parents, group_sizes]
    cols += [program.ints[name] for name in sorted(program.ints) if name not in ("comm_src", "comm_dst")]
    return cols


def _base_colors(programs: Sequence[RankProgram], sizes: dict[int, int]) -> NDArray[np.int64]:
    """Colour = class of ranks whose peer-blind columns are equal (checked element by element)."""
    reps: dict[tuple[int, ...], list[tuple[int, list[NDArray[Any]]]]] = {}
    color = np.zeros(len(programs), dtype=np.int64)
    count = 0
    for r, program in enumerate(programs):
        cols = _columns(program, _group_ids(program), sizes)
        quick = (program.num_nodes, int(program.duration_us.sum()), int(program.parents.sum()))
        for c, other in reps.get(quick, []):
            if all(np.array_equal(a, b) for a, b in zip(cols, other, strict=True)) and (
                program.involved_dim == programs[int(np.flatnonzero(color == c)[0])].involved_dim
            ):
                color[r] = c
                break
        else:
            reps.setdefault(quick, []).append((count, cols))
            color[r] = count
            count += 1
    return color


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
    color = _base_colors(programs, sizes)
    classes = int(color.max()) + 1
    while True:
        gcolor = {gid: hashlib.blake2b(np.sort(color[m]).tobytes(), digest_size=8).digest()
                  for gid, m in members.items()}
        gnum = np.zeros(max(members) + 1, dtype=np.int64)
        gnum[list(gcolor)] = _ids(list(gcolor.values()))  # group id -> colour of its member multiset
        keys = []
        for r in range(n):
            h = hashlib.blake2b(int(color[r]).to_bytes(8, "little"), digest_size=16)
            h.update(color[peers[r]].tobytes())
            h.update(gnum[gids[r]].tobytes())
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
