"""Every accelerator preset's HBM capacity is its datasheet figure, read in GiB.

HBM stacks are binary-sized (an A100 80GB reports 81,920 MiB, an H200 about 143,700 MiB in
nvidia-smi [R]), so a datasheet's "141 GB" is not 141e9 bytes: the presets take the figure as
GiB, as the A100 and H100 presets always did. H200, B200, GB200, GB300 and MI300X used to
convert it as decimal gigabytes (131.3 for 141 GB), 7% short, which made plans of 131-141 GiB
on an H200 out of memory.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

ACCELERATORS = sorted((Path(__file__).resolve().parents[2] / "conf" / "system"
                       / "accelerator").glob("*.yaml"))
#: "HBM3e 141 GB" in the header comment (a bandwidth is "GB/s")
DATASHEET = re.compile(r"HBM\w* (\d+(?:\.\d+)?) GB(?!/s)")


@pytest.mark.parametrize("path", ACCELERATORS, ids=lambda p: p.stem)
def test_capacity_is_the_datasheet_figure_in_gib(path: Path) -> None:
    text = path.read_text()
    capacity = float(yaml.safe_load(text)["hbm_capacity_gib"])
    stated = DATASHEET.findall("\n".join(ln for ln in text.splitlines() if ln.startswith("#")))
    if not stated:  # H800: "H100 compute and memory"
        assert "H100 compute and memory" in text, path.name
        h100 = yaml.safe_load((path.parent / "h100_80g.yaml").read_text())
        assert capacity == h100["hbm_capacity_gib"]
        return
    assert len(set(stated)) == 1, stated
    assert capacity == float(stated[0]), (path.name, stated, capacity)


def test_every_preset_is_checked() -> None:
    assert len(ACCELERATORS) >= 11
