"""Module attributes imported on first use (PEP 562), for package entry points whose members
live in heavier modules: a command that reads only files does not pay for the engine."""

from __future__ import annotations

from importlib import import_module
from typing import Any


def load_lazy(module_name: str, lazy: dict[str, str], namespace: dict[str, Any], name: str) -> Any:
    """``name`` from the module ``lazy[name]``, stored in ``namespace`` (the caller's globals)
    so the next access is a plain lookup; AttributeError for a name ``lazy`` does not list."""
    source = lazy.get(name)
    if source is None:
        raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
    value = getattr(import_module(source), name)
    namespace[name] = value
    return value
