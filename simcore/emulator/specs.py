"""Validated specs of ASTRA-sim's input files (reference/astra-sim-and-chakra.md §2.1-§2.4).

Frozen dataclasses; field names carry units (``endpoint_delay_ns``, ``local_mem_bw_GBps``). The
three ASTRA-sim "GB/s" are different units (reference §3): the network reads GiB/s, local memory
and the roofline decimal GB/s, remote memory bytes per ns; the names keep them apart. The parser
that builds these from files is :mod:`simcore.emulator.inputs`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from simcore.errors import InputError
from simcore.network.collectives import ASTRA_NAMES

__all__ = [
    "ALGORITHMS",
    "CommGroupsSpec",
    "NetworkDimSpec",
    "NetworkSpec",
    "RemoteMemorySpec",
    "SystemSpec",
    "TOPOLOGY_KINDS",
]

# topology kinds of the analytical network (reference §2.2)
TOPOLOGY_KINDS = ("Ring", "FullyConnected", "Switch")
# native algorithm names (reference §1.4, CollectiveImplLookup.cc), from the collective registry;
# directN / oneDirectN take a window
ALGORITHMS = ASTRA_NAMES


def split_algorithm(name: str) -> tuple[str, int]:
    """Split ``directN`` into ``("direct", N)``; other names get window 0 (= the default)."""
    for base in ("oneDirect", "direct"):
        if name.startswith(base) and name[len(base) :].isdigit():
            return base, int(name[len(base) :])
    return name, 0


def check_algorithm(key: str, name: str) -> None:
    """Raise :class:`InputError` unless ``name`` is a native algorithm string."""
    base, window = split_algorithm(name)
    if base not in ALGORITHMS or (base.endswith("irect") and name != base and window < 1):
        raise InputError(key, name, f"must be one of {', '.join(ALGORITHMS)} or directN/oneDirectN")


@dataclass(frozen=True)
class SystemSpec:
    """ASTRA-sim system configuration (reference §2.1); defaults are the C++ code's."""

    scheduling_policy: str = "LIFO"
    collective_optimization: str = "baseline"
    preferred_dataset_splits: int = 1
    active_chunks_per_dimension: int = 1
    endpoint_delay_ns: int = 10
    local_reduction_delay_ns: int = 1
    model_shared_bus: bool = False
    loggp_L: float = 0.0
    loggp_o: float = 0.0
    loggp_g: float = 0.0
    loggp_G: float = 0.0
    local_mem_bw_GBps: float = 0.0
    peak_perf_TFLOPS: float = 0.0
    roofline_enabled: bool = False
    trace_enabled: bool = False
    replay_only: bool = False
    track_local_mem: bool = False
    local_mem_trace_filename: str = "local_mem_trace"
    all_reduce_implementation: tuple[str, ...] = ()
    reduce_scatter_implementation: tuple[str, ...] = ()
    all_gather_implementation: tuple[str, ...] = ()
    all_to_all_implementation: tuple[str, ...] = ()
    all_reduce_implementation_custom: str | None = None
    reduce_scatter_implementation_custom: str | None = None
    all_gather_implementation_custom: str | None = None
    all_to_all_implementation_custom: str | None = None
    per_node_custom_implementation: tuple[tuple[int, str], ...] = ()

    def __post_init__(self) -> None:
        if self.scheduling_policy not in ("LIFO", "FIFO", "EXPLICIT"):
            raise InputError("scheduling-policy", self.scheduling_policy, "must be LIFO, FIFO or EXPLICIT")
        if self.collective_optimization not in ("baseline", "localBWAware"):
            raise InputError(
                "collective-optimization", self.collective_optimization, "must be baseline or localBWAware"
            )
        for key, value in (
            ("preferred-dataset-splits", self.preferred_dataset_splits),
            ("active-chunks-per-dimension", self.active_chunks_per_dimension),
        ):
            if value < 1:
                raise InputError(key, value, "must be an integer >= 1")
        for key, num in (
            ("endpoint-delay", self.endpoint_delay_ns),
            ("local-mem-bw", self.local_mem_bw_GBps),
            ("peak-perf", self.peak_perf_TFLOPS),
        ):
            if num < 0:
                raise InputError(key, num, "must be >= 0")
        for kind in ("all_reduce", "reduce_scatter", "all_gather", "all_to_all"):
            for name in getattr(self, f"{kind}_implementation"):
                check_algorithm(kind.replace("_", "-") + "-implementation", name)

    def implementation(self, comm: str) -> tuple[str, ...]:
        """Per-dimension algorithm list of ``comm`` (all_reduce, all_gather, ...)."""
        return tuple(getattr(self, f"{comm}_implementation"))


