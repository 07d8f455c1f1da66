"""Where the shared ASTRA-sim GPT-3 inputs live (shared/ sits beside the repo, or /work/shared)."""

from __future__ import annotations

import os
from pathlib import Path

_REPO = Path(__file__).resolve().parents[3]
_CANDIDATES = [
    Path(os.environ.get("SIMSWEEP_SHARED", "/nonexistent")),
    _REPO.parent / "shared",
    _REPO / "shared",
    Path("/work/shared"),
]


def gpt3_dir() -> Path:
    """The gpt3_175b_64npu input folder (may not exist; tests skip then)."""
    for base in _CANDIDATES:
        path = base / "astra-inputs" / "gpt3_175b_64npu"
        if path.exists():
            return path
    return _CANDIDATES[-1] / "astra-inputs" / "gpt3_175b_64npu"
