"""Contract suite over every collective algorithm of the registry (simcore.network.collectives).

For each entry, each collective it implements, several rank counts and sizes:
- the closed form's wire bytes are the busiest rank's step bytes (an upper bound below the
  algorithm's ``closed_form_min_ranks``), and its steps are the lane length when every rank runs
  the same program;
- every message of the steps has its receiver (same size), and the closed form grows with size;
- the Chakra ET graph holds exactly the steps' messages: per rank, the sends, receives and
  reductions of its steps, every send matched by a receive;
- a collective it does not implement gives a reason, and asking for it an InputError.
Sizes are multiples of 480 so that every rank count here divides them (and their halves).
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from simcore.errors import InputError
from simcore.ir.graph import CommType
from simcore.network.collectives import (
    ASTRA_NAMES,
    REGISTRY,
    CollectiveAlgorithm,
    algorithm,
    astra_algorithm,
)
from simcore.network.collectives._base import AG, ET_KINDS, KINDS, Step, comm_size
from simcore.network.collectives.et_graphs import build_collective, et_algorithms
from simcore.network.collectives.nccl import traffic_factor
from simcore.specs.collective import CollectiveSpec
from simcore.traces.chakra.et import EtTrace, NodeType

RANKS = (2, 3, 4, 5, 8, 16)
SIZES = (480, 480 * 7, 480 << 10)
CASES = [(name, kind, n) for name, alg in REGISTRY.items() for kind in alg.kinds for n in RANKS
         if alg.supports(kind, n) is None]
ET_CASES = [(name, kind, n) for name, kind, n in CASES
            if kind in ET_KINDS and REGISTRY[name].et_supports(kind) is None and n <= 8]
UNSUPPORTED = [(name, kind) for name, alg in REGISTRY.items() for kind in KINDS if kind not in alg.kinds]


def _steps(alg: CollectiveAlgorithm, kind: str, n: int, full: int) -> list[list[Step]]:
    """The whole collective's steps of every rank (positions 0..n-1)."""
    return [alg.steps(kind, n, pos, comm_size(kind, n, full)) for pos in range(n)]


def _sent(steps: list[Step]) -> int:
    return sum(len(s.send_to) * s.nbytes for s in steps)


def _closed(alg: CollectiveAlgorithm, kind: str, n: int, full: int) -> tuple[float, float]:
    steps, wire = alg.phase(kind, n, full)
    return float(steps), float(wire)


@pytest.mark.parametrize(("name", "kind", "n"), CASES)
def test_closed_form_wire_bytes_are_the_busiest_ranks_step_bytes(name: str, kind: str, n: int) -> None:
    alg = REGISTRY[name]
    for full in SIZES:
        busiest = max(_sent(s) for s in _steps(alg, kind, n, full))
        _, wire = _closed(alg, kind, n, full)
        if n >= alg.closed_form_min_ranks:
            assert wire == busiest, (full, wire, busiest)
        else:
            assert busiest <= wire


@pytest.mark.parametrize(("name", "kind", "n"), CASES)
def test_closed_form_steps_are_the_lane_length_of_a_symmetric_program(name: str, kind: str, n: int) -> None:
    alg = REGISTRY[name]
    full = SIZES[1]
    size = comm_size(kind, n, full)
    programs = {(tuple(len(lane) for lane in alg.lanes(kind, n, pos, size)), _sent(alg.steps(kind, n, pos, size)))
                for pos in range(n)}
    if len(programs) > 1:
        pytest.skip("ranks run different programs (a tree, a chain): no per-rank step count")
    (lengths, _), = programs
    assert _closed(alg, kind, n, full)[0] == max(lengths)


@pytest.mark.parametrize(("name", "kind", "n"), CASES)
def test_every_message_has_its_receiver_in_every_chunk(name: str, kind: str, n: int) -> None:
    alg = REGISTRY[name]
    size = comm_size(kind, n, SIZES[1])
    for chunk in (0, 1):
        sends: Counter[tuple[int, int, int]] = Counter()
        recvs: Counter[tuple[int, int, int]] = Counter()
        for pos in range(n):
            for lane in alg.lanes(kind, n, pos, size, chunk):
                for s in lane:
                    sends.update((pos, peer, s.nbytes) for peer in s.send_to if peer < n)
                    recvs.update((peer, pos, s.nbytes) for peer in s.recv_from if peer < n)
        assert sends == recvs


@pytest.mark.parametrize(("name", "kind", "n"), CASES)
def test_closed_form_and_step_bytes_grow_with_size(name: str, kind: str, n: int) -> None:
    alg = REGISTRY[name]
    fulls = [480 * m for m in (1, 2, 5, 64, 1024)]
    steps, wire = alg.phase(kind, np.full(len(fulls), float(n)), np.array(fulls, dtype=float))
    assert np.all(np.diff(wire) >= 0) and wire[-1] > wire[0]
    assert np.all(steps == steps[0])  # the step count does not depend on the size
    for i, full in enumerate(fulls):  # the vectorized form is the scalar one
        assert (float(steps[i]), float(wire[i])) == _closed(alg, kind, n, full)
    busiest = [max(_sent(s) for s in _steps(alg, kind, n, full)) for full in fulls]
    assert busiest == sorted(busiest) and busiest[-1] > busiest[0]


