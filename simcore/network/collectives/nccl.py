"""NCCL-aware collective and point-to-point time, vectorized over B systems.

Model (Echo's white-box decomposition, reference/methods-hap-ace-echo.md §3.3, reduced to the
terms a configuration determines; bus bandwidth as defined by nccl-tests,
reference/peers-hardware-measurements.md B.9)::

    t = collective_base_latency                        # setup + launch (Echo's alpha)
      + steps * (collective_step_latency + hop_latency) # pipeline fill of the ring
      + traffic_factor * size / busbw                   # bandwidth term

* ``size`` is the full buffer per rank (nccl-tests' "size"); ``traffic_factor`` is nccl-tests'
  bus-bandwidth factor: all-reduce ``2(n-1)/n``; reduce-scatter / all-gather ``(n-1)/n``;
  broadcast / reduce ``1``.
* A group of ``n`` ranks with ``k`` members per scale-up domain spans ``M = n / k`` nodes.
  Inside one node the bus bandwidth is the scale-up line rate times ``scaleup_efficiency``
  (A100 NVSwitch: 229 GB/s measured of 300; H100 ring: 370 of 450), and all-reduce may gain
  ``switch_allreduce_gain`` from in-switch reduction (H100 NVLS: 475 vs 370). Across nodes
  NCCL runs one ring per NIC: ``k`` members per node drive ``k`` NICs, so
  ``busbw = min(scale-up busbw, k * scaleout_bw * scaleout_efficiency * scaleout_ring_efficiency)``
  (one member per node: one NIC). The rings reach less than the single-NIC rate: 8 A100 with
  8 x 200 Gb/s per node measure ~125 GB/s on 2-16 nodes (Echo's nccl-tests logs), not 8 x 23.5.
* Group size inside a node: a group of ``k`` ranks reaches ``1 - scaleup_pair_loss / (k-1)``
  of the 8-GPU bus bandwidth (fewer NCCL channels between few GPUs; A100 NVSwitch, nccl-tests
  at 1 GiB: 2 GPUs 206, 4 GPUs 225, 8 GPUs 231 GB/s, Echo's logs,
  shared/validation/calibration/echo_nccl_a100, and vTrain's LUT, .../vtrain_single).
* Ring steps: ``(k-1)`` scale-up hops and ``(M-1)`` scale-out hops per pass; two passes for
  all-reduce. Across nodes NCCL's all-reduce switches to its tree for latency-bound sizes
  (all-gather / reduce-scatter have only the ring, whose latency grows with M), so when
  ``scaleout_tree_level_latency_us`` is calibrated the inter-node latency term is the smaller
  of the ring's ``M-1`` steps and ``ceil(log2 M)`` tree levels (Echo's logs: the 64 KiB
  all-reduce takes 73 / 107 / 146 / 185 us on 2 / 4 / 8 / 16 nodes, growing with log2 M).
* All-to-all: every rank sends ``size/n`` to every peer; bytes to peers in other nodes leave
  through the rank's own NIC, the rest through the scale-up fabric at
  ``scaleup_alltoall_ratio`` of the other collectives' bandwidth (B200 NVLink5: all-to-all
  0.597 of line rate against all-gather 0.674, SimuMax's fit, reference/
  peers-hardware-measurements.md A.3).
* Point-to-point (pipeline send/recv): ``size / (line rate * p2p_efficiency) + hop latency``
  plus the base latency.

Inputs: ``sb`` (B systems) and scalars or (U,) arrays; results (U, B) seconds.

As a registry entry (:class:`Nccl`, ``auto`` in ``conf/collective``) one phase over p ranks is
NCCL's ring schedule: ``passes * (p-1)`` steps and ``traffic_factor * D`` on the wire; its steps
are the ring's (all-to-all: one message of D/p to every peer in turn; broadcast / reduce: a
chain from / to position 0) and its ET graphs the ring's.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from simcore.hardware.batch import SystemBatch
from simcore.hardware.batch import as_column as _col
from simcore.hardware.batch import as_row as _row
from simcore.ir.graph import CommType
from simcore.network.collectives._base import (
    A2A,
    AG,
    AR,
    BROADCAST,
    REDUCE,
    RS,
    CollectiveAlgorithm,
    FloatArray,
    Step,
)
from simcore.network.collectives._et import RankGraph
from simcore.network.collectives.ring import ring_graphs, ring_lanes

__all__ = ["Nccl", "bus_bandwidth_Bps", "collective_time_s", "p2p_time_s", "traffic_factor"]


def traffic_factor(comm_type: object, group_size: object) -> FloatArray:
    """(U, 1) nccl-tests bus-bandwidth factor: bytes each rank moves per byte of buffer."""
    ct, n = _col(comm_type), np.maximum(_col(group_size), 1.0)
    frac = (n - 1.0) / n
    factor = np.where(ct == float(CommType.ALL_REDUCE), 2.0 * frac, frac)
    one_to_all = np.isin(ct, [float(CommType.BROADCAST), float(CommType.REDUCE)])
    factor = np.where(one_to_all, np.where(n > 1.0, 1.0, 0.0), factor)
    return np.asarray(np.where(ct == float(CommType.BARRIER), 0.0, factor))


def bus_bandwidth_Bps(
    sb: SystemBatch, comm_type: object, group_size: object, ranks_per_node: object
) -> FloatArray:
    """(U, B) large-message bus bandwidth of a collective, bytes/s (nccl-tests definition)."""
    ct, n = _col(comm_type), _col(group_size)
    k = np.minimum(np.maximum(_col(ranks_per_node), 1.0), n)
    pair = _row(sb.calib["scaleup_pair_loss"]) / np.maximum(k - 1.0, 1.0)
    up = _row(sb.scaleup_bandwidth_Bps * sb.calib["scaleup_efficiency"]) * (1.0 - pair)
    gain = np.where(ct == float(CommType.ALL_REDUCE), _row(sb.calib["switch_allreduce_gain"]), 1.0)
    nic = _row(sb.scaleout_bandwidth_Bps * sb.calib["scaleout_efficiency"]
               * sb.calib["scaleout_ring_efficiency"])
    inside = k >= n
    return np.asarray(np.where(inside, up * gain, np.minimum(up, k * nic)))


def _all_to_all_s(sb: SystemBatch, size: FloatArray, n: FloatArray, k: FloatArray) -> FloatArray:
    up = _row(sb.scaleup_bandwidth_Bps * sb.calib["scaleup_efficiency"]
              * sb.calib["scaleup_alltoall_ratio"])
    nic = _row(sb.scaleout_bandwidth_Bps * sb.calib["scaleout_efficiency"])
    local = size * (k - 1.0) / n / up
    remote = size * (n - k) / n / nic
    return np.asarray(np.maximum(local, remote))


def collective_time_s(
    sb: SystemBatch,
    comm_type: object,
    nbytes: object,
    group_size: object,
    ranks_per_node: object,
) -> FloatArray:
    """(U, B) seconds of one collective.

    Args:
        sb: the B systems.
        comm_type: :class:`~simcore.ir.graph.CommType` values, scalar or (U,).
        nbytes: full buffer size per rank (nccl-tests "size"), bytes.
        group_size: ranks in the communicator, n.
        ranks_per_node: members of the communicator inside one scale-up domain, k
            (``n``: the group is within a node; 1: one member per node).
    """
    ct, size, n = _col(comm_type), _col(nbytes), _col(group_size)
    k = np.minimum(np.maximum(_col(ranks_per_node), 1.0), np.maximum(n, 1.0))
    nodes = np.ceil(n / k)
    passes = np.where(ct == float(CommType.ALL_REDUCE), 2.0, 1.0)
    step = _row(sb.calib["collective_step_latency_us"]) * 1e-6
    ring_out = (nodes - 1.0) * (step + _row(sb.scaleout_latency_s))
    level = _row(sb.calib["scaleout_tree_level_latency_us"]) * 1e-6
    tree_out = np.ceil(np.log2(np.maximum(nodes, 1.0))) * (level + _row(sb.scaleout_latency_s))
    tree = (level > 0.0) & (ct == float(CommType.ALL_REDUCE))  # NCCL's tree: all-reduce only
    inter = np.where(tree, np.minimum(ring_out, tree_out), ring_out)
    fill = passes * ((k - 1.0) * (step + _row(sb.scaleup_latency_s)) + inter)
    bandwidth = traffic_factor(ct, n) * size / bus_bandwidth_Bps(sb, ct, n, k)
    is_a2a = ct == float(CommType.ALL_TO_ALL)
    bandwidth = np.where(is_a2a, _all_to_all_s(sb, size, n, k), bandwidth)
    base = _row(sb.calib["collective_base_latency_us"]) * 1e-6
    t = base + fill + bandwidth
    return np.asarray(np.where((n <= 1.0) | (size <= 0.0), 0.0, t))


def p2p_time_s(sb: SystemBatch, nbytes: object, cross_node: object) -> FloatArray:
    """(U, B) seconds of a point-to-point send of ``nbytes`` (pipeline activations).

    Args:
        sb: the B systems.
        nbytes: bytes sent, scalar or (U,).
        cross_node: whether the peer is in another scale-up domain, scalar or (U,) bool.
    """
    size = _col(nbytes)
    cross = np.asarray(cross_node, dtype=bool).reshape(-1, 1)
    bw = np.where(cross, _row(sb.scaleout_bandwidth_Bps), _row(sb.scaleup_bandwidth_Bps))
    lat = np.where(cross, _row(sb.scaleout_latency_s), _row(sb.scaleup_latency_s))
    base = _row(sb.calib["collective_base_latency_us"]) * 1e-6
    t = size / (bw * _row(sb.calib["p2p_efficiency"])) + lat + base
    return np.asarray(np.where(size <= 0.0, 0.0, t))


class Nccl(CollectiveAlgorithm):
    """The calibrated NCCL-aware model as an algorithm (``auto``): NCCL's rings."""

    name: ClassVar[str] = "nccl"
    aliases: ClassVar[tuple[str, ...]] = ("auto",)
    kinds: ClassVar[tuple[str, ...]] = (AR, RS, AG, A2A, BROADCAST, REDUCE)
    et_step_delays: ClassVar[bool] = True

    def _phase(self, kind: str, p: FloatArray, nbytes: FloatArray) -> tuple[FloatArray, FloatArray]:
        frac = (p - 1.0) / p  # traffic_factor's bus-bandwidth factors
        if kind == AR:
            return np.asarray(2.0 * (p - 1.0)), np.asarray(2.0 * frac * nbytes)
        if kind in (BROADCAST, REDUCE):
            return np.asarray(p - 1.0), np.asarray(np.where(p > 1.0, 1.0, 0.0) * nbytes)
        return np.asarray(p - 1.0), np.asarray(frac * nbytes)

    def lanes(self, comm: str, n: int, pos: int, size: int, chunk: int = 0, window: int = 0
              ) -> list[list[Step]]:
        if comm == A2A:
            return [[Step(((pos + k) % n,), ((pos - k) % n,), size // n, False) for k in range(1, n)]]
        if comm == BROADCAST:  # a chain from position 0
            recv = [Step((), (pos - 1,), size, False)] if pos > 0 else []
            return [recv + ([Step((pos + 1,), (), size, False)] if pos < n - 1 else [])]
        if comm == REDUCE:  # a chain to position 0, reducing on the way
            recv = [Step((), (pos + 1,), size, True)] if pos < n - 1 else []
            return [recv + ([Step((pos - 1,), (), size, False)] if pos > 0 else [])]
        return ring_lanes(comm, n, pos, size)

    def _et_graph(self, comm: str, n: int, size: int, reduce_micros: int, step_micros: int
                  ) -> list[RankGraph]:
        return ring_graphs(comm, n, size, reduce_micros, step_micros)
