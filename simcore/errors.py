"""Error types shared by the simulator core.

Bad input is reported as :class:`InputError`, a ``ValueError`` whose message names the key
(or file and position), the offending value and the rule it broke, on one line.
"""

from __future__ import annotations

import math


class InputError(ValueError):
    """A configuration, trace or spec value that breaks a documented rule."""

    def __init__(self, key: str, value: object, rule: str) -> None:
        self.key = key
        self.value = value
        self.rule = rule
        super().__init__(f"{key}={value!r}: {rule}")


def require(condition: bool, key: str, value: object, rule: str) -> None:
    """Raise :class:`InputError` unless ``condition`` holds and ``value`` is not a NaN/inf float.

    A non-finite float never satisfies a rule (``inf > 0`` holds, but no spec means it), so the
    finiteness check comes first and names its own rule.
    """
    if isinstance(value, float) and not math.isfinite(value):
        raise InputError(key, value, "must be a finite number")
    if not condition:
        raise InputError(key, value, rule)
