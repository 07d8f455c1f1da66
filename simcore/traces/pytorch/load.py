"""Build a user's model from an import path ``package.module:factory`` and its inputs, on ``meta``.

The factory is any callable returning a ``torch.nn.Module`` (a class, a function, e.g.
``torchvision.models:resnet50``), called with the given keyword arguments under
``torch.device("meta")`` so its parameters are allocated without memory or initialisation
cost; a factory that needs real tensors while building is built on the CPU and moved to
``meta``. Inputs are ``SHAPE[:DTYPE]`` strings such as ``8x3x224x224`` or ``4x1024:int64``.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from typing import Any

from simcore.errors import InputError
from simcore.traces.pytorch.torch_import import require_torch

__all__ = ["DTYPES", "PARAM_DTYPES", "build_model", "check_param_dtype", "make_inputs", "parse_input"]

DTYPES = ("float32", "float16", "bfloat16", "float64", "int64", "int32")
PARAM_DTYPES = ("float32", "float16", "bfloat16", "float64")  # nn.Module.to takes floating dtypes only


def check_param_dtype(dtype: object) -> str:
    """``dtype`` if it is a parameter dtype (:data:`PARAM_DTYPES`), else an InputError naming ``dtype``."""
    if not isinstance(dtype, str) or dtype not in PARAM_DTYPES:
        raise InputError("dtype", dtype, f"must be a floating parameter dtype: {', '.join(PARAM_DTYPES)} "
                                         "(integer inputs: SHAPE:int64 in the input shape)")
    return dtype


def _factory(path: str) -> Any:
    module_name, sep, attr = path.partition(":")
    if not sep or not module_name or not attr:
        raise InputError("model", path, "must be an import path package.module:factory")
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise InputError("model", path, f"cannot import module {module_name!r}: {err}") from err
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise InputError("model", path, f"module {module_name!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise InputError("model", path, "is not callable")
    return obj


def build_model(path: str, kwargs: Mapping[str, Any] | None = None, dtype: str = "float32") -> Any:
    """The module made by the factory at ``path``, on ``meta``, in ``dtype``, in train mode.

    Raises:
        InputError: the path does not import, or the factory fails or returns no module.
    """
    check_param_dtype(dtype)
    torch = require_torch()
    factory = _factory(path)
    kw = dict(kwargs or {})
    try:
        with torch.device("meta"):
            model = factory(**kw)
    except Exception:  # noqa: BLE001 - some factories need real tensors while building
        try:
            model = factory(**kw).to("meta")
        except Exception as err:
            raise InputError("model", path, f"factory failed: {type(err).__name__}: {err}") from err
    if not isinstance(model, torch.nn.Module):
        raise InputError("model", path, f"factory returned {type(model).__name__}, not a torch.nn.Module")
    return model.to(dtype=getattr(torch, dtype)).train()


def parse_input(text: str, default_dtype: str) -> tuple[tuple[int, ...], str]:
    """``"8x3x224x224"`` / ``"8,1024:int64"`` -> (shape, dtype)."""
    shape_text, _, dtype = text.partition(":")
    dtype = dtype or default_dtype
    try:
        shape = tuple(int(x) for x in shape_text.replace(",", "x").split("x"))
    except ValueError:
        raise InputError("input shape", text, "must be dimensions like 8x3x224x224[:dtype]") from None
    if not shape or min(shape) < 1:
        raise InputError("input shape", text, "dimensions must be integers >= 1")
    if dtype not in DTYPES:
        raise InputError("input dtype", dtype, f"must be one of {', '.join(DTYPES)}")
    return shape, dtype


def make_inputs(specs: Sequence[str], dtype: str) -> list[Any]:
    """``meta`` tensors for the input specs (floating inputs default to ``dtype``)."""
    torch = require_torch()
    out = []
    for text in specs:
        shape, dt = parse_input(text, dtype)
        out.append(torch.empty(shape, dtype=getattr(torch, dt), device="meta"))
    return out
