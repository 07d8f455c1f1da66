"""ASTRA-sim's workload layer for one NPU (reference §1.1, §1.5; ``Workload.cc``, ``HardwareResource.cc``).

- A node is ready when all its data and control parents finished (feeder_v3).
- Ready nodes are issued in ascending node id while their hardware slot is free: at most one
  CPU op (``is_cpu_op``), one GPU compute op and one GPU communication op (collective or send)
  in flight; receives, metadata, invalid and remote-memory nodes take no slot.
- COMP: roofline (``roofline-enabled`` and not a CPU op): t = num_ops / min(local-mem-bw*1e9*OI,
  peak-perf*1e12) s with OI = num_ops / tensor_size, truncated to ns (tensor_size 0: finishes at
  once); otherwise replay: ``duration_micros * 1000`` ns, 1 ns if 0. GPU compute time is summed.
- COMM_COLL: all-reduce / all-gather / reduce-scatter / all-to-all go to the system layer (native
  or custom algorithm); broadcast is replayed from its duration; other types are errors.
- SEND completes when the message arrives (both callbacks fire on arrival); RECV when its
  matching message has arrived.
- MEM_LOAD / MEM_STORE go to the analytical remote memory.
The NPU finishes when its last node finishes; exposed communication = finish - GPU compute time.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from simcore.emulator.program import NodeType, RankProgram
from simcore.errors import InputError

if TYPE_CHECKING:
    from simcore.emulator.context import AstraContext
    from simcore.emulator.system import SystemLayer

__all__ = ["WorkloadRank"]

_COMM = {0: "all_reduce", 2: "all_gather", 6: "all_to_all", 7: "reduce_scatter"}
_FREE, _COMP, _CPU, _COMMSLOT = 0, 1, 2, 3


class WorkloadRank:
    """Issues one rank's nodes; ``finish_ns`` and ``gpu_compute_ns`` hold the results."""

    def __init__(self, npu: int, program: RankProgram, ctx: AstraContext, system: SystemLayer) -> None:
        self.npu = npu
        self.program = program
        self.ctx = ctx
        self.system = system
        self.finish_ns = 0
        self.gpu_compute_ns = 0
        self.completed = 0
        self._ids = program.ids.tolist()
        self._types = program.types.tolist()
        self._pending = (program.parents_ptr[1:] - program.parents_ptr[:-1]).tolist()
        cptr, cidx = program.children()
        self._cptr, self._cidx = cptr.tolist(), cidx.tolist()
        cpu = program.is_cpu_op.tolist()
        self._slot = [
            _CPU if cpu[i] else _COMP if t == NodeType.COMP else _COMMSLOT if t in (NodeType.SEND, NodeType.COLL)
            else _FREE for i, t in enumerate(self._types)
        ]
        self._heaps: list[list[int]] = [[], [], [], []]
        order = np.argsort(program.ids, kind="stable")
        self._node_at = order.tolist()  # rank in id order -> node index
        key = np.empty_like(order)
        key[order] = np.arange(order.shape[0])
        self._key = key.tolist()  # node index -> rank in id order
        self._groups: dict[int, tuple[int, ...] | None] = {}
        self._coll_attrs: tuple[list[int], list[int], list[int]] | None = None
        self._busy = [False, False, False, False]
        self._runtime = self._compute_runtimes()
        self.collective_handler: Callable[..., None] = system.generate
        self._per_node = dict(ctx.system.per_node_custom_implementation)

    def _compute_runtimes(self) -> list[int]:
        """Runtime (ns) of every COMP / replayed node, precomputed (roofline or replay).

        Vectorized with the same IEEE double operations, in the same order, as the scalar
        formula ``int(num_ops / min(bw * (num_ops / tensor_size), peak) * 1e9)``.
        """
        spec = self.ctx.system
        program = self.program
        dur = program.duration_us
        replay = np.where(dur > 0, dur * 1000, 1)
        roof = (program.types == NodeType.COMP) & ~program.is_cpu_op
        if not spec.roofline_enabled or spec.replay_only or not roof.any():
            return replay.tolist()
        bw, peak = spec.local_mem_bw_GBps * 1e9, spec.peak_perf_TFLOPS * 1e12
        if bw <= 0 or peak <= 0:
            raise InputError("roofline-enabled", 1, "needs local-mem-bw > 0 and peak-perf > 0")
        ops = program.attr("num_ops").astype(np.float64)
        size = program.attr("tensor_size").astype(np.float64)
        valid = roof & (ops > 0) & (size > 0)
        with np.errstate(divide="ignore", invalid="ignore"):
            perf = np.minimum(bw * (ops / size), peak)
            runtime = (ops / perf * 1e9).astype(np.int64, copy=False) if valid.any() else replay
        return np.where(valid, runtime, np.where(roof, 0, replay)).tolist()

    # ------------------------------------------------------------------ issue loop
    def start(self) -> None:
        """Make the root nodes ready and issue what can run at t = 0."""
        for i, pending in enumerate(self._pending):
            if pending == 0:
                heapq.heappush(self._heaps[self._slot[i]], self._key[i])
        self.issue()

    def issue(self) -> None:
        """Issue ready nodes in ascending id while their slot is free (``issue_dep_free_nodes``).

        Heaps hold each node's rank in id order, so the smallest key is the smallest node id.
        """
        free, comp, cpu, comm = self._heaps
        busy, node_at = self._busy, self._node_at
        pop = heapq.heappop
        while True:
            heap = free if free else None
            if comp and not busy[_COMP] and (heap is None or comp[0] < heap[0]):
                heap = comp
            if cpu and not busy[_CPU] and (heap is None or cpu[0] < heap[0]):
                heap = cpu
            if comm and not busy[_COMMSLOT] and (heap is None or comm[0] < heap[0]):
                heap = comm
            if heap is None:
                return
            i = node_at[pop(heap)]
            if heap is comp:
                busy[_COMP] = True
                runtime = self._runtime[i]
                self.gpu_compute_ns += runtime
                self.ctx.events.after(runtime, self.finish, i)
                continue
            if heap is not free:
                busy[_CPU if heap is cpu else _COMMSLOT] = True
            self._dispatch(i)

    def _dispatch(self, i: int) -> None:
        t = self._types[i]
        if t == NodeType.COMP:  # a CPU compute op (GPU ones are issued inline above)
            self.ctx.events.after(self._runtime[i], self.finish, i)
        elif t == NodeType.COLL:
            self._collective(i)
        elif t == NodeType.SEND:
            self._send(i)
        elif t == NodeType.RECV:
            self._recv(i)
        elif t in (NodeType.MEM_LOAD, NodeType.MEM_STORE):
            self.ctx.events.after(0, self._remote_memory, i)
        else:  # METADATA, INVALID: finished at once
            self.finish(i)

    def finish(self, i: int) -> None:
        """Node ``i`` finished now: free its slot, release its children, issue more."""
        cls = self._slot[i]
        if cls != _FREE:
            self._busy[cls] = False
        self.completed += 1
        self.finish_ns = self.ctx.events.now_ns
        pending, key, slot, heaps, cidx = self._pending, self._key, self._slot, self._heaps, self._cidx
        for k in range(self._cptr[i], self._cptr[i + 1]):
            c = cidx[k]
            pending[c] -= 1
            if pending[c] == 0:
                heapq.heappush(heaps[slot[c]], key[c])
        self.issue()

    # ------------------------------------------------------------------ node kinds
    def _where(self, i: int) -> str:
        return f"{self.program.source}:node {self._ids[i]}"

    def _collective(self, i: int) -> None:
        program, ctx = self.program, self.ctx
        if self._coll_attrs is None:  # python lists: indexing numpy scalars per node is slow
            self._coll_attrs = tuple(program.attr(n).tolist() for n in ("comm_type", "comm_size", "comm_priority"))
        types, sizes, priorities = self._coll_attrs
        comm_type = types[i]
        if self.ctx.system.replay_only or comm_type == 5:
            self.ctx.events.after(self._runtime[i], self.finish, i)
            return
        if comm_type < 0:  # absent (a negative value given is refused when the program is built)
            raise InputError(f"{self._where(i)}:comm_type", None, "a collective needs comm_type")
        if comm_type not in _COMM:
            raise InputError(f"{self._where(i)}:comm_type", comm_type, "unsupported collective comm type")
        group = self.group_of(i)
        size = sizes[i]
        if size < 0:
            raise InputError(f"{self._where(i)}:comm_size", None, "a collective needs comm_size")
        priority = priorities[i]
        comm = _COMM[comm_type]
        spec = ctx.system
        custom = self._per_node.get(self._ids[i]) or getattr(spec, f"{comm}_implementation_custom")
        if custom is not None:
            self.system.generate(comm, size, group, program.involved_dim[i], priority, self.finish, i, custom)
        else:
            self.collective_handler(comm, size, group, program.involved_dim[i], priority, self.finish, i)

    def group_of(self, i: int) -> tuple[int, ...] | None:
        """Members of node ``i``'s communicator group (None = all NPUs)."""
        code = int(self.program.pg_codes[i])
        if code in self._groups:
            return self._groups[code]
        group = self._lookup_group(i)
        self._groups[code] = group
        return group

    def _lookup_group(self, i: int) -> tuple[int, ...] | None:
        pg = self.program.pg_name(i)
        if pg is None or pg in ("", "0"):
            return None
        if not pg.isdigit():
            raise InputError(f"{self._where(i)}:pg_name", pg, "must name a communicator group id")
        members = self.ctx.groups.members(int(pg))
        if members is None:
            raise InputError(f"{self._where(i)}:pg_name", pg, "no such group in the comm-group configuration")
        if self.npu not in members:
            raise InputError(f"{self._where(i)}:pg_name", pg,
                             f"NPU {self.npu} is not a member of this communicator group {list(members)[:8]}")
        return members

    def _peer(self, i: int, name: str) -> int:
        peer = int(self.program.attr(name)[i])
        if peer < 0:
            raise InputError(f"{self._where(i)}:{name}", None, "send/recv needs its peer")
        self.ctx.topology.check_npu(f"{self._where(i)}:{name}", peer)
        return peer

    def _send(self, i: int) -> None:
        dst = self._peer(i, "comm_dst")
        prog = self.program
        tag, size = int(prog.attr("comm_tag")[i]), int(prog.attr("comm_size")[i])
        self.ctx.messenger.send(self.npu, self.ctx.rep[dst], tag, max(size, 0), self.finish, i, route_dst=dst)

    def _recv(self, i: int) -> None:
        src = self._peer(i, "comm_src")
        prog = self.program
        tag, size = int(prog.attr("comm_tag")[i]), int(prog.attr("comm_size")[i])
        self.ctx.messenger.recv(self.ctx.rep[src], self.npu, tag, max(size, 0), self.finish, i)

    def _remote_memory(self, i: int) -> None:
        from simcore.emulator.remote_memory import access_delay_ns

        size = int(self.program.attr("tensor_size")[i])
        delay = access_delay_ns(self.ctx, self.npu, max(size, 0), self._where(i))
        self.ctx.events.after(delay, self.finish, i)
