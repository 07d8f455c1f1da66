"""Every accelerator and precision named in shared/validation/CASES.md has a preset validate uses.

CASES.md lists the ``gpu`` values a cases file may hold (``a100_80g`` ... ``gb300``, the
Grace-Blackwell NVL72 racks) and the precisions (``fp16``, ``bf16``, ``fp8``, ``fp4``). Each must
build a system (accelerator + calibration with its provenance header), and a small run in each
precision a Blackwell rack supports must predict with status ok, low precision faster than bf16
but by less than the ratio of peaks (the GEMM-only recipe keeps attention and elementwise work in
bf16).
"""

from __future__ import annotations

import pytest

from search.commands.validate import build_case, cluster_for, predict
from simcore.hardware.batch import SystemBatch
from simcore.hardware.compute import gemm_time_s

CASES_MD_GPUS = ("a100_80g", "h100_80g", "a100_40g", "h800_80g", "h200_141g", "b200", "gb200",
                 "gb300", "v100_32g", "p100_16g")


@pytest.mark.parametrize("gpu", CASES_MD_GPUS)
def test_every_cases_md_gpu_has_a_cluster_preset(gpu: str) -> None:
    system = cluster_for(gpu)
    assert system["accelerator"]["name"] == gpu
    assert system["calibration"]["gemm_efficiency_max"] > 0


def _row(gpu: str, precision: str) -> dict[str, str]:
    return {"case_id": f"small_{gpu}_{precision}", "gpu": gpu, "gpus_per_node": "64",
            "num_gpus": "64", "scaleout_gbps_per_gpu": "400", "num_layers": "8",
            "hidden_size": "4096", "num_heads": "32", "num_kv_heads": "8",
            "ffn_hidden_size": "14336", "seq_len": "8192", "vocab_size": "128256",
            "global_batch": "64", "micro_batch": "1", "tp": "4", "pp": "1", "dp": "16",
            "vp": "1", "cp": "1", "ep": "1", "sequence_parallel": "true",
            "recompute": "selective", "precision": precision, "zero_stage": "1",
            "dp_overlap": "true", "tp_comm_overlap": "false"}


@pytest.mark.parametrize("gpu", ["gb200", "gb300"])
def test_blackwell_rack_predicts_every_precision(gpu: str) -> None:
    times = {}
    for precision in ("bf16", "fp8", "fp4"):
        out = predict(_row(gpu, precision))
        assert out["status"] == "ok", out
        times[precision] = float(out["iter_time_s"])
    assert times["bf16"] > times["fp8"] > times["fp4"]
    assert times["bf16"] / times["fp8"] < 2.0
    system = build_case(_row(gpu, "fp4"))[2]
    assert system.accelerator.peak_tflops_fp4 > system.accelerator.peak_tflops_fp8


#: precisions each CASES.md accelerator runs on its tensor cores, by generation (vendor datasheets:
#: fp16 on every listed GPU, bf16 from A100, fp8 from H100 (Hopper), NVFP4 from Blackwell)
SUPPORTED = {"fp16": set(CASES_MD_GPUS),
             "bf16": set(CASES_MD_GPUS) - {"v100_32g", "p100_16g"},
             "fp8": {"h100_80g", "h800_80g", "h200_141g", "b200", "gb200", "gb300"},
             "fp4": {"b200", "gb200", "gb300"}}


@pytest.mark.parametrize("precision", ["fp16", "bf16", "fp8", "fp4"])
@pytest.mark.parametrize("gpu", CASES_MD_GPUS)
def test_every_gpu_precision_pair_is_predicted_with_intervals(gpu: str, precision: str) -> None:
    """No row without a prediction: every pair the hardware runs predicts with status ok and
    all four interval bounds around it; a pair it cannot run is an error with the reason (and
    no memory verdict: nothing ran)."""
    from search.commands.validate import INTERVAL_COLUMNS, _with_intervals

    row = {**_row(gpu, precision), "gpus_per_node": "64" if gpu.startswith("gb") else "8",
           "pp": "2", "dp": "8", "seq_len": "4096"}
    out = _with_intervals(predict(row), row, "auto")
    if gpu in SUPPORTED[precision]:
        assert out["status"] == "ok", out
        t = float(out["iter_time_s"])
        lo80, hi80, lo95, hi95 = (float(out[c]) for c in INTERVAL_COLUMNS)
        assert lo95 < lo80 < t < hi80 < hi95
    else:
        assert out["status"] == "error" and out["fits_memory"] == ""
        assert precision in out["error"] and gpu in out["error"]


@pytest.mark.parametrize("gpu", ["b200", "gb200", "gb300"])
def test_blackwell_gemms_run_at_simumax_in_training_efficiency(gpu: str) -> None:
    """A large bf16 GEMM of a Blackwell row runs at 0.488 of its bf16 peak (SimuMax's matmul
    efficiency fitted on its B200 runs, reference/peers-hardware-measurements.md A.3: 0.488 of
    2,250 TF) times the shape curve, where an H100 row keeps the A100 runs' fraction (> 0.7)."""
    def achieved(gpu_name: str) -> tuple[float, float, float]:
        system = build_case(_row(gpu_name, "bf16"))[2]
        d = 16384.0
        seconds = float(gemm_time_s(SystemBatch.from_specs([system]), d, d, d, "bf16")[0, 0])
        half = system.calibration.gemm_half_dim
        shape = (d / (d + half)) ** 3
        return 2 * d ** 3 / seconds / 1e12, system.accelerator.peak_tflops_bf16, shape

    tflops, peak, shape = achieved(gpu)
    assert peak >= 2250.0
    assert tflops / (peak * shape) == pytest.approx(0.488, rel=2e-3)
    h_tflops, h_peak, h_shape = achieved("h100_80g")
    assert h_tflops / (h_peak * h_shape) > 0.7
