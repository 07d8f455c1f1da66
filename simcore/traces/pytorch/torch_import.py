"""The one place the tracing modules import ``torch``: lazily, with the install hint when missing."""

from __future__ import annotations

from types import ModuleType

from simcore.errors import InputError

__all__ = ["INSTALL_HINT", "require_torch"]

INSTALL_HINT = "pip install 'simsweep[trace]'"


def require_torch() -> ModuleType:
    """The ``torch`` module.

    Raises:
        InputError: PyTorch is not installed (the message says how to install it).
    """
    try:
        import torch
    except ImportError as err:  # pragma: no cover - exercised only without the extra
        raise InputError("torch", "not installed", f"tracing needs PyTorch: {INSTALL_HINT}") from err
    return torch
