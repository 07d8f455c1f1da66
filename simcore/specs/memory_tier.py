"""RemoteMemorySpec: a remote (disaggregated) memory tier (``conf/memory/``).

Mirrors ASTRA-sim's remote-memory JSON (reference/astra-sim-and-chakra.md §2.3): ``kind`` is
the memory type (``none`` = NO_MEMORY_EXPANSION, ``per_npu``, ``per_node``, ``pool`` =
MEMORY_POOL), an access costs ``latency + bytes / bandwidth``, and the contention rule is
per type (per_npu: none; per_node: one FIFO per node; pool: one global FIFO). ASTRA-sim 2.0
uses such a tier to hold state offloaded from HBM (reference/methods-hap-ace-echo.md §4);
``offload_optimizer`` / ``offload_activations`` choose what lives there
(:mod:`simcore.memory.offload`).

Field names are the YAML keys. Validated on construction.
"""

from __future__ import annotations

from dataclasses import dataclass

from simcore.errors import require

__all__ = ["MEMORY_KINDS", "RemoteMemorySpec"]

MEMORY_KINDS = ("none", "per_npu", "per_node", "pool")


@dataclass(frozen=True)
class RemoteMemorySpec:
    """A remote memory tier.

    Attributes:
        name: preset name.
        kind: ``none``, ``per_npu``, ``per_node`` or ``pool`` (contention rule above).
        latency_ns: per access, ns.
        bandwidth_GBps: of one channel (one per GPU, per node or for the pool), decimal GB/s.
        capacity_gib: of one tier instance (per GPU, per node or the pool), GiB.
        offload_optimizer: optimizer state and fp32 master weights live in the tier.
        offload_activations: activations stashed for backward live in the tier.
    """

    name: str = "default"
    kind: str = "none"
    latency_ns: float = 0.0
    bandwidth_GBps: float = 0.0
    capacity_gib: float = 0.0
    offload_optimizer: bool = False
    offload_activations: bool = False

    def __post_init__(self) -> None:
        p = "memory."
        require(self.kind in MEMORY_KINDS, p + "kind", self.kind,
                f"must be one of {', '.join(MEMORY_KINDS)}")
        for key in ("latency_ns", "bandwidth_GBps", "capacity_gib"):
            value = getattr(self, key)
            require(isinstance(value, int | float) and not isinstance(value, bool)
                    and value >= 0, p + key, value, "must be a number >= 0")
        for key in ("offload_optimizer", "offload_activations"):
            require(isinstance(getattr(self, key), bool), p + key, getattr(self, key),
                    "must be true or false")
        offloads = self.offload_optimizer or self.offload_activations
        require(not offloads or self.kind != "none", p + "kind", self.kind,
                "offload_optimizer/offload_activations need a tier (per_npu, per_node, pool)")
        if offloads:
            require(self.bandwidth_GBps > 0, p + "bandwidth_GBps", self.bandwidth_GBps,
                    "must be > 0 when something is offloaded")
            require(self.capacity_gib > 0, p + "capacity_gib", self.capacity_gib,
                    "must be > 0 when something is offloaded")

    @property
    def offloads(self) -> bool:
        """True when anything lives in the tier."""
        return self.offload_optimizer or self.offload_activations
