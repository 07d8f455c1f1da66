"""One-line wording of tracking failures for the console.

An unreachable MLflow server surfaces as a client exception whose text carries the whole urllib3
retry chain (object reprs, the URL with its query, the pool state; several hundred characters).
The console line a user reads names the exception, the request that failed and the operating
system's reason (``Connection refused``, ``timed out``), within ``limit_chars``; the full text
stays in the exception for logs.
"""

from __future__ import annotations

import re

__all__ = ["brief_error"]

_OS_REASON = re.compile(r"\[Errno -?\d+\] ([^'\"()\]]+)")
_TIMEOUT = re.compile(r"(Read|Connect)\s?Timeout|timed out", re.IGNORECASE)
_CUTS = (" failed with exception", " with url:", "HTTPConnectionPool(", "HTTPSConnectionPool(")


def brief_error(err: BaseException, limit_chars: int = 160) -> str:
    """``"<Type>: <what failed>: <reason>"`` on one line, at most ``limit_chars`` long."""

    text = " ".join(str(err).split())
    reason = _OS_REASON.search(text)
    why = reason.group(1).strip().rstrip(".:,") if reason else (
        "timed out" if _TIMEOUT.search(text) else "")
    head = text
    for cut in _CUTS:
        at = head.find(cut)
        if at > 0:
            head = head[:at]
    head = head.rstrip(" :,")
    line = f"{type(err).__name__}: {head}" + (f": {why}" if why and why not in head else "")
    if len(line) > limit_chars:
        line = line[:limit_chars - 1].rstrip() + "…"
    return line
