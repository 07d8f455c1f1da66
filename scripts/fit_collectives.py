"""Fit the NCCL collective parameters on public nccl-tests measurements (A100, 2 to 128 GPUs).

Data (shared/validation/calibration/, copied unchanged with their licences):

* ``echo_nccl_a100/nccl_tests.csv``: nccl-tests all-reduce on Azure ND A100 v4 (8 A100 per
  node on NVSwitch, one 200 Gb/s InfiniBand NIC per GPU), 2-8 GPUs in one node and 2-16 nodes
  (NetX-lab/Echo ``nccl-test-log/``; Feng et al., arXiv 2412.12487). Out-of-place rows, sizes
  1 MiB to 4 GiB in powers of four.
* ``vtrain_single/a100_allreduce_lut/AR_GPU{2,4,8}_*``: all-reduce on one DGX A100 node
  (VIA-Research/vTrain; Bang et al., MICRO 2024), sizes 1 MiB to 1 GiB in powers of four.

Fitted jointly by least squares in log time (scipy), with the model of
``simcore/network/collectives/nccl.py``: ``scaleup_efficiency``, ``scaleup_pair_loss`` (2-GPU
groups), ``collective_base_latency_us``, ``collective_step_latency_us``,
``scaleout_ring_efficiency`` (the share of the per-NIC rate, ``scaleout_efficiency`` = CX6
23.5 / 25 GB/s, NCCL's cross-node rings reach with 8 NICs per node) and
``scaleout_tree_level_latency_us`` (inter-node latency per tree level).
"""

from __future__ import annotations

import csv
from dataclasses import replace
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares

from simcore.hardware.batch import SystemBatch
from simcore.network.collectives.nccl import collective_time_s
from simcore.specs.system import AcceleratorSpec, CalibrationSpec, SystemSpec, TopologyDimSpec

CALIBRATION_DATA = Path(__file__).resolve().parents[2] / "shared" / "validation" / "calibration"
ECHO = CALIBRATION_DATA / "echo_nccl_a100" / "nccl_tests.csv"
VTRAIN_LUT = CALIBRATION_DATA / "vtrain_single" / "a100_allreduce_lut"
FITTED = ("scaleup_efficiency", "scaleup_pair_loss", "collective_base_latency_us",
          "collective_step_latency_us", "scaleout_ring_efficiency",
          "scaleout_tree_level_latency_us")
_SIZES = tuple(4**i for i in range(10, 17))  # 1 MiB .. 4 GiB (the sizes training buckets use)


def load_points() -> list[tuple[int, int, float, float]]:
    """(GPUs, GPUs per node, size bytes, measured seconds) of every fitted point."""
    points = []
    with ECHO.open(newline="") as fh:
        for row in csv.DictReader(fh):
            size, n = int(row["size_bytes"]), int(row["num_gpus"])
            if row["in_place"] == "0" and n > 1 and size in _SIZES:
                points.append((n, int(row["gpus_per_node"]), float(size),
                               float(row["time_us"]) * 1e-6))
    for n in (2, 4, 8):
        path = next(VTRAIN_LUT.glob(f"AR_GPU{n}_*"))
        with path.open(newline="") as fh:
            for cells in csv.reader(fh):
                if cells and cells[0].isdigit() and int(cells[0]) in _SIZES:
                    points.append((n, n, float(cells[0]), float(cells[3]) * 1e-9))
    return points


def _system(calib: CalibrationSpec, num_gpus: int, per_node: int) -> SystemSpec:
    return SystemSpec(num_gpus=num_gpus, gpus_per_node=per_node, accelerator=AcceleratorSpec(),
                      scaleup=TopologyDimSpec(bandwidth_GBps=300.0, latency_ns=700.0),
                      scaleout=TopologyDimSpec(bandwidth_GBps=25.0, latency_ns=2500.0),
                      calibration=calib)


def predict(calib: CalibrationSpec, points: list[tuple[int, int, float, float]]) -> np.ndarray:
    """Predicted all-reduce seconds of every point."""
    out = np.empty(len(points))
    for i, (n, k, size, _) in enumerate(points):
        sb = SystemBatch.from_specs([_system(calib, max(n, k), k)])
        out[i] = collective_time_s(sb, 0, size, n, min(n, k))[0, 0]
    return out


def fit_collectives(base: CalibrationSpec) -> tuple[CalibrationSpec, float, int]:
    """(calibration with FITTED replaced, rms log error, number of points)."""
    points = load_points()
    measured = np.array([p[3] for p in points])

    def calib_of(x: np.ndarray) -> CalibrationSpec:
        return replace(base, **dict(zip(FITTED, (float(v) for v in x), strict=True)))

    res = least_squares(lambda x: np.log(predict(calib_of(x), points) / measured),
                        x0=[0.77, 0.1, 30.0, 1.0, 0.7, 10.0],
                        bounds=([0.3, 0.0, 0.0, 0.0, 0.2, 0.0], [1.0, 0.9, 500.0, 50.0, 1.0, 500.0]))
    rounded = [round(float(v), 4) for v in res.x]
    return calib_of(np.array(rounded)), float(np.sqrt(np.mean(res.fun**2))), len(points)


if __name__ == "__main__":
    calib, rms, n = fit_collectives(CalibrationSpec())
    print({k: getattr(calib, k) for k in FITTED}, f"rms log error {rms:.3f} over {n} points")
    pts = load_points()
    for p, g in zip(pts, predict(calib, pts), strict=True):
        print(p[0], p[1], int(p[2]) >> 10, "KiB", f"meas {p[3]*1e6:.1f} us pred {g*1e6:.1f} us "
              f"{100*(g/p[3]-1):+.1f}%")
