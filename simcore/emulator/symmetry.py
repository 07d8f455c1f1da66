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
from simcore.traces.chakra.patch import PatchBatch, RankTraces

__all__ = ["representatives"]


@dataclass(eq=False)
class _Block:
    """Ranks with one program layout: what symmetry needs of them, one row per rank.

    A block is one rank, or a template and the files patched from it
    (:mod:`simcore.traces.chakra.patch`): they share every column but the peers and groups.
    """

    ranks: NDArray[np.int64]  # (m,)
    columns: list[NDArray[Any]]  # peer-blind columns, shared by the block's ranks
    pg_node: NDArray[np.int64]  # (k,) nodes that name a communicator group, ascending
    pg_gid: NDArray[np.int64]  # (m, k) that group's id per rank (0 = all NPUs or not a number)
    coll_col: NDArray[np.int64]  # (c,) per collective node in file order: column of pg_gid, -1 = none
    peers: NDArray[np.int64]  # (m, s) per send/recv node in file order: the peer NPU (-1 = none)

    def coll_groups(self) -> NDArray[np.int64]:
        """(m, c) group id of each collective node (0 where it names none)."""
        if self.pg_gid.shape[1] == 0:
            return np.zeros((self.ranks.shape[0], self.coll_col.shape[0]), dtype=np.int64)
        got = self.pg_gid[:, np.maximum(self.coll_col, 0)]
        return np.where(self.coll_col >= 0, got, 0)


def _gid(names: Sequence[str]) -> NDArray[np.int64]:
    """Group id of each communicator name (0 if it is not a number)."""
    return np.array([int(p) if p.isdigit() else 0 for p in names], dtype=np.int64)


def _peer_column(types: NDArray[Any], src: NDArray[np.int64], dst: NDArray[np.int64]) -> NDArray[np.int64]:
    peer = np.where(types == NodeType.SEND, dst, np.where(types == NodeType.RECV, src, -1))
    return peer[(types == NodeType.SEND) | (types == NodeType.RECV)]


def _block(rank: int, columns: list[NDArray[Any]], types: NDArray[Any], codes: NDArray[np.int32],
           names: Sequence[str], src: NDArray[np.int64], dst: NDArray[np.int64]) -> _Block:
    """The block of one rank from its per-node group-name codes (-1 = none) and peers."""
    pg_node = np.flatnonzero(codes >= 0)
    col = np.full(types.shape[0], -1, dtype=np.int64)
    col[pg_node] = np.arange(pg_node.shape[0])
    gid = _gid(names)[codes[pg_node]] if len(names) else np.zeros(0, dtype=np.int64)
    return _Block(np.array([rank], dtype=np.int64), columns, pg_node, gid[None, :],
                  col[types == NodeType.COLL], _peer_column(types, src, dst)[None, :])


def _program_block(rank: int, program: RankProgram) -> _Block:
    cols: list[NDArray[Any]] = [program.ids, program.types, program.duration_us, program.is_cpu_op,
                                program.parents_ptr, program.parents,
                                np.array([repr(program.involved_dim)], dtype=object)]
    cols += [program.ints[name] for name in sorted(program.ints) if name not in ("comm_src", "comm_dst")]
    return _block(rank, cols, program.types, program.pg_codes, program.pg_names,
                  program.attr("comm_src"), program.attr("comm_dst"))


def _trace_columns(trace: EtTrace) -> list[NDArray[Any]]:
    cols: list[NDArray[Any]] = [trace.ids, trace.types, trace.duration_micros, trace.data_ptr, trace.data_deps,
                                trace.ctrl_ptr, trace.ctrl_deps]
    for name in sorted(trace.ints):
        if name not in ("comm_src", "comm_dst"):
            cols += list(trace.ints[name])
    for name in sorted(trace.lists):
        cols += list(trace.lists[name])
    return cols


def _trace_block(rank: int, trace: EtTrace) -> _Block:
    """The same from a decoded ET file, without building a program."""
    pg = trace.str_attr("pg_name")
    src = np.where(trace.int_attr("comm_src")[1], trace.int_attr("comm_src")[0], -1)
    dst = np.where(trace.int_attr("comm_dst")[1], trace.int_attr("comm_dst")[0], -1)
    return _block(rank, _trace_columns(trace), trace.types, pg.codes, pg.categories, src, dst)


def _last_rows(owner: NDArray[np.int64]) -> NDArray[np.int64]:
    """Rows that are the last of their owner (rows in file order: owners non-decreasing)."""
    if owner.size == 0:
        return np.zeros(0, dtype=np.int64)
    return np.flatnonzero(np.append(owner[1:] != owner[:-1], True))


