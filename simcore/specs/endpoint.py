"""Where collectives run at the endpoint: :class:`EndpointSpec` (``system.endpoint``).

Engines (ACE, Rashidi et al., ISCA 2021; reference/methods-hap-ace-echo.md §2):

* ``nccl`` (default): the fitted overlap slowdown of the calibrated model, unchanged.
* ``endpoint``: collectives run on the accelerator, as NCCL does: they hold ``comm_sm_fraction``
  of the SMs (NCCL channels are thread blocks; ACE's CommOpt / CompOpt baselines are a large /
  small fraction) and move HBM bytes for every network byte: a reduce-scatter step DMA-writes the
  received chunk, reads it and the local chunk and writes the sum (``hbm_bytes_per_reduce_byte``,
  5 unfused, 3 fused), an all-gather step reads what it sends and writes what it receives
  (``hbm_bytes_per_gather_byte``, 2); ACE §2.3(a). The SMs it holds also cap its own rate:
  ``comm_sm_fraction * sms * collective_GBps_per_sm`` (ACE §2.3(b), ``k r``), so a
  compute-optimised split (few SMs) leaves the network under-used.
* ``ace``: an offload engine next to the network interface with its own SRAM buffer and ALUs:
  no SMs, HBM only for one read and one write of the payload; the collective runs at
  ``min(network, ace_alu_GBps, ace_link_GBps)``.
* ``ideal``: collectives consume no endpoint resource (ACE's ideal bound).

Who gets the HBM first while a collective and compute overlap (``hbm_priority``, ACE §2.3(d)):
``collective`` (the comm-optimised split: the collective takes what it needs, up to
``comm_hbm_share``, and memory-bound kernels beside it run on what is left) or ``compute`` (the
compute-optimised split: memory-bound kernels keep the whole HBM, the collective progresses on
what compute leaves, i.e. only while compute-bound kernels run beside it).
"""

from __future__ import annotations

from dataclasses import dataclass

from simcore.errors import require

__all__ = ["ENGINES", "HBM_PRIORITIES", "EndpointSpec"]

ENGINES = ("nccl", "endpoint", "ace", "ideal")
HBM_PRIORITIES = ("collective", "compute")


@dataclass(frozen=True)
class EndpointSpec:
    """Endpoint resources of collectives (all sweepable, ``system.endpoint.<key>``).

    Attributes:
        collective_engine: one of :data:`ENGINES`.
        comm_sm_fraction: fraction of SMs a running collective holds (``endpoint``); NCCL on
            A100 runs up to 32 channels = 32 of 108 SMs with NVLink (NCCL ``NCCL_MAX_NCHANNELS``).
        sms: compute units (SMs) of the accelerator; 108 on A100 (NVIDIA A100 Tensor Core GPU
            architecture whitepaper, 2020).
        collective_GBps_per_sm: network GB/s one SM running collective code can drive (copy and
            reduce; ACE §2.3 ``r``). Assumed, not measured here: 10 GB/s, the order of NCCL's
            all-reduce bus bandwidth on DGX A100 (~240 GB/s, reference/peers-hardware-measurements.md)
            over the ~24 channels (one thread block = one SM each) it runs on NVLink.
        comm_hbm_share: most of the HBM bandwidth a collective gets while compute runs beside it.
        hbm_priority: ``collective`` or ``compute``: which side keeps the HBM bandwidth when
            both need it (module docstring; ACE §2.3(d) CommOpt / CompOpt).
        hbm_bytes_per_reduce_byte: HBM bytes per network byte of a reducing step (ACE §2.3: 3-5).
        hbm_bytes_per_gather_byte: HBM bytes per network byte of a copying step (ACE §2.3: 2).
        ace_sram_mib: ACE's buffer, MiB (a collective is pipelined through it in chunks).
        ace_alu_GBps: ACE's reduction throughput, GB/s.
        ace_link_GBps: ACE's port to the network interface, GB/s.
    """

    collective_engine: str = "nccl"
    comm_sm_fraction: float = 0.15
    sms: int = 108
    collective_GBps_per_sm: float = 10.0
    comm_hbm_share: float = 0.5
    hbm_priority: str = "collective"
    hbm_bytes_per_reduce_byte: float = 5.0
    hbm_bytes_per_gather_byte: float = 2.0
    ace_sram_mib: float = 4.0
    ace_alu_GBps: float = 1000.0
    ace_link_GBps: float = 1000.0

    @property
    def sm_collective_Bps(self) -> float:
        """Most network bytes/s the collective's SMs can drive (``k r``, ``endpoint`` engine)."""
        return self.comm_sm_fraction * self.sms * self.collective_GBps_per_sm * 1e9

    def __post_init__(self) -> None:
        p = "system.endpoint."
        require(self.collective_engine in ENGINES, p + "collective_engine",
                self.collective_engine, f"must be one of {', '.join(ENGINES)}")
        require(0 <= self.comm_sm_fraction < 1, p + "comm_sm_fraction", self.comm_sm_fraction,
                "must be a fraction in [0, 1)")
        require(self.hbm_priority in HBM_PRIORITIES, p + "hbm_priority", self.hbm_priority,
                f"must be one of {', '.join(HBM_PRIORITIES)}")
        require(0 < self.comm_hbm_share <= 1, p + "comm_hbm_share", self.comm_hbm_share,
                "must be a fraction in (0, 1]")
        require(isinstance(self.sms, int) and not isinstance(self.sms, bool) and self.sms > 0,
                p + "sms", self.sms, "must be an integer > 0")
        require(self.collective_engine != "endpoint" or self.comm_sm_fraction > 0,
                p + "comm_sm_fraction", self.comm_sm_fraction,
                "must be > 0 with collective_engine=endpoint (its SMs run the collective)")
        for key in ("collective_GBps_per_sm", "hbm_bytes_per_reduce_byte",
                    "hbm_bytes_per_gather_byte", "ace_sram_mib", "ace_alu_GBps", "ace_link_GBps"):
            value = getattr(self, key)
            require(isinstance(value, int | float) and value > 0, p + key, value, "must be > 0")
