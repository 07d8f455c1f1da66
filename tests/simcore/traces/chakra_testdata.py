"""Paths to the Chakra test data (tests/data/chakra and the shared ASTRA-sim inputs)."""

from __future__ import annotations

from pathlib import Path

DATA = Path(__file__).resolve().parents[2] / "data" / "chakra"


def shared_inputs() -> Path | None:
    """The shared GPT-3 ASTRA-sim inputs (beside the repo in CI), or None."""
    root = Path(__file__).resolve().parents[3]
    for cand in (root.parent / "shared", Path("/work/shared")):
        p = cand / "astra-inputs" / "gpt3_175b_64npu"
        if (p / "workload.0.et").exists():
            return p
    return None
