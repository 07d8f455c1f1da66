"""A collective over the whole machine in ``fidelity=astra``: ASTRA-sim's system layer, run alone.

When a communicator group holds every NPU, ASTRA-sim does not use a comm-group ring: it runs the
collective over the network's dimensions (``localBWAware``: reduce-scatter on the scale-up
dimension, all-reduce across nodes, all-gather back), its chunks pipelined through per-dimension
queues (reference/astra-sim-and-chakra.md §1.2, :mod:`simcore.emulator.plan`). There is no closed
form for that pipeline, so the collective is simulated once in isolation with
:class:`simcore.emulator.system.SystemLayer` on the system ``simsweep chakra export`` writes, exactly
as ``simsweep astra`` does for a folded congestion-unaware run, once per distinct network.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import numpy as np
from numpy.typing import NDArray

from simcore.emulator.context import make_context
from simcore.emulator.network.topology import Topology
from simcore.emulator.specs import NetworkDimSpec, NetworkSpec
from simcore.emulator.specs import SystemSpec as AstraSystemSpec
from simcore.emulator.system import SystemLayer
from simcore.specs.system import SystemSpec

__all__ = ["machine_collective_ns"]

_GIB_PER_GB = 1e9 / 2**30

_Dim = tuple[str, int, float, float]


@lru_cache(maxsize=4096)
def _run(comm: str, size: int, dims: tuple[_Dim, ...], mem_GBps: float) -> int:
    algos = ("ring",) * len(dims)
    spec = AstraSystemSpec(
        scheduling_policy="LIFO", collective_optimization="localBWAware",
        preferred_dataset_splits=4, active_chunks_per_dimension=1, endpoint_delay_ns=10,
        local_mem_bw_GBps=mem_GBps, all_reduce_implementation=algos,
        all_gather_implementation=algos, reduce_scatter_implementation=algos,
        all_to_all_implementation=algos)
    topo = Topology(NetworkSpec(tuple(NetworkDimSpec(k, n, bw, lat) for k, n, bw, lat in dims)))
    everyone = tuple(range(topo.npus))
    ctx = make_context(spec, topo, "unaware", [0] * topo.npus)
    SystemLayer(0, ctx).generate(comm, size, everyone, None, 0, lambda _: None, None)
    return ctx.events.run()


def machine_collective_ns(systems: Sequence[SystemSpec], comm: str, size: int) -> NDArray[np.float64]:
    """(B,) ns of ``comm`` of ``size`` bytes over all NPUs of each system."""
    out = np.empty(len(systems))
    for b, s in enumerate(systems):
        links = [(s.scaleup, s.gpus_per_node)] + ([(s.scaleout, s.num_nodes)] if s.num_nodes > 1 else [])
        dims = tuple((d.kind, n, round(d.bandwidth_GBps * _GIB_PER_GB, 6), float(d.latency_ns))
                     for d, n in links)
        out[b] = _run(comm, size, dims, float(s.accelerator.hbm_bandwidth_GBps))
    return out
