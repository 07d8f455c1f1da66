"""The workload graph IR, shaped like a Chakra execution trace.

A graph holds the nodes of one or more ranks (Chakra's per-rank ET files merged into one DAG).
Each node has a kind (numbered as Chakra's ``NodeType``), the in-order *resources* it occupies
(a compute stream, a communication stream, a memory channel; a collective that all members
enter together occupies the communication stream of every member it stands for), data and
control dependencies, and numeric attributes the cost models read (``flops``, ``bytes``,
``comm_bytes``, ``comm_type``, ...). Node ids from the outside (e.g. Chakra ``uint64`` ids)
are mapped to dense indices 0..N-1.

The graph is stored as a struct of arrays (CSR for dependencies and resources) so that the
engine can schedule a batch of design points with numpy, and so that one graph can be cached
and shared by every design point with the same structure (DESIGN.md, "The vectorized engine").

Resource issue order is the order in which nodes are added to the builder: that is program
order on a GPU stream, as in the ASTRA-sim workload layer.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from enum import IntEnum
from functools import cached_property
from typing import Any

import numpy as np
from numpy.typing import NDArray

from simcore.errors import InputError
from simcore.ir.streams import Stream, StreamKind

__all__ = ["Graph", "GraphBuilder", "LazyGraph", "NodeKind", "CommType"]


class NodeKind(IntEnum):
    """Node types, numbered and named as Chakra's ``NodeType`` (reference §4.1); the one
    definition of the project (:mod:`simcore.traces.chakra.schema` re-exports it as ``NodeType``).

    The canonical names are the protobuf's (``COMP_NODE``, as ``chakra_jsonizer`` prints them);
    the short names (``COMPUTE``, ``SEND``, ``COLLECTIVE``, ...) are aliases of the same values.
    """

    INVALID_NODE = 0
    METADATA_NODE = 1
    MEM_LOAD_NODE = 2
    MEM_STORE_NODE = 3
    COMP_NODE = 4
    COMM_SEND_NODE = 5
    COMM_RECV_NODE = 6
    COMM_COLL_NODE = 7
    INVALID = 0
    METADATA = 1
    MEM_LOAD = 2
    MEM_STORE = 3
    COMPUTE = 4
    SEND = 5
    RECV = 6
    COLLECTIVE = 7


class CommType(IntEnum):
    """Collective types, numbered as Chakra's ``CollectiveCommType`` (reference §4.1)."""

    ALL_REDUCE = 0
    REDUCE = 1
    ALL_GATHER = 2
    GATHER = 3
    SCATTER = 4
    BROADCAST = 5
    ALL_TO_ALL = 6
    REDUCE_SCATTER = 7
    REDUCE_SCATTER_BLOCK = 8
    BARRIER = 9


