"""``RunBuilder.build`` resolves dependencies: explicit ids, run ends, and names it rejects."""

from __future__ import annotations

import numpy as np
import pytest

from simcore.errors import InputError
from simcore.ir.runs import RunBuilder
from simcore.ir.streams import Stream


def _two_streams() -> tuple[RunBuilder, int, int, int]:
    b = RunBuilder(num_templates=2)
    return b, b.unit((0, 1)), b.stream(Stream.compute(0)), b.stream(Stream.compute(1))


def test_dependencies_on_run_ends_and_explicit_ids_become_segment_edges() -> None:
    b, u, s0, s1 = _two_streams()
    a = b.run(s0, u, repeat=2, deps=(), stage=0)  # nodes 0-3, ends at 3
    x = b.run(s0, u, repeat=1, deps=(), stage=0, node_id=None)  # nodes 4-5, same chain
    one = b.unit((1,))
    named = b.run(s1, one, repeat=1, deps=(a,), stage=1, node_id=10**9)  # node 6, id 1e9
    b.run(s0, u, repeat=1, deps=(named,), stage=0)  # waits for the named node: new chain
    cg = b.build()
    assert (a, x, named) == (3, 5, 10**9)
    assert cg.num_nodes == 9
    # chains: 0 = stream 0 head, 1 = stream 1 (waits for node 3), 2 = stream 0 after node 6
    np.testing.assert_array_equal(cg.chain_seg_ptr, [0, 2, 3, 4])
    np.testing.assert_array_equal(cg.seg_chain, [0, 0, 1, 2])
    # chain 1 waits for segment 0 (ends at node 3); chain 2 for node 5 (segment 1) and node 6
    np.testing.assert_array_equal(cg.pred_ptr, [0, 0, 1, 3])
    np.testing.assert_array_equal(cg.pred_seg, [0, 1, 2])


@pytest.mark.parametrize("dep", [2, 77, -5, 10**9 + 1])
def test_a_dependency_not_naming_a_run_end_is_rejected(dep: int) -> None:
    b, u, s0, s1 = _two_streams()
    b.run(s0, u, repeat=2, deps=(), stage=0)  # nodes 0-3: node 2 is inside the run
    b.run(s1, b.unit((1,)), repeat=1, deps=(), stage=1, node_id=10**9)
    b.run(s1, u, repeat=1, deps=(dep,), stage=1)
    with pytest.raises(InputError, match=rf"{dep}.*run's end"):
        b.build()
