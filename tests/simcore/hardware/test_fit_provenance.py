"""The checked-in calibration presets are what scripts/fit_calibration.py's kernel-level fit writes."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import yaml

from tests.shared_paths import needs_shared

ROOT = Path(__file__).resolve().parents[3]
STAGE1 = ("gemm_efficiency_max", "gemm_half_dim", "hbm_efficiency", "scaleup_efficiency",
          "collective_base_latency_us", "scaleout_efficiency", "switch_allreduce_gain",
          "scaleup_alltoall_ratio")
PRESETS = ROOT / "conf" / "system" / "calibration"


def _fit_module():  # scripts/ is not a package: load the script by path
    spec = importlib.util.spec_from_file_location("fit_calibration",
                                                  ROOT / "scripts" / "fit_calibration.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@needs_shared  # the fit reads the nccl-tests and vTrain calibration data in shared/
@pytest.mark.parametrize("name", ["a100", "h100", "h800", "blackwell"])
def test_presets_match_the_kernel_level_fit(name: str) -> None:
    calibs, log = _fit_module().kernel_level()
    preset = yaml.safe_load((ROOT / "conf" / "system" / "calibration" / f"{name}.yaml").read_text())
    for key in STAGE1:
        assert preset[key] == pytest.approx(getattr(calibs[name], key), rel=0.02), key
    header = (ROOT / "conf" / "system" / "calibration" / f"{name}.yaml").read_text()
    assert "scripts/fit_calibration.py" in header and "sustained_compute_fraction=" in header
    assert any("LLMCompass" in line for line in log)


def _preset(name: str) -> dict[str, float]:
    return yaml.safe_load((PRESETS / f"{name}.yaml").read_text())


def test_blackwell_takes_simumax_b200_efficiencies_not_the_a100_fraction() -> None:
    """SimuMax's fit on its B200 runs (reference/peers-hardware-measurements.md A.3,
    b200_bf16_ceperm.json): matmuls at 0.488 of the bf16 peak, HBM at 0.666. In the calibrated
    model the in-training GEMM roof is gemm_efficiency_max x sustained_compute_fraction; the
    A100 runs' fraction stays on the A100 and Hopper presets."""
    blackwell, a100 = _preset("blackwell"), _preset("a100")
    roof = blackwell["gemm_efficiency_max"] * blackwell["sustained_compute_fraction"]
    assert roof == pytest.approx(0.488, abs=1e-4)
    assert blackwell["hbm_efficiency"] == 0.666
    for name in ("h100", "h800", "default"):
        assert _preset(name)["sustained_compute_fraction"] == a100["sustained_compute_fraction"]
    assert a100["gemm_efficiency_max"] * a100["sustained_compute_fraction"] > 0.7
