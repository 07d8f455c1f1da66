"""Native collective algorithms as per-rank ET graphs: message counts, sizes, pairing, timing.

The timing check runs the graphs through a small dataflow executor written here (every node
starts when its deps are done; a send/recv pair completes at max(both ready) + alpha +
bytes/beta; COMP takes its duration) and compares with the closed forms of reference §1.4.
"""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import pytest

from simcore.errors import InputError
from simcore.network.collectives.et_graphs import build_collective, write_collective
from simcore.traces.chakra.et import EtTrace, NodeType, read_traces

S, R, C = NodeType.COMM_SEND_NODE, NodeType.COMM_RECV_NODE, NodeType.COMP_NODE
ALPHA, BETA = 1.0, 1000.0  # us, bytes/us


def _messages(traces: list[EtTrace], kind: int) -> Counter[tuple[int, int, int, int]]:
    out: Counter[tuple[int, int, int, int]] = Counter()
    for t in traces:
        sel = t.types == kind
        cols = [t.int_attr(k)[0][sel].tolist() for k in ("comm_src", "comm_dst", "comm_tag", "comm_size")]
        out.update(zip(*cols, strict=True))
    return out


def _simulate(traces: list[EtTrace]) -> float:
    """Finish time of the last node, for a contention-free alpha-beta network."""
    done: dict[tuple[int, int], float] = {}
    ready_at: dict[tuple[int, int], float] = {}
    pending = {(r, i) for r, t in enumerate(traces) for i in range(t.num_nodes)}
    posted: dict[tuple[int, int, int, str], list[tuple[int, int]]] = {}
    while pending:
        progress = False
        for r, i in sorted(pending):
            t = traces[r]
            deps = t.data_dep_index()[t.data_ptr[i] : t.data_ptr[i + 1]]
            if any((r, int(d)) not in done for d in deps):
                continue
            start = max([done[(r, int(d))] for d in deps], default=0.0)
            kind = int(t.types[i])
            if kind == C:
                done[(r, i)] = start + float(t.duration_micros[i])
                pending.discard((r, i))
                progress = True
                continue
            if (r, i) in ready_at:
                continue
            ready_at[(r, i)] = start
            src, dst, tag = (int(t.int_attr(k)[0][i]) for k in ("comm_src", "comm_dst", "comm_tag"))
            me, other = ("s", "r") if kind == S else ("r", "s")
            key = (src, dst, tag, other)
            if posted.get(key):
                peer = posted[key].pop(0)
                size = int(t.int_attr("comm_size")[0][i])
                end = max(start, ready_at[peer]) + ALPHA + size / BETA
                done[(r, i)] = done[peer] = end
                pending.discard((r, i))
                pending.discard(peer)
            else:
                posted.setdefault((src, dst, tag, me), []).append((r, i))
            progress = True
        if not progress:
            raise AssertionError(f"deadlock: {sorted(pending)[:4]}")
    return max(done.values())


@pytest.mark.parametrize("n", [2, 4, 8])
def test_ring_all_reduce(n: int) -> None:
    size = 1 << 20
    traces = build_collective("ring", "all_reduce", n, size)
    sends = _messages(traces, S)
    assert sends == _messages(traces, R)  # every send has its receive
    assert sum(sends.values()) == n * 2 * (n - 1)
    assert {m[3] for m in sends} == {size // n}
    assert all(m[1] == (m[0] + 1) % n for m in sends)
    assert sum(int((t.types == C).sum()) for t in traces) == n * (n - 1)
    assert _simulate(traces) == pytest.approx(2 * (n - 1) * (ALPHA + size / n / BETA))


def test_ring_reduce_scatter_and_all_gather_sizes() -> None:
    size, n = 1 << 20, 4
    rs = build_collective("ring", "reduce_scatter", n, size)
    assert {m[3] for m in _messages(rs, S)} == {size // n}
    assert _simulate(rs) == pytest.approx((n - 1) * (ALPHA + size / n / BETA))
    ag = build_collective("ring", "all_gather", n, size)  # comm_size = per-rank input (§1.4)
    assert {m[3] for m in _messages(ag, S)} == {size}
    assert _simulate(ag) == pytest.approx((n - 1) * (ALPHA + size / BETA))


def test_direct_all_reduce_runs_both_phases_in_parallel() -> None:
    size, n = 1 << 20, 4
    traces = build_collective("direct", "all_reduce", n, size, reduce_micros=3)
    sends = _messages(traces, S)
    assert sends == _messages(traces, R)
    assert sum(sends.values()) == 2 * n * (n - 1)
    # contention-free: one message time per phase, plus one reduction between them
    assert _simulate(traces) == pytest.approx(2 * (ALPHA + size / n / BETA) + 3)


@pytest.mark.parametrize("n", [2, 4, 8])
def test_halving_doubling_all_reduce(n: int) -> None:
    size = 1 << 20
    traces = build_collective("halvingDoubling", "all_reduce", n, size)
    sends = _messages(traces, S)
    assert sends == _messages(traces, R)
    steps = int(math.log2(n))
    sizes = sorted({m[3] for m in sends}, reverse=True)
    assert sizes == [size >> (k + 1) for k in range(steps)]
    expect = 2 * sum(ALPHA + (size >> (k + 1)) / BETA for k in range(steps))
    assert _simulate(traces) == pytest.approx(expect)


@pytest.mark.parametrize("n", [3, 7, 8])
def test_double_binary_tree_all_reduce(n: int) -> None:
    size = 6 * 8 * 1024
    traces = build_collective("doubleBinaryTree", "all_reduce", n, size)
    sends = _messages(traces, S)
    assert sends == _messages(traces, R)
    assert sum(sends.values()) == 2 * 2 * (n - 1)  # two trees, each edge up and down
    assert {m[3] for m in sends} == {size // 2}
    depth = math.floor(math.log2(n))  # heap-ordered binary tree
    assert _simulate(traces) == pytest.approx(2 * depth * (ALPHA + size / 2 / BETA))


def test_files_round_trip_and_bad_requests(tmp_path: Path) -> None:
    traces = build_collective("ring", "all_reduce", 4, 4096)
    write_collective(tmp_path / "ring", traces)
    back = read_traces(tmp_path / "ring")
    assert [b.ids.tolist() for b in back] == [t.ids.tolist() for t in traces]
    assert _simulate(back) == pytest.approx(_simulate(traces))
    with pytest.raises(InputError, match="power of two"):
        build_collective("halvingDoubling", "all_reduce", 6, 1200)
    with pytest.raises(InputError, match="one of"):
        build_collective("tacos", "all_reduce", 4, 4096)
    with pytest.raises(InputError, match="multiple"):
        build_collective("ring", "all_reduce", 4, 1001)