@dataclass(frozen=True, eq=False)
class Graph:
    """An immutable workload DAG as a struct of arrays.

    Attributes:
        kind: (N,) int8, :class:`NodeKind` per node.
        rank: (N,) int32, the rank a node belongs to (-1 for a node shared by several ranks).
        dep_ptr: (N+1,) int64 CSR offsets into ``dep_idx``.
        dep_idx: (E,) int64 dense indices of the nodes each node waits for (data and control).
        res_ptr: (N+1,) int64 CSR offsets into ``res_idx``.
        res_idx: (R,) int64 resource ids each node occupies, in-order.
        resource_names: one name per resource id.
        streams: the typed :class:`~simcore.ir.streams.Stream` of each resource id (empty, or
            ``StreamKind.OTHER`` entries, for graphs whose streams are only named).
        names: one name per node.
        node_ids: (N,) int64 the caller's id for each node.
        attrs: numeric per-node attribute arrays, each of shape (N,).
    """

    kind: NDArray[np.int8]
    rank: NDArray[np.int32]
    dep_ptr: NDArray[np.int64]
    dep_idx: NDArray[np.int64]
    res_ptr: NDArray[np.int64]
    res_idx: NDArray[np.int64]
    resource_names: tuple[str, ...]
    names: tuple[str, ...]
    node_ids: NDArray[np.int64]
    attrs: Mapping[str, NDArray[np.float64]] = field(default_factory=dict)
    streams: tuple[Stream, ...] = ()

    @property
    def num_nodes(self) -> int:
        """Number of nodes N."""
        return int(self.kind.shape[0])

    @property
    def num_resources(self) -> int:
        """Number of in-order resources (streams)."""
        return len(self.resource_names)

    def stream(self, resource: int) -> Stream:
        """The typed stream of resource id ``resource`` (``StreamKind.OTHER`` if untyped)."""
        return self.streams[resource] if self.streams else Stream(StreamKind.OTHER)

    @cached_property
    def stream_kind(self) -> NDArray[np.int64]:
        """(R,) :class:`~simcore.ir.streams.StreamKind` of every resource."""
        return np.array([int(self.stream(r).kind) for r in range(self.num_resources)],
                        dtype=np.int64)

    @cached_property
    def stream_stage(self) -> NDArray[np.int64]:
        """(R,) stage owning every resource (a link: its sender; -1 if untyped)."""
        return np.array([self.stream(r).stage for r in range(self.num_resources)], dtype=np.int64)

    @cached_property
    def stream_peer(self) -> NDArray[np.int64]:
        """(R,) receiving stage of a pipeline link resource, else -1."""
        return np.array([self.stream(r).peer for r in range(self.num_resources)], dtype=np.int64)

    def deps_of(self, index: int) -> NDArray[np.int64]:
        """Dense indices of the nodes that node ``index`` waits for."""
        return self.dep_idx[self.dep_ptr[index] : self.dep_ptr[index + 1]]

    def resources_of(self, index: int) -> NDArray[np.int64]:
        """Resource ids node ``index`` occupies."""
        return self.res_idx[self.res_ptr[index] : self.res_ptr[index + 1]]

    def attr(self, name: str, default: float = 0.0) -> NDArray[np.float64]:
        """Per-node attribute ``name`` as an (N,) array (``default`` where never set)."""
        if name in self.attrs:
            return self.attrs[name]
        return np.full(self.num_nodes, default, dtype=np.float64)


