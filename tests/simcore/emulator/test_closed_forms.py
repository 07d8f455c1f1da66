"""Closed-form checks of every native algorithm on every topology kind (reference §1.3-§1.4, §3, §5.1).

One collective per NPU, one chunk (preferred-dataset-splits 1), endpoint delay e, local-mem-bw M:
on 2 NPUs each algorithm is a short alpha-beta chain, and every algorithm's time grows with bytes.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from simcore.emulator.inputs import read_system
from simcore.emulator.run import simulate_astra
from simcore.emulator.specs import ALGORITHMS, NetworkDimSpec, NetworkSpec
from simcore.errors import InputError
from tests.simcore.emulator.test_system_golden import one_collective

DATA = Path(__file__).parents[2] / "data" / "astra"
E, M, L, BW = 10, 50.0, 500.0, 50.0
BPNS = BW * 2**30 / 1e9
HOPS = {"Ring": 1, "FullyConnected": 1, "Switch": 2}
AR, AG, RS, A2A = 0, 2, 7, 6


def _system(tmp_path: Path, algorithm: str) -> object:
    data = json.loads((DATA / "Ring_4chunks.json").read_text())
    data.update({"preferred-dataset-splits": 1, "endpoint-delay": E, "local-mem-bw": M,
                 "collective-optimization": "baseline"})
    for key in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all"):
        data[f"{key}-implementation"] = [algorithm]
    path = tmp_path / "sys.json"
    path.write_text(json.dumps(data))
    return read_system(path)


def _time(tmp_path: Path, algorithm: str, kind: str, npus: int, comm: int, size: int) -> int:
    network = NetworkSpec((NetworkDimSpec(kind, npus, BW, L),))
    results = simulate_astra(one_collective(npus, comm, size), _system(tmp_path, algorithm), network, "unaware",
                             fold=False)
    if algorithm != "doubleBinaryTree":  # a tree's root finishes before its leaves
        assert len({r.finish_ns for r in results}) == 1  # every NPU alike
    return max(r.finish_ns for r in results)


def _hop(kind: str, nbytes: int) -> int:
    return int(HOPS[kind] * L + nbytes / BPNS)


def _red(nbytes: int) -> int:
    return 3 * int(nbytes / (M * 1e9) * 1e9)


ALGOS = [a for a in ALGORITHMS if not a.startswith("one")]  # the registry's per-dimension algorithms


def _two_rank_closed_form(algorithm: str, comm: int, kind: str, d: int) -> int | None:
    """2 NPUs: ring/direct/HD are one exchange per step; DBT is reduce to the root, then broadcast."""
    if algorithm == "doubleBinaryTree":  # an all-reduce tree whatever the phase (as ASTRA-sim's)
        return 2 * _hop(kind, d) + 3 * E + _red(d)
    if algorithm == "halvingDoubling" and comm == A2A:
        return None
    return {
        AR: 2 * _hop(kind, d // 2) + 3 * E + _red(d // 2),
        RS: _hop(kind, d // 2) + 2 * E + _red(d // 2),
        AG: _hop(kind, d) + 2 * E,
        A2A: _hop(kind, d // 2) + 2 * E,
    }[comm]


@pytest.mark.parametrize("kind", ["Ring", "FullyConnected", "Switch"])
@pytest.mark.parametrize("algorithm", ALGOS)
@pytest.mark.parametrize("comm", [AR, RS, AG, A2A])
def test_two_ranks_alpha_beta(tmp_path: Path, algorithm: str, kind: str, comm: int) -> None:
    expected = _two_rank_closed_form(algorithm, comm, kind, 1 << 20)
    if expected is None:  # not implemented by this algorithm (nor by ASTRA-sim): a one-line input error
        with pytest.raises(InputError, match=algorithm):
            _time(tmp_path, algorithm, kind, 2, comm, 1 << 20)
        return
    assert _time(tmp_path, algorithm, kind, 2, comm, 1 << 20) == expected


@pytest.mark.parametrize("kind", ["Ring", "FullyConnected", "Switch"])
@pytest.mark.parametrize("algorithm", ALGOS)
def test_monotone_in_bytes(tmp_path: Path, algorithm: str, kind: str) -> None:
    comms = [AR, RS, AG] + ([A2A] if algorithm != "halvingDoubling" else [])
    for comm in comms:
        times = [_time(tmp_path, algorithm, kind, 8, comm, size) for size in (1 << 12, 1 << 16, 1 << 20, 1 << 24)]
        assert times == sorted(times) and times[0] < times[-1], (comm, times)


def test_ring_allreduce_matches_reference_closed_form(tmp_path: Path) -> None:
    """reference §5.1: T = C [2(n-1) floor(L + m/B) + (2(n-1)+1) e + (n-1) 3 floor(m/M)], m = S/C/n."""
    n, size = 8, 1 << 20
    m = size // n
    expected = 2 * (n - 1) * _hop("Ring", m) + (2 * (n - 1) + 1) * E + (n - 1) * _red(m)
    assert _time(tmp_path, "ring", "Ring", n, AR, size) == expected


def test_local_bw_aware_composes_rs_ar_ag(tmp_path: Path) -> None:
    """2-D all-reduce with localBWAware = RS(dim 0) -> AR(dim 1) -> AG(dim 0), phases back to back."""
    network = NetworkSpec((NetworkDimSpec("Ring", 4, BW, L), NetworkDimSpec("Switch", 2, BW, L)))
    system = dataclasses.replace(_system(tmp_path, "ring"), collective_optimization="localBWAware",  # type: ignore[type-var]
                                 all_reduce_implementation=("ring", "ring"))
    size = 1 << 20
    got = simulate_astra(one_collective(8, AR, size), system, network, "unaware", fold=False)[0].finish_ns
    rs = 3 * _hop("Ring", size // 4) + 4 * E + 3 * _red(size // 4)
    d1 = size // 4
    ar = 2 * _hop("Switch", d1 // 2) + 3 * E + _red(d1 // 2)
    ag = 3 * _hop("Ring", d1) + 4 * E
    assert got == rs + ar + ag
    baseline = dataclasses.replace(system, collective_optimization="baseline")
    got_base = simulate_astra(one_collective(8, AR, size), baseline, network, "unaware", fold=False)[0].finish_ns
    ar0 = 6 * _hop("Ring", size // 4) + 7 * E + 3 * _red(size // 4)
    assert got_base == ar0 + 2 * _hop("Switch", size // 2) + 3 * E + _red(size // 2)
