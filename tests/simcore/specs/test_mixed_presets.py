"""The mixed-pool cluster presets compose, resolve their pools and keep HAP's numbers."""

from __future__ import annotations

from pathlib import Path

from hydra import compose, initialize_config_dir

from search.config.build import build_system

CONF = Path(__file__).resolve().parents[3] / "conf"


def _system(name: str):  # noqa: ANN202 - a SystemSpec
    with initialize_config_dir(config_dir=str(CONF), version_base=None):
        return build_system(compose(config_name="config", overrides=[f"system={name}"]))


def test_hap_cluster_is_2x8_v100_and_6x8_p100_at_10_gbps_per_machine() -> None:
    s = _system("mixed_v100_p100")
    assert [(d.accelerator.name, d.count) for d in s.devices] == [("v100_32g", 16),
                                                                  ("p100_16g", 48)]
    assert not s.uniform_devices and s.num_nodes == 8
    # 10.4 Gb/s per machine shared by 8 GPUs (HAP Sec. 7.1)
    assert s.scaleout.bandwidth_GBps * 8 * 8 == 10.4
    assert [d.scaleup.bandwidth_GBps for d in s.devices] == [150.0, 80.0]  # asymmetric


def test_h100_a100_cluster_puts_h100_first() -> None:
    s = _system("mixed_h100_a100")
    assert [d.accelerator.name for d in s.devices] == ["h100_80g", "a100_80g"]
    assert [d.scaleup.bandwidth_GBps for d in s.devices] == [450.0, 300.0]