def _patched_block(batch: PatchBatch, columns: list[NDArray[Any]]) -> _Block:
    """The block of a template's patched files, from the patches (no trace is built)."""
    t = batch.template
    trace = t.trace
    n, m = trace.num_nodes, batch.ranks.shape[0]
    types = trace.types
    owner = t.str_owner.get("pg_name", np.zeros(0, dtype=np.int64))
    last = _last_rows(owner)  # a node naming its group twice keeps the last, as decoding does
    pg_node = owner[last]
    col = np.full(n, -1, dtype=np.int64)
    col[pg_node] = np.arange(pg_node.shape[0])
    gid = _gid(batch.categories)
    if last.size:
        codes, column = batch.strs["pg_name"]
        pg_gid = gid[codes[:, column[last]]]
    else:
        pg_gid = np.zeros((m, 0), dtype=np.int64)
    sr = (types == NodeType.SEND) | (types == NodeType.RECV)
    position = np.cumsum(sr) - 1  # node -> its index among the send/recv nodes
    src = np.where(trace.int_attr("comm_src")[1], trace.int_attr("comm_src")[0], -1)
    dst = np.where(trace.int_attr("comm_dst")[1], trace.int_attr("comm_dst")[0], -1)
    peers = np.repeat(_peer_column(types, src, dst)[None, :], m, axis=0)
    for name, kind in (("comm_src", NodeType.RECV), ("comm_dst", NodeType.SEND)):
        rows = _last_rows(t.int_owner[name])
        nodes = t.int_owner[name][rows]
        use = types[nodes] == kind
        peers[:, position[nodes[use]]] = batch.ints[name][:, rows[use]]
    return _Block(batch.ranks, columns, pg_node, pg_gid, col[types == NodeType.COLL], peers)


def _blocks(programs: Sequence[RankProgram]) -> list[_Block]:
    from simcore.emulator.load import LazyPrograms

    if not isinstance(programs, LazyPrograms):
        return [_program_block(r, p) for r, p in enumerate(programs)]
    traces = programs.traces
    if not isinstance(traces, RankTraces):
        return [_trace_block(r, t) for r, t in enumerate(traces)]
    out, patched = [], set()
    columns: dict[int, list[NDArray[Any]]] = {}
    for batch in traces.batches:
        t = batch.template
        cols = columns.get(id(t))
        if cols is None:
            cols = columns[id(t)] = _trace_columns(t.trace)
        out.append(_patched_block(batch, cols))
        patched.update(batch.ranks.tolist())
    out += [_trace_block(r, traces[r]) for r in range(len(traces)) if r not in patched]
    return out


def _digest(cols: list[NDArray[Any]]) -> tuple[Any, ...]:
    """A bucketing key of peer-blind columns: dtypes, shapes and a CRC-32 of the content."""
    crc = 0
    for col in cols:
        data = repr(col.tolist()).encode() if col.dtype == object else np.ascontiguousarray(col).tobytes()
        crc = zlib.crc32(data, crc)
    return (crc, *((c.dtype.str, c.shape) for c in cols))


def _layout_ids(blocks: list[_Block]) -> list[int]:
    """Per block, the class of its shared layout: equal peer-blind columns and group-naming nodes.

    Blocks are bucketed by a hash of their columns (one pass, no pairwise comparison); each is
    then checked element by element against its bucket's members, so a hash collision can only
    split a class, never merge two. Blocks patched from one template share its columns and are
    hashed once.
    """
    buckets: dict[tuple[Any, ...], list[tuple[int, list[NDArray[Any]]]]] = {}
    by_columns: dict[int, list[tuple[NDArray[np.int64], int]]] = {}
    out: list[int] = []
    count = 0
    for block in blocks:
        known = by_columns.setdefault(id(block.columns), [])
        found = next((c for nodes, c in known if np.array_equal(nodes, block.pg_node)), None)
        if found is None:
            cols = [*block.columns, block.pg_node]
            bucket = buckets.setdefault(_digest(cols), [])
            found = next((c for c, other in bucket if all(
                a is b or (a.shape == b.shape and np.array_equal(a, b)) for a, b in zip(cols, other, strict=True))),
                None)
            if found is None:
                found, count = count, count + 1
                bucket.append((found, cols))
            known.append((block.pg_node, found))
        out.append(found)
    return out


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


def _rows(matrix: NDArray[np.int64], ranks: NDArray[np.int64], into: list[bytes | None], extra: bytes = b"") -> None:
    """``into[rank]`` = that rank's row of ``matrix`` as bytes (prefixed by ``extra``)."""
    data = np.ascontiguousarray(matrix, dtype=np.int64)
    for r, row in zip(ranks.tolist(), data, strict=True):
        into[r] = extra + row.tobytes()


