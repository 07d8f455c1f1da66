"""Unit constants and conversions, used at the spec boundary only.

ASTRA-sim's three "GB/s" are not the same unit (reference/astra-sim-and-chakra.md §3): the
analytical network reads GiB/s (x 2**30 / 1e9 bytes per ns), ``local-mem-bw`` and the roofline
read decimal GB/s (x 1e9), and remote memory reads the number as bytes per ns.
"""

from __future__ import annotations

KIB = 1024
MIB = 1024**2
GIB = 1024**3
NS_PER_S = 1e9
US_PER_S = 1e6


def gib_per_s_to_bytes_per_ns(bandwidth_GBps: float) -> float:
    """ASTRA-sim network convention: a configured "GB/s" is GiB/s; returns bytes per ns."""
    return bandwidth_GBps * GIB / 1e9


def gb_per_s_to_bytes_per_ns(bandwidth_GBps: float) -> float:
    """Decimal GB/s (1e9 bytes per second) to bytes per ns: the value is unchanged."""
    return bandwidth_GBps * 1e9 / NS_PER_S
