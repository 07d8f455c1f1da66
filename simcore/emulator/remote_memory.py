"""Analytical remote memory (reference §2.3, ``AnalyticalRemoteMemory.cc``).

Each access costs ``latency + tensor_size // remote-mem-bw`` ns (integer bytes per ns).
Contention: PER_NPU none; PER_NODE one transaction at a time per node (node = npu //
npus-per-node, FIFO); MEMORY_POOL one global FIFO; NO_MEMORY_EXPANSION rejects any access.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from simcore.errors import InputError

if TYPE_CHECKING:
    from simcore.emulator.context import AstraContext

__all__ = ["access_delay_ns"]

def access_delay_ns(ctx: AstraContext, npu: int, size: int, where: str) -> int:
    """Delay (ns, from now) until the access of ``size`` bytes by ``npu`` completes."""
    spec = ctx.remote_memory
    if spec.memory_type == "NO_MEMORY_EXPANSION":
        raise InputError(f"{where}", "MEM_LOAD/MEM_STORE", "remote memory is NO_MEMORY_EXPANSION")
    runtime = spec.remote_mem_latency_ns + size // spec.remote_mem_bw_bytes_per_ns
    if spec.memory_type == "PER_NPU_MEMORY_EXPANSION":
        return runtime
    server = npu // spec.num_npus_per_node if spec.memory_type == "PER_NODE_MEMORY_EXPANSION" else 0
    free_at = ctx.memory_free_at_ns
    now = ctx.events.now_ns
    start = max(now, free_at.get(server, 0))
    free_at[server] = start + runtime
    return start + runtime - now
