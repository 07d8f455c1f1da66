"""Fit the calibrated-mode hardware parameters once and write conf/system/calibration/*.yaml.

Stage 1 (kernel level, always): least squares (scipy) in log-time on published measurements,
reference/peers-hardware-measurements.md:
  * A100 GEMM throughput (LLMCompass matmul_A100.csv, A.3): gemm_efficiency_max,
    gemm_half_dim, hbm_efficiency; plus the harness's fixed per-call floor, which is a property
    of the benchmark loop (host launch + event timing), NOT of a kernel inside a training step,
    so it is fitted to explain the small-GEMM points but not written out.
  * A100 all-reduce time vs size on 2-128 GPUs (Echo's nccl-tests logs and vTrain's LUT,
    shared/validation/calibration/; scripts/fit_collectives.py): scaleup_efficiency,
    scaleup_pair_loss, collective_base/step latency, scaleout_ring_efficiency (NCCL rings over
    8 NICs per node reach ~0.63 of the single-NIC 23.5/25 GB/s), and the inter-node tree level
    latency. Per-NIC efficiency CX6 23.5 / 25, CX7 48.5 / 50 GB/s (SimAI calbusbw.h, A.3).
  * Ratios read directly (no fit): H100 ring 370 / 450 GB/s and NVLS 475 / 370 (nccl-tests
    #212/#290/#309, B.9); H800 NVLS 215 GB/s over 8 x 20.6 (nccl#1374, SimAI calbusbw.h); H100
    inter-node all-reduce over 8x400G NICs ~350 GB/s (248 x 8 H200, nccl-tests#283, B.9);
    Blackwell NVLink5 all-gather / all-reduce / all-to-all 0.674 / 0.742 / 0.597 of line rate,
    GEMMs at 0.488 of peak and HBM at 0.666 in training (SimuMax's B200 fit, A.3).
    attention_efficiency_max / attention_half_seq take the GEMM curve's values (the attention
    core is two batched GEMMs).
  * overlap_compute_slowdown = 0.15: Calculon's NVLink processor_usage (A.2); not fitted (no
    public case overlaps communication); kernel_overhead_us = 4: typical launch gap [R].
Stage 2 (end to end, ``--end-to-end``, scripts/fit_end_to_end.py): sustained_compute_fraction,
the one hardware parameter no microbenchmark pins down, and the fitted stacks'
kernel_efficiency, once over ALL published runs together (shared/validation and
tests/data/validation), minimising the mean squared log error of iteration time; plus the
conformal interval half-widths from the leave-one-group-out residuals. No per-case constant.

Usage: python scripts/fit_calibration.py [--end-to-end] [--cases F --measured F] [--dry-run]
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
from dataclasses import asdict, replace
from pathlib import Path
from types import ModuleType

import numpy as np
from scipy.optimize import least_squares

from simcore.hardware.batch import SystemBatch
from simcore.hardware.compute import gemm_time_s
from simcore.specs.system import AcceleratorSpec, CalibrationSpec, SystemSpec, TopologyDimSpec

ROOT = Path(__file__).resolve().parents[1]
#: the project's validation data, beside the checkout (../shared/validation)
SHARED_VALIDATION = ROOT.parent / "shared" / "validation"
CALIB_DIR = ROOT / "conf" / "system" / "calibration"

# (m, n=k, measured TFLOP/s) A100 fp16, LLMCompass ae/figure5/ab/real_hardware/matmul_A100.csv
A100_GEMM = [(64, 12288, 101.7), (1024, 12288, 257.9), (8192, 12288, 286.9),
             (16384, 12288, 290.5), (8192, 8192, 277.6), (8192, 1024, 185.2), (8192, 256, 30.1)]
A100 = SystemSpec(accelerator=AcceleratorSpec(), scaleup=TopologyDimSpec(bandwidth_GBps=300.0))
#: Blackwell (B200) in training, SimuMax's fit on its B200 runs (b200_bf16_ceperm.json,
#: reference/peers-hardware-measurements.md A.3): matmuls at 0.488 of the 2250 TF bf16 peak,
#: memory-bound kernels at 0.666 of the 8000 GB/s HBM
BLACKWELL_MATMUL_IN_TRAINING = 0.488
BLACKWELL_HBM_EFFICIENCY = 0.666
#: and its NVLink5 collective efficiencies (same file): all-gather 0.674, all-reduce 0.742,
#: all-to-all 0.597 of the 900 GB/s line rate
BLACKWELL_NVLINK_ALLGATHER = 0.674
BLACKWELL_NVLINK_ALLREDUCE = 0.742
BLACKWELL_NVLINK_ALLTOALL = 0.597
#: presets whose sustained_compute_fraction comes from their own generation's runs (stage 1), not
#: from the A100 runs of the end-to-end stage
OWN_SUSTAINED_FRACTION = frozenset({"blackwell"})


def _batch(calib: CalibrationSpec) -> SystemBatch:
    return SystemBatch.from_specs([replace(A100, calibration=calib)])


def fit_gemm(base: CalibrationSpec) -> tuple[CalibrationSpec, float, float]:
    """Fit the GEMM curve; returns (calibration, harness floor us, rms log error)."""
    m = np.array([r[0] for r in A100_GEMM], dtype=float)
    nk = np.array([r[1] for r in A100_GEMM], dtype=float)
    measured_s = 2 * m * nk * nk / (np.array([r[2] for r in A100_GEMM]) * 1e12)

    def model(x: np.ndarray) -> np.ndarray:
        calib = replace(base, gemm_efficiency_max=x[0], gemm_half_dim=x[1], hbm_efficiency=x[2],
                        kernel_overhead_us=x[3])
        return gemm_time_s(_batch(calib), m, nk, nk, "fp16")[:, 0]

    res = least_squares(lambda x: np.log(model(x) / measured_s), x0=[0.9, 48.0, 0.8, 5.0],
                        bounds=([0.5, 1.0, 0.3, 0.0], [1.0, 1024.0, 1.0, 100.0]))
    x = res.x
    # the unfused attention core is two batched GEMMs (s x s x d): same curve, seq in place of a
    # GEMM dimension (flash attention on A100 reaches a similar fraction: ~0.5-0.7 at d = 128)
    calib = replace(base, gemm_efficiency_max=round(float(x[0]), 4),
                    gemm_half_dim=round(float(x[1]), 2), hbm_efficiency=round(float(x[2]), 4),
                    attention_efficiency_max=round(float(x[0]), 4),
                    attention_half_seq=round(float(x[1]), 2))
    return calib, float(x[3]), float(np.sqrt(np.mean(res.fun**2)))


def _script(name: str) -> ModuleType:
    """A sibling script loaded by path (scripts/ is not a package)."""
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{name}.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def kernel_level() -> tuple[dict[str, CalibrationSpec], list[str]]:
    """Stage 1: per-generation calibrations and a provenance log."""
    a100, floor_us, gemm_rms = fit_gemm(CalibrationSpec())
    a100 = replace(a100, scaleout_efficiency=round(23.5 / 25.0, 4))  # CX6 (SimAI, A.3)
    a100, ar_rms, ar_points = _script("fit_collectives").fit_collectives(a100)
    a100 = replace(a100, switch_allreduce_gain=1.0, overlap_compute_slowdown=0.15,
                   kernel_overhead_us=4.0, fp8_extra_bytes_per_gemm_element=3.0)
    h100 = replace(a100, scaleup_efficiency=round(370.0 / 450.0, 4),
                   switch_allreduce_gain=round(475.0 / 370.0, 4),
                   scaleout_efficiency=round(48.5 / 50.0, 4),
                   scaleout_ring_efficiency=round(350.0 / (8 * 48.5), 4),
                   fp8_gemm_efficiency_ratio=1.0)
    h800 = replace(h100, switch_allreduce_gain=round(215.0 / (8 * 20.6), 4))
    # Blackwell's GEMMs inside a training step: SimuMax's matmul efficiency, fitted end to end on
    # its B200 runs, is the product gemm_efficiency_max x sustained_compute_fraction here (the
    # shape curve stays the microbenchmark's); its memory-bound kernels reach hbm_efficiency
    blackwell = replace(h100, scaleup_efficiency=BLACKWELL_NVLINK_ALLGATHER,
                        switch_allreduce_gain=round(
                            BLACKWELL_NVLINK_ALLREDUCE / BLACKWELL_NVLINK_ALLGATHER, 4),
                        scaleup_alltoall_ratio=round(
                            BLACKWELL_NVLINK_ALLTOALL / BLACKWELL_NVLINK_ALLGATHER, 4),
                        fp4_gemm_efficiency_ratio=1.0, hbm_efficiency=BLACKWELL_HBM_EFFICIENCY,
                        sustained_compute_fraction=round(
                            BLACKWELL_MATMUL_IN_TRAINING / h100.gemm_efficiency_max, 4))
    log = [
        f"A100 GEMM (LLMCompass, 7 shapes): rms log error {gemm_rms:.3f}; harness floor "
        f"{floor_us:.1f} us per call fitted and discarded (benchmark-loop artefact)",
        f"A100 all-reduce, 2-128 GPUs (Echo nccl-tests + vTrain LUT, {ar_points} points, "
        f"1 MiB-4 GiB; scripts/fit_collectives.py): rms log error {ar_rms:.3f}",
        "H100: scaleup 370/450, NVLS gain 475/370 (reference B.9); NIC 48.5/50 (A.3); inter-node "
        "rings over 8 NICs 350/(8 x 48.5) (H200 1984 GPUs, nccl-tests#283, B.9); other collective "
        "terms as A100",
        "H800: as H100, NVLS gain 215/(8 x 20.6) (reference B.9)",
        "fp8 (H100 and later): GEMM efficiency 1.0 x bf16 at the datasheet fp8 peak (H100/H200/"
        "H800 989 bf16, 1979 fp8 dense, reference/peers-hardware-measurements.md A.3; Calculon's "
        "h100_80g_nvl8.json uses one efficiency table for fp16 1000 and fp8 2000, A.2; the "
        "references hold no fp8 GEMM microbenchmark, so this is not a fit); cast before each "
        "GEMM 3 bytes per input element (bf16 read + fp8 write, amax fused; Transformer Engine "
        "recipe, derived)",
        f"Blackwell (B200, GB200, GB300): NVLink5 all-gather/reduce-scatter "
        f"{BLACKWELL_NVLINK_ALLGATHER}, all-reduce {BLACKWELL_NVLINK_ALLREDUCE} and all-to-all "
        f"{BLACKWELL_NVLINK_ALLTOALL} of line rate (scaleup_alltoall_ratio "
        f"{blackwell.scaleup_alltoall_ratio}); GEMMs in a training step at 0.488 of the bf16 peak "
        f"(sustained_compute_fraction {BLACKWELL_MATMUL_IN_TRAINING} / gemm_efficiency_max = "
        f"{blackwell.sustained_compute_fraction}, not the A100 runs' fraction) and memory-bound "
        f"kernels at {BLACKWELL_HBM_EFFICIENCY} of HBM bandwidth: SimuMax's matmul and HBM "
        "efficiencies fitted on its 43 B200 runs (b200_bf16_ceperm.json, reference A.3; dense "
        "errors -11.4% to -0.2% with them); NVFP4 GEMM efficiency 1.0 x bf16 at the datasheet "
        "fp4 peak (no NVFP4 measurement in the references: the bf16 curve, not a fit); other "
        "terms as H100",
    ]
    return {"a100": a100, "h100": h100, "h800": h800, "blackwell": blackwell,
            "default": a100}, log


def write_yaml(name: str, calib: CalibrationSpec, provenance: list[str], dry_run: bool) -> None:
    """Write one calibration preset with a header saying how it was fitted."""
    stamp = dt.date.today().isoformat()
    lines = [f"# Calibrated-mode parameters for '{name}' (simcore.specs.system.CalibrationSpec).",
             f"# Written by scripts/fit_calibration.py on {stamp}; fitted once for all cases:"]
    lines += [f"#   {p}" for p in provenance]
    lines += [f"{k}: {v}" for k, v in asdict(calib).items()]
    text = "\n".join(lines) + "\n"
    if dry_run:
        print(text)
    else:
        (CALIB_DIR / f"{name}.yaml").write_text(text)


def main() -> None:
    """Run the fit and write the presets."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--end-to-end", action="store_true")
    parser.add_argument("--cases", default=str(SHARED_VALIDATION / "public_cases.csv"))
    parser.add_argument("--measured", default=str(SHARED_VALIDATION / "public_measured.csv"))
    parser.add_argument("--dry-run", action="store_true")
    args = parser.parse_args()
    calibs, log = kernel_level()

    def write_all() -> None:
        for name, calib in calibs.items():
            extra = ["default: the A100 fit (the only generation with kernel data)"] if (
                name == "default") else []
            write_yaml(name, calib, log + extra, args.dry_run)

    if args.end_to_end:
        if not args.dry_run:
            write_all()  # the end-to-end stage simulates the cases with the stage-1 values
        files = [(Path(args.cases), Path(args.measured)),
                 (ROOT / "tests" / "data" / "validation" / "extra_cases.csv",
                  ROOT / "tests" / "data" / "validation" / "extra_measured.csv")]
        calibs, more = _script("fit_end_to_end").fit_end_to_end(calibs, files,
                                                                  OWN_SUSTAINED_FRACTION)
        log += more
    for line in log:
        print(line)
    write_all()

if __name__ == "__main__":
    main()
