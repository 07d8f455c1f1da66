"""In-memory Chakra execution trace: one rank's ET file as a struct of arrays.

The layout mirrors ``et_def.proto`` (reference/astra-sim-and-chakra.md §4.1): per node an id,
a type, a name, start time and duration, data and control dependencies (CSR, by node id), the
``inputs``/``outputs`` IOInfo messages and a list of ``AttributeProto``. Attributes are kept in
*long form* (one row per attribute, in file order, with the oneof value kind and its raw wire
value), which is what lets the writer reproduce a file byte for byte; per-node columns with
presence masks (``num_ops``, ``comm_size``, ``pg_name``...) are derived from it on demand and
cached. Byte strings (names, string values, encoded lists, IOInfo) are :class:`Ragged` views into
one buffer, so reading a file copies no string.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from simcore.traces.chakra.schema import SCALAR_KINDS

__all__ = ["AttrTable", "EtBulk", "EtTrace", "Ragged", "StrColumn"]

@dataclass(frozen=True, eq=False)
class Ragged:
    """A sequence of byte strings: item ``i`` is ``buf[start[i]:end[i]]``."""

    buf: NDArray[np.uint8]
    start: NDArray[np.int64]
    end: NDArray[np.int64]

    def __len__(self) -> int:
        return int(self.start.shape[0])

    def item(self, i: int) -> bytes:
        """Item ``i`` as bytes."""
        return self.buf[self.start[i] : self.end[i]].tobytes()

    def text(self, i: int) -> str:
        """Item ``i`` decoded as UTF-8 (undecodable bytes replaced)."""
        return self.item(i).decode("utf-8", errors="replace")

    def take(self, rows: NDArray[np.int64]) -> Ragged:
        """The items at ``rows``, sharing the buffer."""
        return Ragged(self.buf, self.start[rows], self.end[rows])

    @staticmethod
    def from_items(items: list[bytes]) -> Ragged:
        """Pack a list of byte strings into one buffer."""
        lengths = np.fromiter((len(b) for b in items), dtype=np.int64, count=len(items))
        end = np.cumsum(lengths)
        blob = np.frombuffer(b"".join(items) + bytes(16), dtype=np.uint8)
        return Ragged(blob, end - lengths, end)


@dataclass(frozen=True, eq=False)
class StrColumn:
    """A per-node string attribute as categories: ``categories[codes[i]]``, -1 = absent."""

    codes: NDArray[np.int32]
    categories: tuple[str, ...]

    def value(self, i: int) -> str | None:
        """The value of node ``i`` (None if absent)."""
        c = int(self.codes[i])
        return None if c < 0 else self.categories[c]


@dataclass(frozen=True, eq=False)
class AttrTable:
    """``AttributeProto`` rows in long form, grouped by owner (node) in file order.

    Attributes:
        ptr: (N+1,) int64 CSR offsets: the attributes of owner ``i`` are rows ptr[i]:ptr[i+1].
        name: (A,) int32 code into ``names``.
        names: distinct attribute names.
        kind: (A,) int8 :class:`AttrKind` of the value (0 = no value set).
        value: (A,) uint64 raw wire value of a scalar (varint, or the bits of a fixed type).
        payload: (A,) bytes of a string/bytes value or of an encoded ``*List`` message.
        doc: doc_string per row, for the rare rows that carry one.
    """

    ptr: NDArray[np.int64]
    name: NDArray[np.int32]
    names: tuple[str, ...]
    kind: NDArray[np.int8]
    value: NDArray[np.uint64]
    payload: Ragged
    doc: dict[int, bytes] = field(default_factory=dict)

    @property
    def num_rows(self) -> int:
        """Number of attribute rows A."""
        return int(self.name.shape[0])

    def owner(self) -> NDArray[np.int64]:
        """(A,) owner index of each row."""
        n = self.ptr.shape[0] - 1
        return np.repeat(np.arange(n, dtype=np.int64), np.diff(self.ptr))

    def rows_named(self, name: str) -> NDArray[np.int64]:
        """Rows of attribute ``name`` (empty if no owner has it)."""
        if name not in self.names:
            return np.zeros(0, dtype=np.int64)
        return np.flatnonzero(self.name == self.names.index(name))


@dataclass(frozen=True, eq=False)
class EtBulk:
    """The parts of a trace that simulation does not need: loaded lazily from the cache."""

    metadata: AttrTable
    names: Ragged
    inputs: Ragged
    inputs_present: NDArray[np.bool_]
    outputs: Ragged
    outputs_present: NDArray[np.bool_]
    attrs: AttrTable


@dataclass(eq=False)
class EtTrace:
    """One Chakra ET file (one rank) as a struct of arrays; N nodes in file order.

    Attributes:
        path: the file it was read from ("" if built in memory).
        version: ``GlobalMetadata.version``.
        ids: (N,) uint64 node ids.
        types: (N,) int8 :class:`NodeType` values.
        start_time_micros, duration_micros: (N,) uint64.
        data_ptr, data_deps: CSR of data-dependency node ids (uint64), in file order.
        ctrl_ptr, ctrl_deps: CSR of control-dependency node ids (uint64).
        ints: every scalar numeric attribute (``num_ops``, ``tensor_size``, ``comm_type``,
            ``comm_size``, ``comm_priority``, ``comm_src``, ``comm_dst``, ``comm_tag``,
            ``is_cpu_op``, ...) as ((N,) int64 values, 0 where absent; (N,) bool presence).
        strs: every string attribute (``pg_name``, ...) as :class:`StrColumn`.
        lists: every numeric/bool list attribute (``involved_dim``, ...) as CSR
            ((N+1,) int64 ptr, values as float64; bool as 0/1); nodes without it have none.
        bulk: metadata attributes, names, IOInfo, attributes in long form (lazy; see
            :attr:`names`, :attr:`attrs`).
    """

    path: str
    version: str
    ids: NDArray[np.uint64]
    types: NDArray[np.int8]
    start_time_micros: NDArray[np.uint64]
    duration_micros: NDArray[np.uint64]
    data_ptr: NDArray[np.int64]
    data_deps: NDArray[np.uint64]
    ctrl_ptr: NDArray[np.int64]
    ctrl_deps: NDArray[np.uint64]
    ints: dict[str, tuple[NDArray[np.int64], NDArray[np.bool_]]]
    strs: dict[str, StrColumn]
    lists: dict[str, tuple[NDArray[np.int64], NDArray[np.float64]]]
    _bulk: EtBulk | Callable[[], EtBulk]
    _cache: dict[str, object] = field(default_factory=dict, repr=False)

    @property
    def num_nodes(self) -> int:
        """Number of nodes N."""
        return int(self.ids.shape[0])

    @property
    def bulk(self) -> EtBulk:
        """Metadata, names, IOInfo and long-form attributes (loaded on first use)."""
        if not isinstance(self._bulk, EtBulk):
            self._bulk = self._bulk()
        return self._bulk

    @property
    def attrs(self) -> AttrTable:
        """Node attributes in long form (file order)."""
        return self.bulk.attrs

    @property
    def metadata(self) -> AttrTable:
        """``GlobalMetadata.attr`` rows (a single owner)."""
        return self.bulk.metadata

    def name(self, i: int) -> str:
        """Name of node ``i``."""
        return self.bulk.names.text(i)

    def node_names(self) -> list[str]:
        """All node names (decoded on first use, then cached)."""
        got = self._cache.get("names")
        if got is None:
            rag = self.bulk.names
            got = [rag.text(i) for i in range(self.num_nodes)]
            self._cache["names"] = got
        return list(got)  # type: ignore[call-overload]

    @property
    def names(self) -> list[str]:
        """All node names (see :meth:`node_names`)."""
        return self.node_names()

    def int_attr(self, name: str, default: int = 0) -> tuple[NDArray[np.int64], NDArray[np.bool_]]:
        """Scalar attribute ``name`` as ((N,) int64 values, ``default`` where absent; presence)."""
        got = self.ints.get(name)
        if got is None:
            return np.full(self.num_nodes, default, np.int64), np.zeros(self.num_nodes, bool)
        values, present = got
        if default != 0:
            values = np.where(present, values, default)
        return values, present

    def float_attr(self, name: str, default: float = 0.0) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
        """Scalar numeric attribute ``name`` as ((N,) float64 values, (N,) presence)."""
        from simcore.traces.chakra.columns import scalar_as_float

        table = self.attrs
        rows = table.rows_named(name)
        rows = rows[np.isin(table.kind[rows], tuple(SCALAR_KINDS))]
        owner = table.owner()[rows]
        values = np.full(self.num_nodes, default, dtype=np.float64)
        present = np.zeros(self.num_nodes, dtype=bool)
        values[owner] = scalar_as_float(table.kind[rows], table.value[rows])
        present[owner] = True
        return values, present

    def str_attr(self, name: str) -> StrColumn:
        """String attribute ``name`` per node (all absent if no node has it)."""
        got = self.strs.get(name)
        return got if got is not None else StrColumn(np.full(self.num_nodes, -1, np.int32), ())

    def has_attr(self, name: str) -> NDArray[np.bool_]:
        """(N,) True where the node has attribute ``name`` (with or without a value)."""
        mask = np.zeros(self.num_nodes, dtype=bool)
        mask[self.attrs.owner()[self.attrs.rows_named(name)]] = True
        return mask

    def list_attr(self, name: str) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
        """Numeric/bool list attribute ``name`` as CSR (ptr (N+1,), values); empty if absent."""
        got = self.lists.get(name)
        if got is None:
            return np.zeros(self.num_nodes + 1, np.int64), np.zeros(0, np.float64)
        return got

    def index_of(self, node_ids: NDArray[np.uint64]) -> NDArray[np.int64]:
        """Dense index of each id (-1 where no node has it)."""
        order = self._cache.get("id_order")
        if order is None:
            order = np.argsort(self.ids, kind="stable")
            self._cache["id_order"] = order
        assert isinstance(order, np.ndarray)
        if self.num_nodes == 0:
            return np.full(node_ids.shape, -1, dtype=np.int64)
        sorted_ids = self.ids[order]
        k = np.minimum(np.searchsorted(sorted_ids, node_ids), self.num_nodes - 1)
        return np.where(sorted_ids[k] == node_ids, order[k], -1)

    def data_dep_index(self) -> NDArray[np.int64]:
        """(E,) dense indices of the data deps (same CSR ``data_ptr``)."""
        return self.index_of(self.data_deps)

    def ctrl_dep_index(self) -> NDArray[np.int64]:
        """(E,) dense indices of the control deps (same CSR ``ctrl_ptr``)."""
        return self.index_of(self.ctrl_deps)