@dataclass(frozen=True)
class NetworkDimSpec:
    """One dimension of the analytical network (reference §2.2)."""

    kind: str
    npus_count: int
    bandwidth_GBps: float  # ASTRA-sim's network "GB/s" is GiB/s (reference §3)
    latency_ns: float

    def __post_init__(self) -> None:
        if self.kind not in TOPOLOGY_KINDS:
            raise InputError("topology", self.kind, f"must be one of {', '.join(TOPOLOGY_KINDS)}")
        if self.npus_count <= 1:
            raise InputError("npus_count", self.npus_count, "must be > 1")
        if not self.bandwidth_GBps > 0:
            raise InputError("bandwidth", self.bandwidth_GBps, "must be > 0")
        if not self.latency_ns >= 0:
            raise InputError("latency", self.latency_ns, "must be >= 0")


@dataclass(frozen=True)
class NetworkSpec:
    """A multi-dimensional analytical network; dim 0 varies fastest in the NPU id."""

    dims: tuple[NetworkDimSpec, ...]

    def __post_init__(self) -> None:
        if not self.dims:
            raise InputError("topology", [], "needs at least one dimension")

    @property
    def npus(self) -> int:
        """Total number of NPUs (product of ``npus_count``)."""
        total = 1
        for dim in self.dims:
            total *= dim.npus_count
        return total


MEMORY_TYPES = ("NO_MEMORY_EXPANSION", "PER_NODE_MEMORY_EXPANSION", "PER_NPU_MEMORY_EXPANSION", "MEMORY_POOL")


@dataclass(frozen=True)
class RemoteMemorySpec:
    """Analytical remote memory (reference §2.3): ``latency + size / bw`` ns per access."""

    memory_type: str = "NO_MEMORY_EXPANSION"
    remote_mem_latency_ns: int = 0
    remote_mem_bw_bytes_per_ns: int = 0
    num_nodes: int = 0
    num_npus_per_node: int = 0

    def __post_init__(self) -> None:
        if self.memory_type not in MEMORY_TYPES:
            raise InputError("memory-type", self.memory_type, f"must be one of {', '.join(MEMORY_TYPES)}")
        if self.memory_type != "NO_MEMORY_EXPANSION" and self.remote_mem_bw_bytes_per_ns <= 0:
            raise InputError("remote-mem-bw", self.remote_mem_bw_bytes_per_ns, "must be > 0")
        if self.remote_mem_latency_ns < 0:
            raise InputError("remote-mem-latency", self.remote_mem_latency_ns, "must be >= 0")
        if self.memory_type == "PER_NODE_MEMORY_EXPANSION" and self.num_npus_per_node < 1:
            raise InputError("num-npus-per-node", self.num_npus_per_node, "must be >= 1 for PER_NODE")


@dataclass(frozen=True)
class CommGroupsSpec:
    """Communicator groups (reference §2.4): group id (> 0) -> sorted NPU ids."""

    groups: tuple[tuple[int, tuple[int, ...]], ...] = field(default=())

    def members(self, group_id: int) -> tuple[int, ...] | None:
        """The NPUs of ``group_id``, or None if there is no such group."""
        for gid, npus in self.groups:
            if gid == group_id:
                return npus
        return None
