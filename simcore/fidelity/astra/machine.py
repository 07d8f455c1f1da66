"""A collective over the whole machine in ``fidelity=astra``: ASTRA-sim's system layer, run alone.

When a communicator group holds every NPU, ASTRA-sim does not use a comm-group ring: it runs the
collective over the network's dimensions (``localBWAware``: reduce-scatter on the scale-up
dimension, all-reduce across nodes, all-gather back), its chunks pipelined through per-dimension
queues (reference/astra-sim-and-chakra.md §1.2, :mod:`simcore.emulator.plan`). There is no closed
form for that pipeline, so the collective is simulated once in isolation with
:class:`simcore.emulator.system.SystemLayer` on the system ``simsweep chakra export`` writes, exactly
as ``simsweep astra`` does for a folded congestion-unaware run, once per distinct network
(:mod:`simcore.fidelity.astra.export_system`).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import numpy as np
from numpy.typing import NDArray

from simcore.emulator.context import make_context
from simcore.emulator.network.topology import Topology
from simcore.emulator.system import SystemLayer
from simcore.fidelity.astra.export_system import (
    NetDim,
    astra_system_spec,
    network_dims,
    network_spec,
)
from simcore.specs.system import SystemSpec

__all__ = ["machine_collective_ns"]


@lru_cache(maxsize=4096)
def _run(comm: str, size: int, dims: tuple[NetDim, ...], mem_GBps: float) -> int:
    spec = astra_system_spec(len(dims), mem_GBps)
    topo = Topology(network_spec(dims))
    everyone = tuple(range(topo.npus))
    ctx = make_context(spec, topo, "unaware", [0] * topo.npus)
    SystemLayer(0, ctx).generate(comm, size, everyone, None, 0, lambda _: None, None)
    return ctx.events.run()


def machine_collective_ns(systems: Sequence[SystemSpec], comm: str, size: int) -> NDArray[np.float64]:
    """(B,) ns of ``comm`` of ``size`` bytes over all NPUs of each system."""
    out = np.empty(len(systems))
    for b, s in enumerate(systems):
        out[b] = _run(comm, size, network_dims(s), float(s.accelerator.hbm_bandwidth_GBps))
    return out
