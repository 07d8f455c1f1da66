"""Where ``shared/`` (reference inputs and published measurements) lives for the tests.

CI clones the project with ``shared/`` beside it; ``$SIMSWEEP_SHARED`` overrides. Tests that need
it carry :data:`needs_shared`: they are skipped on a developer machine without it, but run (and so
fail loudly) under CI (``CI`` set), so a CI run never passes by silently skipping golden checks.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

_REPO = Path(__file__).resolve().parents[1]
_CANDIDATES = [Path(p) for p in [os.environ.get("SIMSWEEP_SHARED")] if p] + [
    _REPO.parent / "shared",
]

SHARED: Path = next((p for p in _CANDIDATES if (p / "astra-inputs").is_dir()), _CANDIDATES[0])
HAVE_SHARED: bool = (SHARED / "astra-inputs").is_dir()
GPT3_INPUTS: Path = SHARED / "astra-inputs" / "gpt3_175b_64npu"
VALIDATION: Path = SHARED / "validation"

needs_shared = pytest.mark.skipif(
    not HAVE_SHARED and not os.environ.get("CI"),
    reason=f"shared/ not found (looked in {', '.join(map(str, _CANDIDATES))})",
)
