"""``simsweep chakra export`` refuses what its files cannot describe, before writing anything, and
what it does write runs with the command it prints (reference §2.2: ``npus_count`` > 1 per
dimension; §2.6: the workload is ``<prefix>.<npu>.et``)."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from search.cli import main
from tests.cli_output import one_line_error as _one_line

TINY = ["workload=gpt_tiny", "system=dgx_a100_80g"]
ASTRA_DATA = Path(__file__).parents[2] / "data" / "astra"


def test_mixed_device_pools_are_refused_like_the_astra_fidelity(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """ASTRA-sim's system has one local-mem-bw and one bandwidth per network dimension: the H100
    and A100 pools (NVLink 450 vs 300 GB/s) cannot both be written, so nothing is."""
    rc = main(["chakra", "export", "--out", str(tmp_path / "mx"), "workload=gpt_tiny", "system=mixed_h100_a100",
               "system.num_gpus=16", "parallel.tp=2", "parallel.pp=2"])
    assert _one_line(rc, capsys.readouterr().err, "system.pools", "h100_80g", "a100_80g", "fidelity=calibrated")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("overrides", "needle"), [
    (["system.num_gpus=1"], "system.num_gpus=1"),
    (["system.num_gpus=4", "system.gpus_per_node=1"], "system.gpus_per_node=1"),
])
def test_a_network_dimension_of_one_npu_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                    overrides: list[str], needle: str) -> None:
    rc = main(["chakra", "export", "--out", str(tmp_path / "one"), *TINY, *overrides])
    assert _one_line(rc, capsys.readouterr().err, needle, "npus_count > 1")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("suffix", ["/", "/.", "/.."])
def test_a_prefix_without_a_file_name_is_refused_by_writers_and_reader(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], suffix: str) -> None:
    out = str(tmp_path / "ex") + suffix
    for argv in (["chakra", "export", "--out", out, *TINY, "system.num_gpus=8"],
                 ["chakra", "collective", "--algorithm", "ring", "--ranks", "4", "--size", "4096", "--out", out],
                 ["trace", "--import-et", str(tmp_path / "missing.json"), "--out", out]):
        assert _one_line(main(argv), capsys.readouterr().err, "--out", "needs a file name after the last '/'")
    assert not (tmp_path / "ex").exists() or list((tmp_path / "ex").iterdir()) == []
    # the reader says the same instead of looking for ex.0.et
    rc = main(["astra", "--workload", out, "--system", str(ASTRA_DATA / "Ring_4chunks.json"),
               "--network", str(ASTRA_DATA / "Ring_8.yml")])
    assert _one_line(rc, capsys.readouterr().err, "workload=", "needs a file name after the last '/'")


def test_the_printed_run_command_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The smallest exportable job (2 GPUs) into a folder: the printed ``simsweep astra`` line runs."""
    assert main(["chakra", "export", "--out", str(tmp_path / "ex" / "w"), *TINY, "system.num_gpus=2"]) == 0
    printed = capsys.readouterr().out
    command = shlex.split(printed.split("run: ", 1)[1].splitlines()[0])
    assert command[:2] == ["simsweep", "astra"]
    assert main(command[1:]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and all(" finished, " in line for line in lines)
