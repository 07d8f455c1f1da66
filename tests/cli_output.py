"""Checks of what a command prints, shared by the CLI tests."""

from __future__ import annotations


def one_line_error(rc: int, err: str, *needles: str) -> str:
    """The command refused its input as bad input: exit 2 and one line on stderr, no traceback
    and no "internal error", holding every one of ``needles``; returns that line (callers
    ``assert`` it, so a test reads as the check it is)."""
    assert rc == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err and "internal error" not in err, err
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]