class LazyGraph(Graph):
    """A :class:`Graph` built on first use by ``factory`` (e.g. when only a condensed form of
    it, :mod:`simcore.ir.runs`, is needed to schedule it and its nodes may never be read)."""

    def __init__(self, factory: Callable[[], Graph] | None = None, **graph_fields: Any) -> None:
        """``factory`` builds the graph on first use; without it, ``graph_fields`` are the
        :class:`Graph`'s (as ``dataclasses.replace`` passes them: a copy is a plain graph)."""
        if factory is None:
            Graph.__init__(self, **graph_fields)
        object.__setattr__(self, "_factory", factory)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "_factory":
            raise AttributeError(name)
        with _LAZY_LOCK:
            if "kind" not in self.__dict__:
                built = self._factory()
                for f in fields(Graph):
                    object.__setattr__(self, f.name, getattr(built, f.name))
        return object.__getattribute__(self, name)

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as the plain :class:`Graph` it builds (the factory may be a closure)."""
        return (Graph, tuple(getattr(self, f.name) for f in fields(Graph)))

    @property
    def materialized(self) -> bool:
        """Whether the nodes were built."""
        return "kind" in self.__dict__


_LAZY_LOCK = threading.RLock()


class GraphBuilder:
    """Accumulates nodes, then validates and freezes them into a :class:`Graph`.

    Example:
        >>> b = GraphBuilder()
        >>> a = b.add(NodeKind.COMPUTE, resources=["gpu0.compute"], flops=1e12)
        >>> c = b.add(NodeKind.COLLECTIVE, resources=["gpu0.comm"], deps=[a], comm_bytes=2**20)
        >>> g = b.build()
    """

    def __init__(self, source: str = "graph") -> None:
        self._source = source
        self._kinds: list[int] = []
        self._ranks: list[int] = []
        self._names: list[str] = []
        self._ids: list[int] = []
        self._deps: list[Sequence[int]] = []
        self._res: list[list[int]] = []
        self._resource_ids: dict[str, int] = {}
        self._stream_ids: dict[Stream, int] = {}
        self._streams: list[Stream] = []
        self._attrs: dict[str, dict[int, float]] = {}
        self._id_to_index: dict[int, int] = {}

    def __len__(self) -> int:
        return len(self._kinds)

    def resource(self, name: str | Stream) -> int:
        """Id of the resource called ``name``, or of the typed stream ``name`` (created on first
        use; a typed stream and its :attr:`Stream.name` are the same resource)."""
        if isinstance(name, Stream):
            rid = self._stream_ids.get(name)
            if rid is None:
                rid = self.resource(name.name)
                self._stream_ids[name] = rid
                self._streams[rid] = name
            return rid
        rid = self._resource_ids.get(name)
        if rid is None:
            rid = len(self._resource_ids)
            self._resource_ids[name] = rid
            self._streams.append(Stream(StreamKind.OTHER))
        return rid

    def add(
        self,
        kind: NodeKind | int,
        *,
        resources: Iterable[str | int | Stream] = (),
        deps: Sequence[int] = (),
        rank: int = -1,
        name: str = "",
        node_id: int | None = None,
        **attrs: float,
    ) -> int:
        """Add a node and return its id.

        Args:
            kind: the node's :class:`NodeKind`.
            resources: names, typed :class:`Stream` s (or ids from :meth:`resource`) of the
                in-order streams it occupies.
            deps: ids of the nodes it waits for (data and control alike). They may be added
                later; :meth:`build` checks that they exist.
            rank: the rank this node belongs to (-1 if it stands for several).
            name: a label for timelines and error messages.
            node_id: the caller's id (defaults to the insertion index); must be unique.
            **attrs: numeric attributes for the cost models.
        """
        index = len(self._kinds)
        nid = index if node_id is None else int(node_id)
        if nid in self._id_to_index:
            raise InputError(f"{self._source}: node id", nid, "node ids must be unique")
        self._id_to_index[nid] = index
        self._kinds.append(int(kind))
        self._ranks.append(rank)
        self._names.append(name)
        self._ids.append(nid)
        self._deps.append(deps)
        self._res.append([r if isinstance(r, int) else self.resource(r) for r in resources])
        for key, value in attrs.items():
            self._attrs.setdefault(key, {})[index] = float(value)
        return nid

    def build(self) -> Graph:
        """Validate (dependencies exist, no cycle) and freeze into a :class:`Graph`.

        Raises:
            InputError: a dependency names a missing node, or the dependencies form a cycle.
        """
        n = len(self._kinds)
        dep_ptr = np.zeros(n + 1, dtype=np.int64)
        flat: list[int] = []
        lookup = self._id_to_index
        for i, deps in enumerate(self._deps):
            for d in deps:
                j = lookup.get(int(d))
                if j is None:
                    raise InputError(
                        f"{self._source}: node {self._ids[i]} dependency",
                        int(d),
                        "every dependency must name a node of the same graph",
                    )
                flat.append(j)
            dep_ptr[i + 1] = len(flat)
        res_ptr = np.zeros(n + 1, dtype=np.int64)
        res_flat: list[int] = []
        for i, res in enumerate(self._res):
            res_flat.extend(res)
            res_ptr[i + 1] = len(res_flat)
        attrs: dict[str, NDArray[np.float64]] = {}
        for key, values in self._attrs.items():
            arr = np.zeros(n, dtype=np.float64)
            arr[np.fromiter(values.keys(), dtype=np.int64, count=len(values))] = np.fromiter(
                values.values(), dtype=np.float64, count=len(values)
            )
            attrs[key] = arr
        names = sorted(self._resource_ids, key=self._resource_ids.__getitem__)
        return Graph(
            kind=np.asarray(self._kinds, dtype=np.int8),
            rank=np.asarray(self._ranks, dtype=np.int32),
            dep_ptr=dep_ptr,
            dep_idx=np.asarray(flat, dtype=np.int64),
            res_ptr=res_ptr,
            res_idx=np.asarray(res_flat, dtype=np.int64),
            resource_names=tuple(names),
            names=tuple(self._names),
            node_ids=np.asarray(self._ids, dtype=np.int64),
            attrs=attrs,
            streams=tuple(self._streams),
        )
