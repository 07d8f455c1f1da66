"""Workload graph (:class:`simcore.ir.graph.Graph`) -> one Chakra ET per rank.

A node belongs to the file of its ``rank`` (>= 0); its kind is the Chakra ``NodeType``
(:class:`NodeKind` is numbered the same). The numeric node attributes of the graph are mapped
to the attributes ASTRA-sim's feeders read, typed as in reference/astra-sim-and-chakra.md §4.1:

=================  =============================================================
graph attr          ET
=================  =============================================================
``duration_us``     ``duration_micros`` (rounded; or pass ``durations_us``)
``flops``           ``num_ops`` (COMP, roofline)
``bytes``           ``tensor_size`` (COMP, MEM_LOAD/STORE)
``comm_type``       ``comm_type`` (COMM_COLL, a :class:`CommType`)
``comm_bytes``      ``comm_size`` (COMM_COLL / SEND / RECV)
``group``           ``pg_name`` = str(group) (COMM_COLL; 0 or absent = all ranks)
``peer``            ``comm_dst`` (SEND) / ``comm_src`` (RECV)
``tag``             ``comm_tag`` (SEND / RECV; default 0)
``priority``        ``comm_priority``
=================  =============================================================
Every compute and communication node gets ``is_cpu_op = false`` (the feeders' default for it
differed by version, bug #172). A dependency must name a node of the same rank: ranks talk only through
SEND/RECV pairs. Node ids are the graph's ``node_ids``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from simcore.errors import InputError
from simcore.ir.graph import Graph, NodeKind
from simcore.traces.chakra.build import AttrValue, EtTraceBuilder
from simcore.traces.chakra.encode import encode_trace
from simcore.traces.chakra.et import check_prefix
from simcore.traces.chakra.trace import EtTrace

__all__ = ["graph_to_traces", "write_comm_groups", "write_files", "write_traces"]

_COMM = (NodeKind.COLLECTIVE, NodeKind.SEND, NodeKind.RECV)


def _attrs(graph: Graph, i: int, kind: int) -> dict[str, AttrValue]:
    def has(name: str) -> bool:
        return name in graph.attrs

    def val(name: str) -> int:
        return int(round(float(graph.attrs[name][i])))

    out: dict[str, AttrValue] = {}
    if kind in _COMM or kind == NodeKind.COMPUTE:
        out["is_cpu_op"] = False  # a GPU kernel / GPU communication, whatever the feeder default
    if kind == NodeKind.COMPUTE:
        if has("flops"):
            out["num_ops"] = val("flops")
        if has("bytes"):
            out["tensor_size"] = val("bytes")
    elif kind in (NodeKind.MEM_LOAD, NodeKind.MEM_STORE) and has("bytes"):
        out["tensor_size"] = val("bytes")
    elif kind == NodeKind.COLLECTIVE:
        out["comm_type"] = val("comm_type") if has("comm_type") else 0
        out["comm_size"] = val("comm_bytes") if has("comm_bytes") else 0
        if has("group") and val("group") > 0:
            out["pg_name"] = str(val("group"))
        if has("priority"):
            out["comm_priority"] = val("priority")
    elif kind in (NodeKind.SEND, NodeKind.RECV):
        out["comm_size"] = val("comm_bytes") if has("comm_bytes") else 0
        if not has("peer"):
            raise InputError(f"graph node {int(graph.node_ids[i])}.peer", None,
                             "a SEND/RECV node needs a peer rank")
        out["comm_dst" if kind == NodeKind.SEND else "comm_src"] = val("peer")
        out["comm_tag"] = val("tag") if has("tag") else 0
    return out


def graph_to_traces(
    graph: Graph, num_ranks: int | None = None, durations_us: NDArray[np.float64] | None = None
) -> list[EtTrace]:
    """One :class:`EtTrace` per rank 0..R-1 (R = ``num_ranks`` or max rank + 1).

    Raises:
        InputError: a node without a rank, a rank >= R, a cross-rank dependency, a SEND/RECV
            without a peer.
    """
    n = graph.num_nodes
    if n and int(graph.rank.min()) < 0:
        k = int(np.argmin(graph.rank))
        raise InputError(f"graph node {int(graph.node_ids[k])}.rank", -1,
                         "every node must belong to one rank to be exported")
    ranks = num_ranks if num_ranks is not None else (int(graph.rank.max()) + 1 if n else 0)
    if n and int(graph.rank.max()) >= ranks:
        raise InputError("num_ranks", ranks, f"graph has rank {int(graph.rank.max())}")
    dur = durations_us if durations_us is not None else graph.attr("duration_us")
    builders = [EtTraceBuilder() for _ in range(ranks)]
    for i in range(n):
        r, kind = int(graph.rank[i]), int(graph.kind[i])
        deps = graph.deps_of(i)
        other = deps[graph.rank[deps] != r]
        if other.size:
            raise InputError(f"graph node {int(graph.node_ids[i])} (rank {r})",
                             int(graph.node_ids[other[0]]),
                             "depends on a node of another rank: use a SEND/RECV pair")
        micros = int(round(float(dur[i]))) if kind == NodeKind.COMPUTE else 0
        builders[r].add_node(int(graph.node_ids[i]), graph.names[i], kind,
                             data_deps=graph.node_ids[deps].tolist(), duration_micros=micros,
                             attrs=_attrs(graph, i, kind))
    return [b.build(path=f"rank {r}") for r, b in enumerate(builders)]


def write_traces(prefix: str | Path, traces: Sequence[EtTrace]) -> list[Path]:
    """Write ``<prefix>.<rank>.et`` for each trace (creating the folder; :func:`check_prefix`)."""
    check_prefix(prefix)
    paths = []
    for r, t in enumerate(traces):
        p = Path(f"{prefix}.{r}.et")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(encode_trace(t))
        paths.append(p)
    return paths


def write_files(prefix: str | Path, files: Iterable[tuple[int, bytes]]) -> list[Path]:
    """Write ``<prefix>.<rank>.et`` for each (rank, encoded trace) (creating the folder;
    :func:`check_prefix`)."""
    check_prefix(prefix)
    Path(f"{prefix}.0.et").parent.mkdir(parents=True, exist_ok=True)
    paths = []
    for r, data in files:
        p = Path(f"{prefix}.{r}.et")
        p.write_bytes(data)
        paths.append(p)
    return paths


def write_comm_groups(path: str | Path, groups: Mapping[int, Sequence[int]]) -> Path:
    """ASTRA-sim's communicator-group JSON ``{"<id>": [npus...]}`` (reference §2.4, ids > 0)."""
    bad = [g for g in groups if int(g) <= 0]
    if bad:
        raise InputError("comm group id", bad[0], "group ids must be > 0")
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({str(g): [int(x) for x in m] for g, m in sorted(groups.items())}))
    return out
