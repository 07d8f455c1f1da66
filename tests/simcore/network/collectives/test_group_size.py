"""NCCL all-reduce by group size and topology against the public nccl-tests logs.

Golden data: Echo's nccl-tests all-reduce on Azure ND A100 v4 (8 A100 per node, one 200 Gb/s
NIC per GPU), 2-128 GPUs (shared/validation/calibration/echo_nccl_a100/nccl_tests.csv; NetX-lab/
Echo, MIT). The checked-in A100 calibration (scripts/fit_collectives.py) must reproduce the
measured times of the sizes training uses and the shape of the curves: 2 GPUs slower than 8 in
bus bandwidth, inter-node bus bandwidth far below the sum of the NIC line rates, latency that
grows with the node count.
"""

from __future__ import annotations

import csv
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from simcore.hardware.batch import SystemBatch
from simcore.ir.graph import CommType
from simcore.network.collectives.nccl import collective_time_s
from simcore.specs.system import CalibrationSpec, SystemSpec, TopologyDimSpec
from tests.shared_paths import VALIDATION, needs_shared

ECHO = VALIDATION / "calibration" / "echo_nccl_a100" / "nccl_tests.csv"
CONF = Path(__file__).resolve().parents[4] / "conf" / "system" / "calibration"


def _calib() -> CalibrationSpec:
    return CalibrationSpec(**yaml.safe_load((CONF / "a100.yaml").read_text()))


def _time_s(n: int, per_node: int, size: float, ct: CommType = CommType.ALL_REDUCE,
            calib: CalibrationSpec | None = None) -> float:
    system = SystemSpec(num_gpus=max(n, per_node), gpus_per_node=per_node,
                        scaleup=TopologyDimSpec(bandwidth_GBps=300.0, latency_ns=700.0),
                        scaleout=TopologyDimSpec(bandwidth_GBps=25.0, latency_ns=2500.0),
                        calibration=calib or _calib())
    sb = SystemBatch.from_specs([system])
    return float(collective_time_s(sb, int(ct), size, n, min(n, per_node))[0, 0])


def _measured() -> dict[tuple[int, int], float]:
    with ECHO.open(newline="") as fh:
        return {(int(r["num_gpus"]), int(r["size_bytes"])): float(r["time_us"]) * 1e-6
                for r in csv.DictReader(fh) if r["in_place"] == "0"}


@needs_shared
@pytest.mark.parametrize("n", [2, 4, 8, 16, 32, 64, 128])
@pytest.mark.parametrize("mib", [64, 256, 1024])
def test_large_allreduce_within_15pct_of_nccl_tests(n: int, mib: int) -> None:
    size = mib * 2**20
    measured = _measured()[(n, size)]
    assert _time_s(n, min(n, 8), size) == pytest.approx(measured, rel=0.15)


@needs_shared
def test_group_size_and_node_count_shape() -> None:
    gib = float(2**30)
    busbw = {n: 2 * (n - 1) / n * gib / _time_s(n, min(n, 8), gib) / 1e9 for n in (2, 8, 16)}
    measured = {n: 2 * (n - 1) / n * gib / _measured()[(n, 2**30)] / 1e9 for n in (2, 8, 16)}
    # measured: 2 GPUs 206, 8 GPUs 231, 16 GPUs (2 nodes, 8 x 200 Gb/s) 124.5 GB/s
    assert busbw[2] < busbw[8] and measured[2] < measured[8]
    assert busbw[16] < 0.7 * busbw[8] and measured[16] < 0.7 * measured[8]
    # the latency-bound 1 MiB all-reduce grows with the node count (100 us on 2 nodes, 183 on 16)
    t = {n: _time_s(n, 8, 2**20) for n in (16, 128)}
    assert t[128] > t[16]
    assert _measured()[(128, 2**20)] > _measured()[(16, 2**20)]


def test_tree_only_for_allreduce_and_off_by_default() -> None:
    calib = replace(_calib(), scaleout_tree_level_latency_us=10.0)
    ring = replace(calib, scaleout_tree_level_latency_us=0.0)
    n, small = 1024, 64 * 1024.0
    # NCCL's tree: all-reduce latency grows with log2(nodes), the ring with nodes
    assert _time_s(n, 8, small, calib=calib) < _time_s(n, 8, small, calib=ring)
    # all-gather has only the ring: the tree level latency does not change it
    ag = CommType.ALL_GATHER
    assert _time_s(n, 8, small, ag, calib) == pytest.approx(_time_s(n, 8, small, ag, ring))
    # pair loss 0 (the default) keeps the old group-size-independent bandwidth
    flat = replace(ring, scaleup_pair_loss=0.0)
    big = float(2**30)
    bw2 = 2 * 0.5 * big / _time_s(2, 2, big, calib=flat)
    bw8 = 2 * 7 / 8 * big / _time_s(8, 8, big, calib=flat)
    assert bw2 == pytest.approx(bw8, rel=0.03)
