"""Detect ranks that behave identically, so that one representative per class is simulated.

Two ranks are equivalent when their traces are identical except for *who* their peers are: same
nodes, dependencies, durations and attributes, with each send/recv peer and each communicator
group replaced by the class of the peer / the classes of the members. Classes are found by colour
refinement (start from the peer-blind trace hash, refine with the peers' colours until the
partition is stable), so the partition is equitable: every rank of a class sends to and receives
from the same classes, in the same order. The refinement also
keys each message by the network dimension it crosses. Folding each class onto its lowest rank
is then exact if, in addition,
- every collective's group lies inside one class (its members start it together; the
  representative's ring messages go to itself but cost the real route), or its members are all
  of different classes (then every member's representative takes part for it), and
- a message's cost depends only on the dimension it crosses: Switch or FullyConnected dimensions
  for the congestion-unaware backend (every pair of a dimension costs the same), one Switch
  dimension for the congestion-aware one (the up-link of x and the down-link to x are x's own,
  so folding NPUs folds links).
Otherwise every rank is simulated. Nothing here looks at expected results.
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from simcore.emulator.network.topology import Topology
from simcore.emulator.program import NodeType, RankProgram
from simcore.emulator.specs import CommGroupsSpec
from simcore.traces.chakra._keys import distinct
from simcore.traces.chakra.et import EtTrace

__all__ = ["representatives"]


@dataclass(frozen=True, eq=False)
class _View:
    """What symmetry needs of one rank: peer-blind columns, peers and communicator groups."""

    columns: list[NDArray[Any]]  # everything but the peers; group ids replaced later by sizes
    node_group: NDArray[np.int64]  # per node: communicator group id (0 = all NPUs / none)
    coll_groups: NDArray[np.int64]  # per collective node, in file order: its group id
    peers: NDArray[np.int64]  # per send/recv node, in file order: the peer NPU


def _group_table(names: Sequence[str]) -> NDArray[np.int64]:
    return np.array([int(p) if p.isdigit() else 0 for p in names] + [0], dtype=np.int64)


def _peer_column(types: NDArray[Any], src: NDArray[np.int64], dst: NDArray[np.int64]) -> NDArray[np.int64]:
    peer = np.where(types == NodeType.SEND, dst, np.where(types == NodeType.RECV, src, -1))
    return peer[(types == NodeType.SEND) | (types == NodeType.RECV)]


def _program_view(program: RankProgram) -> _View:
    node_group = _group_table(program.pg_names)[program.pg_codes]
    cols: list[NDArray[Any]] = [program.ids, program.types, program.duration_us, program.is_cpu_op,
                                program.parents_ptr, program.parents,
                                np.array([repr(program.involved_dim)], dtype=object)]
    cols += [program.ints[name] for name in sorted(program.ints) if name not in ("comm_src", "comm_dst")]
    return _View(cols, node_group, node_group[program.types == NodeType.COLL],
                 _peer_column(program.types, program.attr("comm_src"), program.attr("comm_dst")))


def _trace_view(trace: EtTrace) -> _View:
    """The same from a decoded ET file, without building a program (used for folded-away ranks)."""
    pg = trace.str_attr("pg_name")
    node_group = _group_table(pg.categories)[pg.codes]
    cols: list[NDArray[Any]] = [trace.ids, trace.types, trace.duration_micros, trace.data_ptr, trace.data_deps,
                                trace.ctrl_ptr, trace.ctrl_deps]
    for name in sorted(trace.ints):
        if name not in ("comm_src", "comm_dst"):
            cols += list(trace.ints[name])
    for name in sorted(trace.lists):
        cols += list(trace.lists[name])
    src = np.where(trace.int_attr("comm_src")[1], trace.int_attr("comm_src")[0], -1)
    dst = np.where(trace.int_attr("comm_dst")[1], trace.int_attr("comm_dst")[0], -1)
    return _View(cols, node_group, node_group[trace.types == NodeType.COLL], _peer_column(trace.types, src, dst))


def _views(programs: Sequence[RankProgram]) -> list[_View]:
    from simcore.emulator.load import LazyPrograms

    if isinstance(programs, LazyPrograms):
        return [_trace_view(t) for t in programs.traces]
    return [_program_view(p) for p in programs]


def _digest(cols: list[NDArray[Any]]) -> tuple[Any, ...]:
    """A bucketing key of a rank's peer-blind columns: dtypes, shapes and a CRC-32 of the content."""
    crc = 0
    for col in cols:
        data = repr(col.tolist()).encode() if col.dtype == object else np.ascontiguousarray(col).tobytes()
        crc = zlib.crc32(data, crc)
    return (crc, *((c.dtype.str, c.shape) for c in cols))


