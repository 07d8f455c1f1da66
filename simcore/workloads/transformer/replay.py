"""Passes recorded once per kind, then every pass of a stage issued at once with numpy.

Model: a pipeline stage's program (1F1B or interleaved; Narayanan et al. 2021) is a sequence
of passes, and passes of one *kind* (forward or backward of one virtual stage, reducing
gradients or not, with or without an op before it on the stage's compute stream) issue the
same ops on the same streams with the same dependencies. Only these ids move from pass to
pass: the send the pass issues, the send it waits for (both numbered by micro-batch:
:meth:`~simcore.workloads.transformer.generator._Generator.send_id`), the op before it on
the compute stream, and with ZeRO-3 the last layer ends of the passes before it (a layer's
parameter gather waits for the end of the layer one or two before it). Plans with TP
communication overlap (every GEMM and TP collective cut into pieces pipelined across the
compute and tp streams, Megatron-LM's ``tp_comm_overlap``)
or a context-parallel ring of KV blocks (Liu et al. 2023) issue dozens of ops per layer: GPT-3
175B at tp 8, pp 8 and 192 micro-batches issues ~600,000, one Python call each.

:class:`PassRecorder` stands in for the :class:`~simcore.ir.runs.RunBuilder` while the
generator's own code emits the first pass of each kind; :func:`replay` then issues all passes
of a stretch of the program in one :meth:`~simcore.ir.runs.RunBuilder.runs` call: row for row
the calls that emitting them one by one makes (same ops, order, dependencies, explicit ids and
stream creation order), so the condensed graph and everything evaluated from it are the same
(``tests/simcore/workloads/transformer/test_condensed.py`` compares both with the
node-by-node build, bit for bit).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from simcore.ir.runs import RunBuilder
from simcore.ir.streams import Stream

__all__ = ["MARKS", "PREV", "PassRecorder", "RecordedPass", "replay"]

IntArray = NDArray[np.int64]

#: the id a recorded pass sees for the op before it on the compute stream
PREV = -2
#: the ids a recorded pass sees for the layer ends before it (``MARKS[k - 1]``: the k-th last)
MARKS = (-3, -4)
_ROW0 = -(1 << 30)  # recorded op k answers the id _ROW0 - k
_LOCAL, _PREV, _RECV, _MARK = 0, 1, 2, 3  # what a recorded dependency names


@dataclass(frozen=True, eq=False)
class RecordedPass:
    """The ops of one pass, in issue order, with dependencies relative to the pass.

    Attributes:
        streams: (n,) stream of each op.
        unit, repeat, stage: (n,) each op's run unit, repeat count and ``stage`` attribute.
        dep_ptr: (n+1,) CSR offsets of each op's dependencies in ``dep_code``/``dep_op``.
        dep_code: what each dependency names: an op of the pass (``dep_op``), the op before
            the pass on the compute stream, or the send the pass waits for.
        dep_op: the op of the pass a dependency names, or k for the k-th last layer end
            before the pass (else 0).
        sends: (n,) the op is the pass's send (explicit id :attr:`send`).
        on_compute: (n,) the op is on the stage's compute stream.
        outputs: ops whose ids the pass's code returned (gradient reductions), in order.
        marks: ops that end a layer (the pass's layer-boundary marks), in order.
        micro_batch: the recorded pass's micro-batch.
        recv, send: the recorded pass's received and issued send ids (-1: none).
    """

    streams: tuple[Stream, ...]
    unit: IntArray
    repeat: IntArray
    stage: IntArray
    dep_ptr: IntArray
    dep_code: IntArray
    dep_op: IntArray
    sends: NDArray[np.bool_]
    on_compute: NDArray[np.bool_]
    outputs: IntArray
    marks: IntArray
    micro_batch: int
    recv: int
    send: int


class PassRecorder:
    """The part of :class:`~simcore.ir.runs.RunBuilder` a generator's pass code calls
    (``stream``, ``unit``, ``run``, ``node``), recording instead of building. Units are
    interned in the real builder (the pass's code creates them as it would); streams stay
    private until :func:`replay` creates them in issue order."""

    def __init__(self, rb: RunBuilder, micro_batch: int, recv: int | None, send: int) -> None:
        self._rb = rb
        self._micro_batch = micro_batch
        self._recv = -1 if recv is None else recv
        self._send = send
        self._stream_ids: dict[Stream, int] = {}
        self._streams: list[Stream] = []
        self._ops: list[tuple[int, int, int, int, tuple[int, ...], bool]] = []

    def stream(self, stream: Stream) -> int:
        """A private resource id for ``stream``."""
        rid = self._stream_ids.get(stream)
        if rid is None:
            rid = self._stream_ids[stream] = len(self._streams)
            self._streams.append(stream)
        return rid

    def unit(self, templates: Sequence[int]) -> int:
        """The real builder's unit id."""
        return self._rb.unit(templates)

    def run(self, res: int, unit: int, repeat: int, deps: Sequence[int], stage: int,
            node_id: int | None = None) -> int:
        """Record a run; returns the id later ops of the pass name it by."""
        if node_id is not None and node_id != self._send:
            raise RuntimeError(f"pass replay: explicit id {node_id} is not the pass's send")
        self._ops.append((res, unit, repeat, stage, tuple(deps), node_id is not None))
        return node_id if node_id is not None else _ROW0 - (len(self._ops) - 1)

    def node(self, resources: Sequence[int], template: int, deps: Sequence[int], stage: int,
             node_id: int | None = None) -> int:
        """Record a one-op run (a pass's ops each use one stream)."""
        if len(resources) != 1:
            raise RuntimeError("pass replay: an op on several streams")
        return self.run(resources[0], self._rb.single_unit(template), 1, deps, stage, node_id)

    def finish(self, compute: Stream, outputs: Sequence[int], marks: Sequence[int | None] = ()
               ) -> RecordedPass:
        """The recorded pass (``outputs``: the ids the pass's code returned; ``marks``: the
        emitter's layer-boundary marks after it, :data:`MARKS` for those before it)."""
        n = len(self._ops)
        ptr = np.zeros(n + 1, dtype=np.int64)
        codes: list[int] = []
        local: list[int] = []
        for k, (*_, deps, _) in enumerate(self._ops):
            for d in deps:
                if d <= _ROW0:
                    codes.append(_LOCAL)
                    local.append(_ROW0 - d)
                elif d == PREV:
                    codes.append(_PREV)
                    local.append(0)
                elif d == self._recv and d >= 0:
                    codes.append(_RECV)
                    local.append(0)
                elif d in MARKS:
                    codes.append(_MARK)
                    local.append(MARKS.index(d) + 1)
                else:
                    raise RuntimeError(f"pass replay: dependency {d} does not move with the pass")
            ptr[k + 1] = len(codes)
        own = [m for m in marks if m not in MARKS]
        if any(o > _ROW0 for o in outputs) or any(m is None or m > _ROW0 for m in own):
            raise RuntimeError("pass replay: a returned id or mark is not an op of the pass")
        col = list(zip(*self._ops, strict=True)) if n else [()] * 6
        streams = tuple(self._streams[r] for r in col[0])
        return RecordedPass(
            streams=streams, unit=np.asarray(col[1], dtype=np.int64),
            repeat=np.asarray(col[2], dtype=np.int64), stage=np.asarray(col[3], dtype=np.int64),
            dep_ptr=ptr, dep_code=np.asarray(codes, dtype=np.int64),
            dep_op=np.asarray(local, dtype=np.int64), sends=np.asarray(col[5], dtype=bool),
            on_compute=np.asarray([s == compute for s in streams], dtype=bool),
            outputs=np.asarray([_ROW0 - o for o in outputs], dtype=np.int64),
            marks=np.asarray([_ROW0 - m for m in own if m is not None], dtype=np.int64),
            micro_batch=self._micro_batch, recv=self._recv, send=self._send)


def replay(rb: RunBuilder, kinds: Sequence[RecordedPass], kind_of: IntArray,
           micro_batch: IntArray, id_step: int, last: int | None, marks: Sequence[int] = ()
           ) -> tuple[IntArray, IntArray, IntArray]:
    """Issue passes ``kind_of`` (kind of each pass, in program order) on ``rb``.

    Args:
        kinds: the recorded kinds.
        kind_of, micro_batch: (P,) each pass's kind and micro-batch.
        id_step: how far a send id moves per micro-batch (the virtual stage count).
        last: the compute stream's last op before the first pass (None: none).
        marks: the layer-boundary marks before the first pass (ids, in order).

    Returns:
        (every op's id, the ids of each pass's outputs in pass order, the ids of the passes'
        marks in order).
    """
    i64 = np.int64
    p_of, src, start = _per_pass([k.unit.size for k in kinds], kind_of)  # every op, in order
    total = int(src.size)
    shift = (micro_batch - np.asarray([k.micro_batch for k in kinds], dtype=i64)[kind_of]) \
        * id_step

    def cat(name: str) -> IntArray:
        return np.concatenate([getattr(k, name) for k in kinds])

    # streams, created in the order their first op is issued (as op-by-op emission does)
    table: dict[Stream, int] = {}
    kind_stream = np.asarray([table.setdefault(s, len(table)) for k in kinds for s in k.streams],
                             dtype=i64)
    row_stream = kind_stream[src]
    used, first = np.unique(row_stream, return_index=True)
    streams = list(table)
    real = np.zeros(len(streams), dtype=i64)
    for u in used[np.argsort(first)].tolist():
        real[u] = rb.stream(streams[u])
    # dependencies: the first of an op's as dep / dep_ref, the others as extra
    dep_count = np.concatenate([np.diff(k.dep_ptr) for k in kinds])
    dep_off = np.cumsum(dep_count) - dep_count  # each kind op's first entry in cat("dep_code")
    n_dep = dep_count[src]
    d_row = np.repeat(np.arange(total, dtype=i64), n_dep)
    d_pos = np.arange(d_row.size, dtype=i64) - (np.cumsum(n_dep) - n_dep)[d_row]
    d_entry = dep_off[src[d_row]] + d_pos
    code, dep_op = cat("dep_code")[d_entry], cat("dep_op")[d_entry]
    p = p_of[d_row]
    comp = cat("on_compute")[src]
    last_comp = np.maximum.accumulate(np.where(comp, np.arange(total, dtype=i64), -1))
    prev_ref = np.where(start > 0, last_comp[np.maximum(start - 1, 0)], -1)
    ref = np.where(code == _LOCAL, start[p] + dep_op, np.where(code == _PREV, prev_ref[p], -1))
    recv = np.asarray([k.recv for k in kinds], dtype=i64)[kind_of]
    if ((code == _PREV) & (ref < 0)).any() and last is None:
        raise RuntimeError("pass replay: a pass waits for an op before the first, and none is")
    ids_of = np.where(code == _RECV, recv[p] + shift[p],
                      np.where(code == _PREV, -1 if last is None else last, -1))
    # layer-boundary marks: those before the batch, then each pass's, in order
    m_pass, m_src, m_first = _per_pass([k.marks.size for k in kinds], kind_of)
    mark_rows = start[m_pass] + cat("marks")[m_src]
    is_mark = code == _MARK
    if is_mark.any():
        pre = np.asarray(marks, dtype=i64)
        g = len(pre) + m_first[p[is_mark]] - dep_op[is_mark]  # k-th last: index in pre + rows
        if (g < 0).any():
            raise RuntimeError("pass replay: a pass waits for a layer end before the first")
        inside = g >= len(pre)
        ref[np.flatnonzero(is_mark)[inside]] = mark_rows[g[inside] - len(pre)]
        ids_of[np.flatnonzero(is_mark)[~inside]] = pre[g[~inside]]
    head = d_pos == 0
    dep = np.full(total, -1, dtype=i64)
    dep_ref = np.full(total, -1, dtype=i64)
    dep[d_row[head]] = ids_of[head]
    dep_ref[d_row[head]] = ref[head]
    more = ~head
    extra = (d_row[more], ref[more], ids_of[more]) if more.any() else None
    send = np.asarray([k.send for k in kinds], dtype=i64)[kind_of]
    node_id = np.where(cat("sends")[src], send[p_of] + shift[p_of], -1)
    ids = rb.runs(real[row_stream], cat("unit")[src], cat("repeat")[src], dep, dep_ref, node_id,
                  cat("stage")[src], extra)
    o_pass, o_src, _ = _per_pass([k.outputs.size for k in kinds], kind_of)
    return ids, ids[start[o_pass] + cat("outputs")[o_src]], ids[mark_rows]


def _per_pass(per_kind: Sequence[int], kind_of: IntArray) -> tuple[IntArray, IntArray, IntArray]:
    """The items of every pass (``per_kind[k]`` for a pass of kind ``k``), in pass order:
    (each item's pass, its index in the kinds' items concatenated, each pass's first item)."""
    i64 = np.int64
    n_kind = np.asarray(per_kind, dtype=i64)
    count = n_kind[kind_of]
    first = np.cumsum(count) - count
    pass_of = np.repeat(np.arange(kind_of.size, dtype=i64), count)
    offset = (np.cumsum(n_kind) - n_kind)[kind_of]
    src = offset[pass_of] + np.arange(pass_of.size, dtype=i64) - first[pass_of]
    return pass_of, src, first
