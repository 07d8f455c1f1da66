"""Pass recording refuses what replay cannot move from pass to pass (the build's equality with
the node-by-node generator is in test_condensed.py)."""

from __future__ import annotations

import numpy as np
import pytest

from simcore.ir.runs import RunBuilder
from simcore.ir.streams import Stream, StreamKind
from simcore.workloads.transformer.replay import PREV, PassRecorder, replay

SEND, RECV = (1 << 40) + 9, (1 << 40) + 5


def _recorder() -> tuple[RunBuilder, PassRecorder, int]:
    rb = RunBuilder(num_templates=3)
    rec = PassRecorder(rb, micro_batch=1, recv=RECV, send=SEND)
    return rb, rec, rec.stream(Stream.compute(0))


def test_a_dependency_that_does_not_move_with_the_pass_is_refused() -> None:
    _, rec, res = _recorder()
    rec.run(res, rec.unit((0,)), 1, (12345,), 0)
    with pytest.raises(RuntimeError, match="12345 does not move"):
        rec.finish(Stream.compute(0), [])


def test_an_explicit_id_other_than_the_pass_send_is_refused() -> None:
    _, rec, res = _recorder()
    with pytest.raises(RuntimeError, match="not the pass's send"):
        rec.run(res, rec.unit((0,)), 1, (), 0, node_id=SEND + 1)


def test_an_op_on_two_streams_is_refused() -> None:
    _, rec, res = _recorder()
    with pytest.raises(RuntimeError, match="several streams"):
        rec.node([res, rec.stream(Stream(StreamKind.TP, 0))], 1, (), 0)


def test_replay_moves_the_receive_send_and_previous_op_with_each_pass() -> None:
    """Two passes of one recorded kind: the second waits for its own micro-batch's receive,
    issues its own send and follows the first pass's last compute op."""
    rb, rec, comp = _recorder()
    tp = rec.stream(Stream(StreamKind.TP, 0))
    a = rec.run(comp, rec.unit((0,)), 1, (RECV,), 0)
    b = rec.run(tp, rec.unit((1,)), 1, (a, PREV), 0)
    c = rec.run(comp, rec.unit((0,)), 2, (b,), 0)
    rec.run(rec.stream(Stream.link(0, 1)), rec.unit((2,)), 1, (c,), 0, node_id=SEND)
    kind = rec.finish(Stream.compute(0), [b])
    first = rb.run(rb.stream(Stream.compute(0)), rb.unit((0,)), 1, (), 0)
    ids, outputs, marks = replay(rb, [kind], np.array([0, 0]), np.array([1, 4]), 3, first)
    assert ids.tolist()[3::4] == [SEND, SEND + 9]  # micro-batch 4: 3 x 3 ids further
    assert outputs.tolist() == [ids[1], ids[5]]
    assert marks.size == 0  # the recording marked no layer end
    link = rb.stream(Stream.link(1, 0))
    for recv in (RECV, RECV + 9):  # the sends the passes receive, from the next stage
        rb.run(link, rb.unit((2,)), 1, (), 1, node_id=recv)
    graph = rb.build()  # every dependency names a node
    assert graph.num_nodes == 1 + 2 * 5 + 2  # the repeat-2 run counts twice