def _base_colors(views: list[_View], sizes: dict[int, int]) -> NDArray[np.int64]:
    """Colour = class of ranks whose peer-blind columns are equal.

    Ranks are bucketed by a hash of their columns (one pass, no pairwise comparison); each rank is
    then checked element by element against its bucket's first rank, so a hash collision can only
    split a class, never merge two.
    """
    table = np.full(max(max(sizes), max(int(v.node_group.max(initial=0)) for v in views)) + 1, -1, dtype=np.int64)
    for gid, size in sizes.items():
        table[gid] = size
    first: dict[tuple[Any, ...], tuple[int, list[NDArray[Any]]]] = {}
    color = np.zeros(len(views), dtype=np.int64)
    count = 0
    for r, view in enumerate(views):
        cols = [*view.columns, table[view.node_group]]
        key = _digest(cols)
        found = first.get(key)
        if found is not None and all(a.shape == b.shape and np.array_equal(a, b)
                                     for a, b in zip(cols, found[1], strict=True)):
            color[r] = found[0]
            continue
        if found is None:
            first[key] = (count, cols)
        color[r] = count
        count += 1
    return color


def _symmetric_network(topology: Topology, backend: str) -> bool:
    """Whether a message's cost depends only on the first dimension where its ends differ."""
    if backend == "unaware":  # Switch / FullyConnected: every pair of a dimension costs the same
        return all(kind in ("Switch", "FullyConnected") for kind in topology.kinds)
    return len(topology.kinds) == 1 and topology.kinds[0] == "Switch"


def _diff_dims(topology: Topology, a: NDArray[np.int64], b: NDArray[np.int64]) -> NDArray[np.int64]:
    """First dimension where ``a`` and ``b`` differ, element-wise (-1 where equal)."""
    out = np.full(np.broadcast(a, b).shape, -1, dtype=np.int64)
    for dim in reversed(range(len(topology.sizes))):
        stride, size = topology.strides[dim], topology.sizes[dim]
        out = np.where((a // stride) % size != (b // stride) % size, dim, out)
    return out


def _ids(keys: Sequence[bytes]) -> NDArray[np.int64]:
    """Dense colour ids in order of first appearance."""
    first: dict[bytes, int] = {}
    return np.array([first.setdefault(k, len(first)) for k in keys], dtype=np.int64)


def representatives(programs: Sequence[RankProgram], groups: CommGroupsSpec, topology: Topology,
                    backend: str) -> list[int]:
    """``rep[r]``: the rank that stands for rank ``r`` (itself if no safe folding exists).

    Colour refinement: a rank's colour is refined with, in program order, its send/recv peers'
    colours and the network dimension each such message crosses, and for each collective its
    group's colour (the members' colours in ring order) and the dimensions of its own ring edges
    (to the next and from the previous member). Each round hashes every rank once (no pairwise
    comparison). Folding needs every group to be either of one colour (its members fold onto one
    representative, whose ring messages then cost the real route) or of distinct colours (each
    member is simulated: e.g. the tied-embedding pair of the first and last pipeline stage).
    """
    n = len(programs)
    identity = list(range(n))
    if not _symmetric_network(topology, backend) or n < 2:
        return identity
    members = {gid: np.array(m, dtype=np.int64) for gid, m in groups.groups}
    members[0] = np.arange(n, dtype=np.int64)
    sizes = {gid: len(m) for gid, m in members.items()}
    views = _views(programs)
    gids = [v.coll_groups for v in views]
    if any(int(g) not in members for ids in gids for g in distinct(ids)):
        return identity  # an unknown group: the workload layer reports it
    peers = [v.peers for v in views]
    if any(((p < 0) | (p >= n)).any() for p in peers):
        return identity
    used = sorted({int(g) for ids in gids for g in distinct(ids)})
    ring = {g: np.sort(members[g]) for g in used}
    edge = {}  # group -> (dim to the next member, dim from the previous one) per ring position
    for g in used:
        m = ring[g]
        nxt, prv = _diff_dims(topology, m, np.roll(m, -1)), _diff_dims(topology, np.roll(m, 1), m)
        edge[g] = dict(zip(m.tolist(), (nxt * 64 + prv).tolist(), strict=True))
    peer_dims = [_diff_dims(topology, np.full_like(peers[r], r), peers[r]) for r in range(n)]
    own_edges = []
    for r in range(n):
        codes = np.zeros(len(gids[r]), dtype=np.int64)
        for g in distinct(gids[r]).tolist():
            if r not in edge[int(g)]:
                return identity  # a collective of a group the rank is not in: reported when run
            codes[gids[r] == g] = edge[int(g)][r]
        own_edges.append(codes)
    color = _base_colors(views, sizes)
    classes = int(color.max()) + 1
    while True:
        gcolor = {g: hashlib.blake2b(color[ring[g]].tobytes(), digest_size=8).digest() for g in used}
        gnum = np.zeros(max(members) + 1, dtype=np.int64)
        gnum[list(gcolor)] = _ids(list(gcolor.values()))  # group id -> colour sequence of its ring
        keys = []
        for r in range(n):
            h = hashlib.blake2b(int(color[r]).to_bytes(8, "little"), digest_size=16)
            h.update(color[peers[r]].tobytes())
            h.update(peer_dims[r].tobytes())
            h.update(gnum[gids[r]].tobytes())
            h.update(own_edges[r].tobytes())
            keys.append(h.digest())
        color = _ids(keys)
        if int(color.max()) + 1 == classes:
            break
        classes = int(color.max()) + 1
    for g in used:
        n_distinct = distinct(color[ring[g]]).size
        if n_distinct not in (1, ring[g].size):
            return identity
    first: dict[int, int] = {}
    return [first.setdefault(int(c), r) for r, c in enumerate(color)]
