"""Multi-dimensional analytical topology and the congestion-unaware message cost.

Model (reference/astra-sim-and-chakra.md §3, astra-network-analytical ``BasicTopology.cpp`` and
``MultiDimTopology.cpp``):
- NPU id = sum_d addr[d] * prod_{k<d} npus[k] (dim 0 varies fastest);
- bandwidth in the YAML is GiB/s: bytes_per_ns = GBps * 2**30 / 1e9;
- a message is charged entirely to the first (lowest) dimension where src and dst differ:
  ``delay_ns = int(hops * latency_ns + size / bytes_per_ns)`` with hops = shortest ring distance
  (Ring, bidirectional), 1 (FullyConnected) or 2 (Switch); no queueing.
"""

from __future__ import annotations

from simcore.emulator.specs import NetworkSpec
from simcore.errors import InputError
from simcore.units import gib_per_s_to_bytes_per_ns

__all__ = ["Topology", "hops_in_dim"]


def hops_in_dim(kind: str, npus: int, src: int, dst: int) -> int:
    """Hops between coordinates ``src`` and ``dst`` of one dimension of ``kind``."""
    if src == dst:
        return 0
    if kind == "Ring":
        cw = (dst - src) % npus
        return min(cw, npus - cw)
    return 1 if kind == "FullyConnected" else 2


class Topology:
    """Coordinates and congestion-unaware delays of a :class:`NetworkSpec`."""

    def __init__(self, spec: NetworkSpec) -> None:
        self.spec = spec
        self.npus = spec.npus
        self.sizes = tuple(d.npus_count for d in spec.dims)
        strides = []
        stride = 1
        for size in self.sizes:
            strides.append(stride)
            stride *= size
        self.strides = tuple(strides)
        self.bytes_per_ns = tuple(gib_per_s_to_bytes_per_ns(d.bandwidth_GBps) for d in spec.dims)
        self.latency_ns = tuple(d.latency_ns for d in spec.dims)
        self.kinds = tuple(d.kind for d in spec.dims)

    def coord(self, npu: int, dim: int) -> int:
        """Coordinate of ``npu`` along ``dim``."""
        return (npu // self.strides[dim]) % self.sizes[dim]

    def check_npu(self, key: str, npu: int) -> None:
        """Raise :class:`InputError` unless ``npu`` is an NPU of this network."""
        if not 0 <= npu < self.npus:
            raise InputError(key, npu, f"NPU id must be in [0, {self.npus})")

    def first_diff_dim(self, src: int, dst: int) -> int:
        """Lowest dimension where ``src`` and ``dst`` differ (-1 if equal)."""
        for dim in range(len(self.sizes)):
            if self.coord(src, dim) != self.coord(dst, dim):
                return dim
        return -1

    def unaware_delay_ns(self, src: int, dst: int, size_bytes: int) -> int:
        """Congestion-unaware delivery time of one message (ns, truncated to an integer)."""
        dim = self.first_diff_dim(src, dst)
        if dim < 0:
            return 0
        hops = hops_in_dim(self.kinds[dim], self.sizes[dim], self.coord(src, dim), self.coord(dst, dim))
        return int(hops * self.latency_ns[dim] + size_bytes / self.bytes_per_ns[dim])
