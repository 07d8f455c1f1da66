"""Software-stack presets (conf/stack/*.yaml) and their effect on the calibration."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from simcore.errors import InputError
from simcore.specs.stack import STACKS, StackSpec, apply_stack, stack_from_dict
from simcore.specs.system import CalibrationSpec, SystemSpec

CONF = Path(__file__).resolve().parents[3] / "conf" / "stack"


@pytest.mark.parametrize("name", STACKS)
def test_every_stack_preset_loads_and_says_its_source(name: str) -> None:
    text = (CONF / f"{name}.yaml").read_text()
    spec = stack_from_dict(yaml.safe_load(text))
    assert spec.name == name
    assert text.startswith("#")  # a header saying where the values come from


def test_reference_stack_is_the_identity_and_others_scale() -> None:
    system = SystemSpec(calibration=CalibrationSpec(sustained_compute_fraction=0.8))
    same = apply_stack(system, stack_from_dict(yaml.safe_load(
        (CONF / "megatron_lm.yaml").read_text())))
    assert same.calibration == system.calibration
    slower = apply_stack(system, StackSpec(name="x", kernel_efficiency=0.5, kernel_overhead_us=9))
    assert slower.calibration.sustained_compute_fraction == pytest.approx(0.4)
    assert slower.calibration.kernel_overhead_us == 9
    capped = apply_stack(system, StackSpec(name="y", kernel_efficiency=1.4))
    assert capped.calibration.sustained_compute_fraction == 1.0


def test_bad_stack_keys_are_input_errors() -> None:
    with pytest.raises(InputError, match="stack.bucket"):
        stack_from_dict({"name": "x", "bucket": 3})
    with pytest.raises(InputError, match="stack.kernel_efficiency"):
        StackSpec(kernel_efficiency=0.0)
