"""Cost and power of a training cluster, vectorized over a batch of design points.

Model (all arrays have shape (B,), one entry per design point):

* accelerators: ``num_gpus x price`` and ``num_gpus x TDP`` (power at TDP: an upper bound, as
  capacity planning does), summed over the device pools of the cluster (``count x price`` of
  each pool); price and TDP come from each pool's accelerator (AcceleratorSpec);
* hosts: a price and power per GPU slot (CPUs, DRAM, storage, chassis, fans of a server, divided
  by its GPUs), so the host share does not depend on how large the scale-up domain is;
* scale-up network (NVLink-class): cost and power proportional to the per-GPU scale-up bandwidth,
  times ``2L - 1`` switch hops per GPU, where ``L`` is the number of tiers of a folded Clos over
  the scale-up domain (one tier up to the switch reach ``scaleup_radix_gpus``);
* scale-out network (NIC + optics + switches): a full-bisection folded Clos (fat tree) of radix-k
  switches over all GPUs. ``L`` tiers serve ``k``, ``k**2/2``, ``k**3/4`` endpoints; each GPU then
  owns ``2L - 1`` switch ports and ``L`` links (two transceivers each). NIC, port and transceiver
  cost and power scale linearly with the per-GPU scale-out bandwidth (one direction), the usual
  cost-per-bandwidth model of network co-design studies (e.g. ASTRA-sim 2.0's network cost
  discussion; Al-Fares et al., SIGCOMM'08, for the fat-tree port counts);
* facility: IT power x PUE; electricity at a flat price;
* cost per hour: capital amortized linearly over ``amortization_years`` plus electricity, or a
  flat rental price per GPU-hour when ``gpu_hour_usd`` is set.

The prices and powers themselves live in ``conf/system/accelerator/*.yaml`` (accelerator) and
``conf/search/default.yaml`` (``search.cost``: everything else), each with its source; this
module holds no numbers except unit conversions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from numpy.typing import ArrayLike, NDArray

from simcore.errors import require

HOURS_PER_YEAR = 24.0 * 365.0

__all__ = [
    "ClusterCost",
    "ClusterCostSpec",
    "ClusterLike",
    "cluster_cost",
    "fat_tree_tiers",
    "system_cost",
]


class ClusterLike(Protocol):
    """The cluster attributes :func:`system_cost` reads (``simcore.specs.system.SystemSpec``;
    read structurally so this module stays below the specs in the layering)."""

    @property
    def num_gpus(self) -> int: ...  # noqa: D102

    @property
    def gpus_per_node(self) -> int: ...  # noqa: D102

    @property
    def scaleup(self) -> Any: ...  # noqa: D102

    @property
    def scaleout(self) -> Any: ...  # noqa: D102

    @property
    def devices(self) -> tuple[Any, ...]: ...  # noqa: D102


@dataclass(frozen=True)
class ClusterCostSpec:
    """Prices and powers of everything around the accelerators (see module docstring)."""

    host_usd_per_gpu: float
    host_w_per_gpu: float
    scaleup_usd_per_GBps: float
    scaleup_w_per_GBps: float
    scaleup_radix_gpus: int
    nic_usd_per_GBps: float
    nic_w_per_GBps: float
    switch_port_usd_per_GBps: float
    switch_port_w_per_GBps: float
    transceiver_usd_per_GBps: float
    transceiver_w_per_GBps: float
    switch_radix: int
    electricity_usd_per_kwh: float
    pue: float
    amortization_years: float
    gpu_hour_usd: float | None = None

    def __post_init__(self) -> None:
        for name in (
            "host_usd_per_gpu", "host_w_per_gpu", "scaleup_usd_per_GBps", "scaleup_w_per_GBps",
            "nic_usd_per_GBps", "nic_w_per_GBps", "switch_port_usd_per_GBps",
            "switch_port_w_per_GBps", "transceiver_usd_per_GBps", "transceiver_w_per_GBps",
            "electricity_usd_per_kwh",
        ):
            value = getattr(self, name)
            require(value >= 0, name, value, "must be >= 0")
        require(self.switch_radix >= 4 and self.switch_radix % 2 == 0, "switch_radix",
                self.switch_radix, "must be an even integer >= 4")
        require(self.scaleup_radix_gpus >= 2 and self.scaleup_radix_gpus % 2 == 0,
                "scaleup_radix_gpus", self.scaleup_radix_gpus, "must be an even integer >= 2")
        require(self.pue >= 1.0, "pue", self.pue, "must be >= 1")
        require(self.amortization_years > 0, "amortization_years", self.amortization_years,
                "must be > 0")
        if self.gpu_hour_usd is not None:
            require(self.gpu_hour_usd >= 0, "gpu_hour_usd", self.gpu_hour_usd, "must be >= 0")


@dataclass(frozen=True)
class ClusterCost:
    """Cost and power of B clusters; every field has shape (B,)."""

    capex_usd: NDArray[np.float64]
    it_power_w: NDArray[np.float64]
    facility_power_w: NDArray[np.float64]
    usd_per_hour: NDArray[np.float64]
    capex_by_part_usd: dict[str, NDArray[np.float64]]
    power_by_part_w: dict[str, NDArray[np.float64]]

    def cost_usd_per_iter(self, iteration_time_s: ArrayLike) -> NDArray[np.float64]:
        """Dollars spent on one iteration of ``iteration_time_s`` seconds, shape (B,)."""
        return self.usd_per_hour * np.asarray(iteration_time_s, dtype=np.float64) / 3600.0

    def energy_kwh_per_iter(self, iteration_time_s: ArrayLike) -> NDArray[np.float64]:
        """Facility energy of one iteration in kWh, shape (B,)."""
        time_h = np.asarray(iteration_time_s, dtype=np.float64) / 3600.0
        return self.facility_power_w / 1000.0 * time_h


def fat_tree_tiers(num_endpoints: ArrayLike, radix: int) -> NDArray[np.int64]:
    """Tiers of a full-bisection folded Clos of ``radix``-port switches, shape (B,).

    One tier serves ``radix`` endpoints, two tiers ``radix**2 / 2``, L tiers
    ``2 * (radix / 2) ** L`` (Al-Fares et al., SIGCOMM'08: a 3-tier k-ary fat tree serves k**3/4).
    A single endpoint needs no switch (0 tiers).
    """
    n = np.asarray(num_endpoints, dtype=np.float64)
    half = radix / 2.0
    tiers = np.ceil(np.log(np.maximum(n, 1.0) / 2.0) / np.log(half) - 1e-9)
    tiers = np.maximum(tiers, 1.0)
    return np.where(n <= 1.0, 0, tiers).astype(np.int64)


def cluster_cost(
    num_gpus: ArrayLike,
    gpus_per_node: ArrayLike,
    scaleup_bandwidth_GBps: ArrayLike,
    scaleout_bandwidth_GBps: ArrayLike,
    accelerator_price_usd: ArrayLike,
    accelerator_tdp_w: ArrayLike,
    spec: ClusterCostSpec,
    pool_gpus: ArrayLike | None = None,
) -> ClusterCost:
    """Capital cost, power and hourly cost of B clusters.

    Args:
        num_gpus: accelerators per cluster, shape (B,) or scalar.
        gpus_per_node: accelerators per node (= scale-up domain size), shape (B,) or scalar.
        scaleup_bandwidth_GBps: per-GPU scale-up bandwidth, one direction, GB/s.
        scaleout_bandwidth_GBps: per-GPU scale-out (NIC) bandwidth, one direction, GB/s.
        accelerator_price_usd: price of one accelerator, USD; (D, B) with ``pool_gpus``.
        accelerator_tdp_w: thermal design power of one accelerator, W; (D, B) with ``pool_gpus``.
        spec: prices and powers of hosts, network and facility.
        pool_gpus: accelerators per device pool, (D, B) summing to ``num_gpus`` over D; None =
            one pool of ``num_gpus``. The accelerator share is summed over the pools.
    """
    if pool_gpus is None:
        n, per_node, bw_up, bw_out, price, tdp = np.broadcast_arrays(
            *(np.atleast_1d(np.asarray(a, dtype=np.float64)) for a in (
                num_gpus, gpus_per_node, scaleup_bandwidth_GBps, scaleout_bandwidth_GBps,
                accelerator_price_usd, accelerator_tdp_w))
        )
        acc_usd, acc_w = n * price, n * tdp
    else:
        counts, price, tdp = np.broadcast_arrays(
            *(np.atleast_2d(np.asarray(a, dtype=np.float64))
              for a in (pool_gpus, accelerator_price_usd, accelerator_tdp_w)))
        acc_usd, acc_w = np.sum(counts * price, axis=0), np.sum(counts * tdp, axis=0)
        n, per_node, bw_up, bw_out, acc_usd, acc_w = np.broadcast_arrays(
            *(np.atleast_1d(np.asarray(a, dtype=np.float64)) for a in (
                num_gpus, gpus_per_node, scaleup_bandwidth_GBps, scaleout_bandwidth_GBps,
                acc_usd, acc_w))
        )
        require(bool(np.all(counts.sum(axis=0) == n)), "pool_gpus", counts.tolist(),
                "pool counts must sum to num_gpus")
    nodes = np.ceil(n / per_node)
    up_hops = 2 * fat_tree_tiers(np.minimum(per_node, n), spec.scaleup_radix_gpus) - 1
    up_hops = np.maximum(up_hops, 0)
    multi_node = nodes > 1
    out_tiers = np.where(multi_node, fat_tree_tiers(n, spec.switch_radix), 0)
    ports = np.maximum(2 * out_tiers - 1, 0)
    transceivers = 2 * out_tiers
    capex = {
        "accelerators": acc_usd,
        "hosts": n * spec.host_usd_per_gpu,
        "scaleup": n * bw_up * up_hops * spec.scaleup_usd_per_GBps,
        "nics": np.where(multi_node, n * bw_out * spec.nic_usd_per_GBps, 0.0),
        "switches": n * bw_out * ports * spec.switch_port_usd_per_GBps,
        "transceivers": n * bw_out * transceivers * spec.transceiver_usd_per_GBps,
    }
    power = {
        "accelerators": acc_w,
        "hosts": n * spec.host_w_per_gpu,
        "scaleup": n * bw_up * up_hops * spec.scaleup_w_per_GBps,
        "nics": np.where(multi_node, n * bw_out * spec.nic_w_per_GBps, 0.0),
        "switches": n * bw_out * ports * spec.switch_port_w_per_GBps,
        "transceivers": n * bw_out * transceivers * spec.transceiver_w_per_GBps,
    }
    capex_usd = np.sum(list(capex.values()), axis=0)
    it_power_w = np.sum(list(power.values()), axis=0)
    facility_w = it_power_w * spec.pue
    energy_usd_per_hour = facility_w / 1000.0 * spec.electricity_usd_per_kwh
    if spec.gpu_hour_usd is not None:
        usd_per_hour = n * spec.gpu_hour_usd
    else:
        usd_per_hour = capex_usd / (spec.amortization_years * HOURS_PER_YEAR) + energy_usd_per_hour
    return ClusterCost(capex_usd, it_power_w, facility_w, usd_per_hour, capex, power)


def system_cost(systems: Sequence[ClusterLike], spec: ClusterCostSpec) -> ClusterCost:
    """:func:`cluster_cost` of B systems read from their specs, the accelerator share summed
    over each system's device pools (systems with fewer pools are padded with empty ones)."""
    devices = [s.devices for s in systems]
    depth = max(len(d) for d in devices)

    def grid(get: Callable[[Any], float]) -> list[list[float]]:
        return [[float(get(dev[d])) if d < len(dev) else 0.0 for dev in devices]
                for d in range(depth)]

    price = grid(lambda pool: pool.accelerator.price_usd)
    tdp = grid(lambda pool: pool.accelerator.tdp_w)
    return cluster_cost(
        num_gpus=[s.num_gpus for s in systems],
        gpus_per_node=[s.gpus_per_node for s in systems],
        scaleup_bandwidth_GBps=[s.scaleup.bandwidth_GBps for s in systems],
        scaleout_bandwidth_GBps=[s.scaleout.bandwidth_GBps for s in systems],
        accelerator_price_usd=price[0] if depth == 1 else price,
        accelerator_tdp_w=tdp[0] if depth == 1 else tdp,
        spec=spec,
        pool_gpus=None if depth == 1 else grid(lambda pool: pool.count),
    )
