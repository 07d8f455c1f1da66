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


def _graph_fields(b: RunBuilder) -> dict[str, object]:
    cg = b.build()
    out: dict[str, object] = {n: getattr(cg, n).tolist() for n in (
        "seg_chain", "seg_stage", "chain_seg_ptr", "pred_ptr", "pred_seg", "chain_stream",
        "chain_first_template", "resource_counts", "stage_other_counts")}
    out["seg_counts"] = cg.seg_counts.toarray().tolist()
    out["num_nodes"] = cg.num_nodes
    return out


@pytest.mark.parametrize("seed", range(20))
def test_runs_with_extra_dependencies_and_stages_is_the_sequence_of_run_calls(seed: int
                                                                                ) -> None:
    """``runs`` with several dependencies per run (``extra``) and a stage per run builds what
    one :meth:`RunBuilder.run` call per run builds: random runs on three streams."""
    rng = np.random.default_rng(seed)
    k = 30
    res = rng.integers(0, 3, k)
    unit_i = rng.integers(0, 2, k)
    rep = rng.integers(1, 4, k)
    stage = rng.integers(0, 3, k)
    named = rng.random(k) < 0.2
    nid = np.where(named, 10**6 + np.arange(k), -1)
    dep_ref = np.array([int(rng.integers(-1, i)) if i and rng.random() < 0.4 else -1
                        for i in range(k)])
    nid[(nid >= 0) & (rep > 1)] = -1
    unit_i[nid >= 0] = 1  # explicit ids name one-op runs
    rep[nid >= 0] = 1
    x_row = np.sort(rng.integers(1, k, 25))
    x_ref = np.array([int(rng.integers(-1, r)) for r in x_row])
    x_id = np.where(x_ref < 0, 10**6 + x_row - 1, -1)  # an explicit id of the run before
    x_id[(x_ref < 0) & (nid[np.maximum(x_row - 1, 0)] < 0)] = -1
    keep = (x_ref >= 0) | (x_id >= 0)
    x_row, x_ref, x_id = x_row[keep], x_ref[keep], x_id[keep]

    def make() -> tuple[RunBuilder, list[int], list[int]]:
        b = RunBuilder(num_templates=3)
        units = [b.unit((0, 1)), b.unit((2,))]
        streams = [b.stream(Stream.compute(i)) for i in range(3)]
        return b, units, streams

    b1, units, streams = make()
    ids: list[int] = []
    for i in range(k):
        deps = [ids[dep_ref[i]]] if dep_ref[i] >= 0 else []
        deps += [ids[r] if r >= 0 else int(x) for r, x, row in zip(x_ref, x_id, x_row,
                                                                     strict=True) if row == i]
        ids.append(b1.run(streams[res[i]], units[unit_i[i]], int(rep[i]), deps, int(stage[i]),
                          int(nid[i]) if nid[i] >= 0 else None))
    b2, units, streams = make()
    got = b2.runs(np.asarray(streams)[res], np.asarray(units)[unit_i], rep,
                  np.full(k, -1), dep_ref, nid, stage, (x_row, x_ref, x_id))
    assert got.tolist() == ids
    assert _graph_fields(b1) == _graph_fields(b2)
