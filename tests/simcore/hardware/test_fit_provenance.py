"""The checked-in calibration presets are what scripts/fit_calibration.py's kernel-level fit writes."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import yaml

from tests.shared_paths import needs_shared

ROOT = Path(__file__).resolve().parents[3]
STAGE1 = ("gemm_efficiency_max", "gemm_half_dim", "hbm_efficiency", "scaleup_efficiency",
          "collective_base_latency_us", "scaleout_efficiency", "switch_allreduce_gain")


def _fit_module():  # scripts/ is not a package: load the script by path
    spec = importlib.util.spec_from_file_location("fit_calibration",
                                                  ROOT / "scripts" / "fit_calibration.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@needs_shared  # the fit reads the nccl-tests and vTrain calibration data in shared/
@pytest.mark.parametrize("name", ["a100", "h100", "h800"])
def test_presets_match_the_kernel_level_fit(name: str) -> None:
    calibs, log = _fit_module().kernel_level()
    preset = yaml.safe_load((ROOT / "conf" / "system" / "calibration" / f"{name}.yaml").read_text())
    for key in STAGE1:
        assert preset[key] == pytest.approx(getattr(calibs[name], key), rel=0.02), key
    header = (ROOT / "conf" / "system" / "calibration" / f"{name}.yaml").read_text()
    assert "scripts/fit_calibration.py" in header and "sustained_compute_fraction=" in header
    assert any("LLMCompass" in line for line in log)
