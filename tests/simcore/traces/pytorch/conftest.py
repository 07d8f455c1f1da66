"""Tracing tests need the ``trace`` extra (PyTorch); each trace file gets an isolated ET cache."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
pytest.importorskip("torchvision")