def _nodes(trace: EtTrace, kind: int) -> list[tuple[int, int, int, int]]:
    sel = trace.types == kind
    cols = [trace.int_attr(k)[0][sel].tolist() for k in ("comm_src", "comm_dst", "comm_tag", "comm_size")]
    return list(zip(*cols, strict=True))


@pytest.mark.parametrize(("name", "kind", "n"), ET_CASES)
def test_et_graph_holds_exactly_the_steps(name: str, kind: str, n: int) -> None:
    alg = REGISTRY[name]
    size = comm_size(kind, n, SIZES[1])
    traces = build_collective(name, kind, n, size, reduce_micros=2)
    assert len(traces) == n
    all_sends: Counter[tuple[int, int, int, int]] = Counter()
    all_recvs: Counter[tuple[int, int, int, int]] = Counter()
    for pos, trace in enumerate(traces):
        steps = alg.steps(kind, n, pos, size)
        sends, recvs = _nodes(trace, NodeType.COMM_SEND_NODE), _nodes(trace, NodeType.COMM_RECV_NODE)
        assert Counter((d, b) for s, d, _, b in sends) == Counter(
            (p, st.nbytes) for st in steps for p in st.send_to)
        assert Counter((s, b) for s, d, _, b in recvs) == Counter(
            (p, st.nbytes) for st in steps for p in st.recv_from)
        assert {s for s, _, _, _ in sends} == ({pos} if sends else set())
        reductions = sum(len(st.recv_from) for st in steps if st.reduce)
        assert int((trace.types == NodeType.COMP_NODE).sum()) == reductions
        all_sends.update(sends)
        all_recvs.update(recvs)
    assert all_sends == all_recvs  # every send meets its receive (src, dst, tag, size)


@pytest.mark.parametrize(("name", "kind"), UNSUPPORTED)
def test_an_unimplemented_collective_gives_a_reason(name: str, kind: str) -> None:
    alg = REGISTRY[name]
    reason = alg.supports(kind)
    assert isinstance(reason, str) and reason
    with pytest.raises(InputError, match=name):
        alg.phase(kind, 4, 4096)
    with pytest.raises(InputError):
        alg.et_graph(kind, 4, 4096)


@pytest.mark.parametrize("name", list(REGISTRY))
def test_et_support_is_a_reason_or_a_graph(name: str) -> None:
    alg = REGISTRY[name]
    for kind in KINDS:
        reason = alg.et_supports(kind)
        if reason is None:
            assert name in et_algorithms()
            assert len(alg.et_graph(kind, 4, 480)) == 4
        else:
            assert isinstance(reason, str) and reason
            with pytest.raises(InputError):
                alg.et_graph(kind, 4, 480)


def test_rank_count_limits_are_reasons_then_input_errors() -> None:
    hd = REGISTRY["halvingDoubling"]
    assert hd.supports("all_reduce", 6) is not None and hd.supports("all_reduce", 8) is None
    with pytest.raises(InputError, match="power"):
        hd.lanes("all_reduce", 6, 0, 4800)
    with pytest.raises(InputError, match="power"):
        build_collective("halvingDoubling", "all_reduce", 6, 4800)


def test_names_resolve_and_match_what_the_configs_accept() -> None:
    assert all(algorithm(name) is alg for name, alg in REGISTRY.items())
    assert algorithm("auto") is REGISTRY["nccl"]
    with pytest.raises(InputError, match="one of"):
        algorithm("tacos")
    for astra in ASTRA_NAMES:
        alg = astra_algorithm(astra)
        assert astra in alg.astra_names
    with pytest.raises(InputError):
        astra_algorithm("tacos")
    # conf/collective accepts exactly the ASTRA-sim-native entries for what they implement
    for key in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all"):
        for name, alg in REGISTRY.items():
            if not alg.astra_names:
                continue
            if alg.supports(key) is None:
                assert getattr(CollectiveSpec(**{key: (name,)}), key) == (name,)  # type: ignore[arg-type]
            else:
                with pytest.raises(InputError):
                    CollectiveSpec(**{key: (name,)})  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", REGISTRY["nccl"].kinds)
def test_nccl_entry_wire_is_the_calibrated_models_traffic(kind: str) -> None:
    """The calibrated NCCL model's bandwidth term moves traffic_factor x D (nccl-tests bus bytes)."""
    ct = {"all_reduce": CommType.ALL_REDUCE, "reduce_scatter": CommType.REDUCE_SCATTER,
          AG: CommType.ALL_GATHER, "all_to_all": CommType.ALL_TO_ALL, "broadcast": CommType.BROADCAST,
          "reduce": CommType.REDUCE}[kind]
    n = np.array([1.0, 2.0, 3.0, 8.0, 64.0])
    _, wire = REGISTRY["nccl"].phase(kind, n, 4e6)
    assert np.array_equal(wire, traffic_factor(float(ct), n)[:, 0] * 4e6)
