"""The one definition of the system ASTRA-sim sees for a :class:`~simcore.specs.system.SystemSpec`.

``simsweep chakra export`` writes it (``<prefix>.system.json``, ``<prefix>.network.yml``) and the
``astra`` fidelity costs with it (:mod:`.costs`, :mod:`.machine`), so the two cannot drift
(reference/astra-sim-and-chakra.md §2.1 system JSON, §3 analytical network):

- network: the scale-up dimension (GPUs of a node, or of the job when it is smaller than a
  node) and, with more than one node, the scale-out
  dimension; its ``bandwidth`` in ASTRA-sim's "GB/s", which are GiB/s (our GB/s x 1e9 / 2^30,
  6 decimals), ``latency`` in ns;
- system: ``ring`` on every dimension for every collective, ``LIFO`` scheduling,
  ``localBWAware`` collective optimization, ``preferred-dataset-splits`` 4,
  ``active-chunks-per-dimension`` 1, ``endpoint-delay`` 10, ``local-mem-bw`` = the accelerator's
  HBM GB/s, no roofline.
"""

from __future__ import annotations

from typing import Any

from simcore.emulator.specs import NetworkDimSpec, NetworkSpec
from simcore.emulator.specs import SystemSpec as AstraSystemSpec
from simcore.errors import InputError, require
from simcore.specs.system import SystemSpec, TopologyDimSpec

__all__ = ["DATASET_SPLITS", "ENDPOINT_DELAY_NS", "GIB_PER_GB", "NetDim", "astra_system_spec",
           "network_dims", "network_spec", "network_yaml", "system_json"]

GIB_PER_GB = 1e9 / 2**30  # ASTRA-sim's network "GB/s" is GiB/s (reference §3)
DATASET_SPLITS = 4  # preferred-dataset-splits
ENDPOINT_DELAY_NS = 10  # endpoint-delay
ACTIVE_CHUNKS = 1  # active-chunks-per-dimension
SCHEDULING = "LIFO"
OPTIMIZATION = "localBWAware"

#: one network dimension: (topology kind, NPUs, bandwidth in GiB/s rounded to 6 decimals, ns)
NetDim = tuple[str, int, float, float]


def _dims(system: SystemSpec) -> list[tuple[TopologyDimSpec, int]]:
    require(not system.scaleout_dims, "system.scaleout_dims",
            [d.size for d in system.scaleout_dims],
            "not exported: the ASTRA-sim system has two network dimensions (scale-up, scale-out)")
    # a job smaller than a node spans only its own GPUs of the scale-up domain: ASTRA-sim
    # reads one trace per NPU of the network (npus_count multiplied over the dimensions)
    dims = [(system.scaleup, min(system.gpus_per_node, system.num_gpus))]
    if system.num_nodes > 1:
        dims.append((system.scaleout, system.num_nodes))
    return dims


def network_dims(system: SystemSpec) -> tuple[NetDim, ...]:
    """The analytical network's dimensions, as ASTRA-sim reads them back from the YAML."""
    return tuple((d.kind, n, round(d.bandwidth_GBps * GIB_PER_GB, 6), float(d.latency_ns))
                 for d, n in _dims(system))


def network_spec(dims: tuple[NetDim, ...]) -> NetworkSpec:
    """The emulator's network spec of :func:`network_dims`."""
    return NetworkSpec(tuple(NetworkDimSpec(k, n, bw, lat) for k, n, bw, lat in dims))


def astra_system_spec(num_dims: int, hbm_GBps: float) -> AstraSystemSpec:
    """The emulator's system spec for ``num_dims`` dimensions and ``local-mem-bw`` ``hbm_GBps``."""
    algos = ("ring",) * num_dims
    return AstraSystemSpec(
        scheduling_policy=SCHEDULING, collective_optimization=OPTIMIZATION,
        preferred_dataset_splits=DATASET_SPLITS, active_chunks_per_dimension=ACTIVE_CHUNKS,
        endpoint_delay_ns=ENDPOINT_DELAY_NS, local_mem_bw_GBps=hbm_GBps,
        all_reduce_implementation=algos, all_gather_implementation=algos,
        reduce_scatter_implementation=algos, all_to_all_implementation=algos)


def _exportable(system: SystemSpec) -> list[tuple[TopologyDimSpec, int]]:
    """The network dimensions of ``system``, refusing what ASTRA-sim's inputs cannot describe:
    mixed device pools (one ``local-mem-bw``, one bandwidth per dimension: the files would carry
    pool 0's hardware while compute durations differ per pool; the astra fidelity refuses them
    too) and a dimension of one NPU (the analytical network needs ``npus_count`` > 1, reference
    §2.2)."""
    if not system.uniform_devices:
        raise InputError("system.pools", [p.accelerator.name if p.accelerator else None for p in system.devices],
                         "not exported: ASTRA-sim has one device type (one local-mem-bw, one bandwidth per "
                         "network dimension) and these pools differ in accelerator, calibration or scale-up; "
                         "simulate them with fidelity=calibrated")
    dims = _dims(system)
    if dims[0][1] < 2:
        key, value = (("system.num_gpus", system.num_gpus) if system.num_gpus < 2
                      else ("system.gpus_per_node", system.gpus_per_node))
        raise InputError(key, value, "not exported: ASTRA-sim's analytical network needs more than one NPU "
                                     "per dimension (npus_count > 1)")
    return dims


def system_json(system: SystemSpec) -> dict[str, Any]:
    """``<prefix>.system.json`` (an InputError for what the files cannot describe, :func:`_exportable`)."""
    algos = ["ring"] * len(_exportable(system))
    return {
        "scheduling-policy": SCHEDULING, "endpoint-delay": ENDPOINT_DELAY_NS,
        "active-chunks-per-dimension": ACTIVE_CHUNKS, "preferred-dataset-splits": DATASET_SPLITS,
        "all-reduce-implementation": algos, "all-gather-implementation": algos,
        "reduce-scatter-implementation": algos, "all-to-all-implementation": algos,
        "collective-optimization": OPTIMIZATION,
        "local-mem-bw": system.accelerator.hbm_bandwidth_GBps, "boost-mode": 0,
        "roofline-enabled": 0, "peak-perf": system.accelerator.peak_tflops_bf16,
    }


def network_yaml(system: SystemSpec) -> str:
    """``<prefix>.network.yml`` (ASTRA-sim's analytical network input; :func:`_exportable`)."""
    dims = _exportable(system)
    return (f"topology: [ {', '.join(d.kind for d, _ in dims)} ]\n"
            f"npus_count: [ {', '.join(str(n) for _, n in dims)} ]\n"
            f"bandwidth: [ {', '.join(f'{d.bandwidth_GBps * GIB_PER_GB:.6f}' for d, _ in dims)} ]\n"
            f"latency: [ {', '.join(f'{d.latency_ns:g}' for d, _ in dims)} ]\n")
