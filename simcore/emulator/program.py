"""One rank's workload as the ASTRA-sim workload layer sees it (reference §1.1, §4.1).

A :class:`RankProgram` is a struct of arrays over the nodes of one Chakra ET file: type,
duration, the attributes the workload and system layers read (``num_ops``, ``tensor_size``,
``comm_type``, ``comm_size``, ``comm_src``/``comm_dst``/``comm_tag``, ``comm_priority``,
``is_cpu_op``, ``pg_name``, ``involved_dim``) and the parents of every node: data *and* control
dependencies, as feeder_v3 waits for both (reference §4.1). A dependency on a node that is not in
the file, or a cycle, is an :class:`InputError` (ASTRA-sim would throw or hang).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from simcore.errors import InputError
from simcore.ir.dag import blocked
from simcore.ir.graph import NodeKind

__all__ = ["INT_ATTRS", "NodeType", "RankProgram", "check_acyclic"]


class NodeType:
    """Chakra ``NodeType`` numbers as plain ints for the event loop (values from
    :class:`simcore.ir.graph.NodeKind`, the one definition)."""

    INVALID = int(NodeKind.INVALID)
    METADATA = int(NodeKind.METADATA)
    MEM_LOAD = int(NodeKind.MEM_LOAD)
    MEM_STORE = int(NodeKind.MEM_STORE)
    COMP = int(NodeKind.COMPUTE)
    SEND = int(NodeKind.SEND)
    RECV = int(NodeKind.RECV)
    COLL = int(NodeKind.COLLECTIVE)


INT_ATTRS = ("num_ops", "tensor_size", "comm_type", "comm_size", "comm_src", "comm_dst", "comm_tag",
              "comm_priority")


@dataclass(frozen=True, eq=False)
class RankProgram:
    """Nodes of one rank; all arrays have one entry per node (index = position in the file).

    Integer attributes absent from a node hold -1 (``comm_src`` of a send defaults to the rank).
    ``parents_ptr``/``parents`` is the CSR list of parent *indices* (data and control deps).
    """

    source: str
    ids: NDArray[np.int64]
    types: NDArray[np.int8]
    duration_us: NDArray[np.int64]
    ints: Mapping[str, NDArray[np.int64]]
    is_cpu_op: NDArray[np.bool_]
    pg_codes: NDArray[np.int32]
    pg_names: tuple[str, ...]
    involved_dim: tuple[tuple[bool, ...] | None, ...]
    parents_ptr: NDArray[np.int64]
    parents: NDArray[np.int64]

    @property
    def num_nodes(self) -> int:
        """Number of nodes."""
        return int(self.ids.shape[0])

    def pg_name(self, i: int) -> str | None:
        """``pg_name`` of node ``i`` (None if absent)."""
        code = int(self.pg_codes[i])
        return None if code < 0 else self.pg_names[code]

    def attr(self, name: str) -> NDArray[np.int64]:
        """Integer attribute column ``name`` (-1 where absent)."""
        return self.ints[name]

    def children(self) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """CSR (ptr, idx) of child indices, children of a node in ascending index order."""
        n = self.num_nodes
        counts = np.diff(self.parents_ptr)
        child_of = np.repeat(np.arange(n, dtype=np.int64), counts)  # child index per edge
        order = np.lexsort((child_of, self.parents))
        ptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(self.parents, minlength=n), out=ptr[1:])
        return ptr, child_of[order]

    @staticmethod
    def from_records(records: Sequence[Mapping[str, Any]], source: str = "<memory>") -> RankProgram:
        """Build from dicts with keys id, type, duration_micros, data_deps, ctrl_deps, attrs."""
        n = len(records)
        ids = np.array([int(r["id"]) for r in records], dtype=np.int64)
        types = np.array([int(r.get("type", 0)) for r in records], dtype=np.int8)
        duration = np.array([int(r.get("duration_micros", 0)) for r in records], dtype=np.int64)
        ints = {name: np.full(n, -1, dtype=np.int64) for name in INT_ATTRS}
        cpu = np.zeros(n, dtype=np.bool_)
        pg: list[str | None] = [None] * n
        dims: list[tuple[bool, ...] | None] = [None] * n
        for i, rec in enumerate(records):
            for key, value in rec.get("attrs", {}).items():
                if key in ints:
                    ints[key][i] = int(value)
                elif key == "is_cpu_op":
                    cpu[i] = bool(value)
                elif key == "pg_name":
                    pg[i] = str(value)
                elif key == "involved_dim":
                    dims[i] = tuple(bool(v) for v in value)
        deps = [list(r.get("data_deps", ())) + list(r.get("ctrl_deps", ())) for r in records]
        return RankProgram.from_arrays(source, ids, types, duration, ints, cpu, tuple(pg), tuple(dims), deps)

    @staticmethod
    def from_arrays(
        source: str,
        ids: NDArray[np.int64],
        types: NDArray[np.int8],
        duration_us: NDArray[np.int64],
        ints: Mapping[str, NDArray[np.int64]],
        is_cpu_op: NDArray[np.bool_],
        pg_name: Sequence[str | None],
        involved_dim: tuple[tuple[bool, ...] | None, ...],
        dep_ids: Sequence[Sequence[int]],
    ) -> RankProgram:
        """Build from columns; ``dep_ids[i]`` are the parent node *ids* of node i (data + ctrl)."""
        index = {int(v): i for i, v in enumerate(ids.tolist())}
        if len(index) != len(ids):
            raise InputError(source, "node id", "node ids must be unique")
        ptr = np.zeros(len(ids) + 1, dtype=np.int64)
        flat: list[int] = []
        for i, parents in enumerate(dep_ids):
            seen = set()
            for pid in parents:
                j = index.get(int(pid))
                if j is None:
                    raise InputError(f"{source}:node {int(ids[i])}", int(pid), "depends on a node missing from the trace")
                if j not in seen:
                    seen.add(j)
                    flat.append(j)
            ptr[i + 1] = len(flat)
        names = tuple(sorted({p for p in pg_name if p is not None}))
        codes = np.array([-1 if p is None else names.index(p) for p in pg_name], dtype=np.int32)
        program = RankProgram(source, ids, types, duration_us, dict(ints), is_cpu_op, codes, names, involved_dim,
                              ptr, np.array(flat, dtype=np.int64))
        check_acyclic(program)
        return program


def check_acyclic(program: RankProgram) -> None:
    """Raise :class:`InputError` naming a node on or behind a dependency cycle (the one Kahn peel,
    :func:`simcore.ir.dag.blocked`)."""
    stuck_mask = blocked(program.parents_ptr, program.parents, program.num_nodes)
    if stuck_mask.any():
        stuck = int(np.flatnonzero(stuck_mask)[0])
        raise InputError(f"{program.source}:node {int(program.ids[stuck])}", "deps", "dependency cycle")
