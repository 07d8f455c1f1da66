"""``simsweep chakra export`` refuses what its files cannot describe, before writing anything
(reference §2.2: ``npus_count`` > 1 per dimension)."""

from __future__ import annotations

from pathlib import Path

import pytest

from search.cli import main

TINY = ["workload=gpt_tiny", "system=dgx_a100_80g"]


def _one_line(rc: int, err: str, *needles: str) -> None:
    assert rc == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err and "internal error" not in err, err
    for needle in needles:
        assert needle in lines[0], lines[0]


def test_mixed_device_pools_are_refused_like_the_astra_fidelity(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """ASTRA-sim's system has one local-mem-bw and one bandwidth per network dimension: the H100
    and A100 pools (NVLink 450 vs 300 GB/s) cannot both be written, so nothing is."""
    rc = main(["chakra", "export", "--out", str(tmp_path / "mx"), "workload=gpt_tiny", "system=mixed_h100_a100",
               "system.num_gpus=16", "parallel.tp=2", "parallel.pp=2"])
    _one_line(rc, capsys.readouterr().err, "system.pools", "h100_80g", "a100_80g", "fidelity=calibrated")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("overrides", "needle"), [
    (["system.num_gpus=1"], "system.num_gpus=1"),
    (["system.num_gpus=4", "system.gpus_per_node=1"], "system.gpus_per_node=1"),
])
def test_a_network_dimension_of_one_npu_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                    overrides: list[str], needle: str) -> None:
    rc = main(["chakra", "export", "--out", str(tmp_path / "one"), *TINY, *overrides])
    _one_line(rc, capsys.readouterr().err, needle, "npus_count > 1")
    assert list(tmp_path.iterdir()) == []
