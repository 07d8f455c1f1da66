"""Path to the Chakra test data in tests/data/chakra."""

from __future__ import annotations

from pathlib import Path

DATA = Path(__file__).resolve().parents[2] / "data" / "chakra"