def _ids(keys: Sequence[bytes | None]) -> NDArray[np.int64]:
    """Dense colour ids in order of first appearance."""
    first: dict[bytes | None, int] = {}
    return np.array([first.setdefault(k, len(first)) for k in keys], dtype=np.int64)


def representatives(programs: Sequence[RankProgram], groups: CommGroupsSpec, topology: Topology,
                    backend: str) -> list[int]:
    """``rep[r]``: the rank that stands for rank ``r`` (itself if no safe folding exists).

    Colour refinement: a rank's colour is refined with, in program order, its send/recv peers'
    colours and the network dimension each such message crosses, and for each collective its
    group's colour (the members' colours in ring order) and the dimensions of its own ring edges
    (to the next and from the previous member). Each round keys every rank once by the bytes of
    that row (no pairwise comparison), computed for all ranks of one program layout at once.
    Folding needs every group to be either of one colour (its members fold onto one
    representative, whose ring messages then cost the real route) or of distinct colours (each
    member is simulated: e.g. the tied-embedding pair of the first and last pipeline stage).
    """
    n = len(programs)
    identity = list(range(n))
    if not _symmetric_network(topology, backend) or n < 2:
        return identity
    members = {gid: np.array(m, dtype=np.int64) for gid, m in groups.groups}
    members[0] = np.arange(n, dtype=np.int64)
    blocks = _blocks(programs)
    gids = [b.coll_groups() for b in blocks]
    used_ids = distinct(np.concatenate([g.reshape(-1) for g in gids] or [np.zeros(0, np.int64)]))
    if any(int(g) not in members for g in used_ids.tolist()):
        return identity  # an unknown group: the workload layer reports it
    if any(((b.peers < 0) | (b.peers >= n)).any() for b in blocks):
        return identity
    used = used_ids.tolist()
    ring = {g: np.sort(members[g]) for g in used}
    # (group, member) -> (dim to the next member) * 64 + (dim from the previous one), as a sorted table
    pair_keys, pair_codes = [], []
    for g in used:
        m = ring[g]
        nxt, prv = _diff_dims(topology, m, np.roll(m, -1)), _diff_dims(topology, np.roll(m, 1), m)
        pair_keys.append(g * n + m)
        pair_codes.append(nxt * 64 + prv)
    keys = np.concatenate(pair_keys or [np.zeros(0, np.int64)])
    order = np.argsort(keys, kind="stable")
    keys, codes = keys[order], np.concatenate(pair_codes or [np.zeros(0, np.int64)])[order]
    peer_dims, own_edges = [], []
    for b, g in zip(blocks, gids, strict=True):
        peer_dims.append(_diff_dims(topology, b.ranks[:, None], b.peers))
        want = g * n + b.ranks[:, None]
        at = np.minimum(np.searchsorted(keys, want), max(keys.shape[0] - 1, 0))
        if want.size and (keys.shape[0] == 0 or (keys[at] != want).any()):
            return identity  # a collective of a group the rank is not in: reported when run
        own_edges.append(codes[at] if want.size else np.zeros(want.shape, dtype=np.int64))
    # base colour: the shared layout, then the sizes of the groups each rank's nodes name
    size_of = {gid: len(m) for gid, m in members.items()}
    known = np.array(sorted(size_of), dtype=np.int64)
    known_size = np.array([size_of[g] for g in known.tolist()], dtype=np.int64)
    base: list[bytes | None] = [None] * n
    for b, layout in zip(blocks, _layout_ids(blocks), strict=True):
        at = np.minimum(np.searchsorted(known, b.pg_gid), known.shape[0] - 1)
        sizes = np.where(known[at] == b.pg_gid, known_size[at], -1)
        _rows(sizes, b.ranks, base, layout.to_bytes(8, "little", signed=True))
    color = _ids(base)
    classes = int(color.max()) + 1
    while True:
        gcolor = {g: hashlib.blake2b(color[ring[g]].tobytes(), digest_size=8).digest() for g in used}
        gnum = np.zeros(max(members) + 1, dtype=np.int64)
        gnum[list(gcolor)] = _ids(list(gcolor.values()))  # group id -> colour sequence of its ring
        rows: list[bytes | None] = [None] * n
        for b, g, pd, oe in zip(blocks, gids, peer_dims, own_edges, strict=True):
            matrix = np.concatenate([color[b.ranks][:, None], color[b.peers], pd, gnum[g], oe], axis=1)
            _rows(matrix, b.ranks, rows)
        color = _ids(rows)
        if int(color.max()) + 1 == classes:
            break
        classes = int(color.max()) + 1
    for g in used:
        n_distinct = distinct(color[ring[g]]).size
        if n_distinct not in (1, ring[g].size):
            return identity
    first: dict[int, int] = {}
    return [first.setdefault(int(c), r) for r, c in enumerate(color)]
