"""Turn Chakra ET traces (:mod:`simcore.traces.chakra.et`) into :class:`RankProgram`s.

Columns are taken as they are; integer attributes of any integer kind are accepted (as
feeder_v3 does, reference §4.1); parents are the union of data and control deps (feeder_v3
waits for both). A dependency on an id that no node of the same file has is an InputError.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import overload

import numpy as np

from simcore.emulator.program import INT_ATTRS, NodeType, RankProgram
from simcore.errors import InputError
from simcore.traces.chakra.et import EtTrace
from simcore.traces.chakra.patch import RankTraces, read_rank_traces

__all__ = ["LazyPrograms", "program_from_trace", "read_programs"]

# integer attributes the node type that reads them must not give negative (absent is -1 in a program)
# (a negative comm_size is refused with its bound when the trace is read)
_USED_BY = {"comm_src": NodeType.RECV, "comm_dst": NodeType.SEND, "comm_type": NodeType.COLL}
_RULES = {"comm_src": "must be an NPU id >= 0", "comm_dst": "must be an NPU id >= 0",
          "comm_type": "unsupported collective comm type"}


def _parents(trace: EtTrace) -> tuple[np.ndarray, np.ndarray]:
    """Parents CSR; a parent listed twice is kept twice (it is also its child's child twice)."""
    n = trace.num_nodes
    if trace.ctrl_deps.size == 0:
        parent = trace.data_dep_index().astype(np.int64)
        if (parent < 0).any():
            k = int(np.flatnonzero(parent < 0)[0])
            owner = int(np.searchsorted(trace.data_ptr, k, side="right") - 1)
            raise InputError(f"{trace.path}:node {int(trace.ids[owner])}", int(trace.data_deps[k]),
                             "depends on a node missing from the trace")
        return trace.data_ptr.astype(np.int64), parent
    child = np.concatenate([
        np.repeat(np.arange(n, dtype=np.int64), np.diff(trace.data_ptr)),
        np.repeat(np.arange(n, dtype=np.int64), np.diff(trace.ctrl_ptr)),
    ])
    parent = np.concatenate([trace.data_dep_index(), trace.ctrl_dep_index()]).astype(np.int64)
    if (parent < 0).any():
        k = int(np.flatnonzero(parent < 0)[0])
        dep_ids = np.concatenate([trace.data_deps, trace.ctrl_deps])
        raise InputError(f"{trace.path}:node {int(trace.ids[child[k]])}", int(dep_ids[k]),
                         "depends on a node missing from the trace")
    order = np.argsort(child, kind="stable")
    child, parent = child[order], parent[order]
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(child, minlength=n), out=ptr[1:])
    return ptr, parent


def program_from_trace(trace: EtTrace) -> RankProgram:
    """One rank's :class:`RankProgram` from its decoded ET file."""
    n = trace.num_nodes
    ints = {}
    for name in INT_ATTRS:
        values, present = trace.int_attr(name)
        ints[name] = np.where(present, values, -1).astype(np.int64)
        used = _USED_BY.get(name)
        if used is not None:  # -1 stands for "absent" from here on: a given negative value is named now
            bad = present & (values < 0) & (trace.types == used)
            if bad.any():
                k = int(np.flatnonzero(bad)[0])
                raise InputError(f"{trace.path}:node {int(trace.ids[k])}:{name}", int(values[k]), _RULES[name])
    cpu_values, cpu_present = trace.int_attr("is_cpu_op")
    pg = trace.str_attr("pg_name")
    ptr_dims, dims = trace.list_attr("involved_dim")
    involved: tuple[tuple[bool, ...] | None, ...]
    if dims.size:
        involved = tuple(
            tuple(bool(v) for v in dims[ptr_dims[i]:ptr_dims[i + 1]]) if ptr_dims[i + 1] > ptr_dims[i] else None
            for i in range(n)
        )
    else:
        involved = (None,) * n
    ptr, parents = _parents(trace)
    return RankProgram(
        trace.path, trace.ids.astype(np.int64), trace.types.astype(np.int8),
        trace.duration_micros.astype(np.int64), ints, (cpu_values != 0) & cpu_present, pg.codes.astype(np.int32),
        tuple(pg.categories), involved,
        ptr, parents,
    )


class LazyPrograms(Sequence[RankProgram]):
    """Per-rank programs built on first access from decoded traces (kept in ``traces``).

    A symmetry-folded run only ever builds the representatives' programs (and, for traces read
    by :func:`simcore.traces.chakra.patch.read_rank_traces`, their traces); the folding itself
    reads the traces' columns, or the patches of files alike (:mod:`simcore.emulator.symmetry`).
    """

    def __init__(self, traces: Sequence[EtTrace]) -> None:
        self.traces = traces if isinstance(traces, RankTraces) else list(traces)
        self._built: dict[int, RankProgram] = {}

    def __len__(self) -> int:
        return len(self.traces)

    @overload
    def __getitem__(self, index: int) -> RankProgram: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[RankProgram]: ...

    def __getitem__(self, index: int | slice) -> RankProgram | Sequence[RankProgram]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        i = index + len(self) if index < 0 else index
        program = self._built.get(i)
        if program is None:
            program = self._built[i] = program_from_trace(self.traces[i])
        return program


def read_programs(prefix: str | os.PathLike[str], num_ranks: int | None = None) -> LazyPrograms:
    """Read ``<prefix>.<rank>.et`` for every rank (gzip or plain); programs are built lazily.

    Files alike up to peers and communicator names are decoded once
    (:func:`simcore.traces.chakra.patch.read_rank_traces`)."""
    return LazyPrograms(read_rank_traces(prefix, num_ranks))
