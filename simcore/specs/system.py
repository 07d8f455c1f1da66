"""System specs: device pools, topology dimensions, calibration.

A :class:`SystemSpec` describes a cluster of ``num_gpus`` accelerators grouped into nodes of
``gpus_per_node`` that share a scale-up fabric (NVLink / NVSwitch: ``scaleup``) and reach other
nodes over a scale-out fabric (InfiniBand / RoCE: ``scaleout``). The accelerators form one or
more :class:`DevicePool` s (accelerator, calibration, count: a pool is a set of identical
devices, ``SystemSpec.devices``); the fabrics are the topology dimensions ``SystemSpec.dims``
(``scaleup`` = ``dims[0]``, ``scaleout`` = ``dims[1]``). The scale-out fabric may be made of
several stacked inter-package dimensions, as the multi-dimensional fabrics of ASTRA-sim and ACE
are (e.g. Ring(2) x FullyConnected(8) x Switch(4): reference/astra-sim-and-chakra.md §2.2,
reference/methods-hap-ace-echo.md §2.1): ``scaleout_dims`` lists them, innermost first, and
``scaleout`` is then their fold (summed per-NPU bandwidth, the slowest latency, the outermost
kind) for every model that sees two levels; the explicit collective algorithms run one phase per
dimension on them (:mod:`simcore.network.collectives.calibrated_algorithms`). With ``pools`` empty (every preset in
``conf/system/``) the cluster is one pool of ``accelerator`` x ``num_gpus``; ``accelerator`` and
``calibration`` always are pool 0's (a pool that names neither inherits them). Bandwidths are decimal GB/s
(1e9 bytes/s), **per GPU, one direction**; latencies are per hop in ns. The
:class:`CalibrationSpec` holds the hardware-level fitted parameters of the calibrated cost
models (``simcore.hardware``, ``simcore.network.collectives``); ``scripts/fit_calibration.py`` writes
them into ``conf/system/calibration/*.yaml`` (DESIGN.md, "Two fidelity modes").

Field names are the YAML keys of ``conf/system/``. Every
spec validates itself on construction and raises :class:`~simcore.errors.InputError` naming the
key, the value and the rule.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from math import inf, prod
from typing import Any

from simcore.errors import InputError, require
from simcore.limits import limit
from simcore.specs.collective import CollectiveSpec
from simcore.specs.endpoint import EndpointSpec
from simcore.specs.memory_tier import RemoteMemorySpec

__all__ = [
    "FIELD_RANGES",
    "ONE_POSITIVE",
    "PRECISIONS",
    "TOPOLOGY_KINDS",
    "AcceleratorSpec",
    "CalibrationSpec",
    "DevicePool",
    "FieldRange",
    "SystemSpec",
    "TopologyDim",
    "TopologyDimSpec",
    "system_from_dict",
]

PRECISIONS = ("fp32", "tf32", "fp16", "bf16", "fp8", "fp4")
TOPOLOGY_KINDS = ("Ring", "FullyConnected", "Switch")


def _check_positive(obj: object, prefix: str, names: tuple[str, ...], *, allow_zero: bool) -> None:
    for name in names:
        value = getattr(obj, name)
        ok = value >= 0 if allow_zero else value > 0
        rule = "must be >= 0" if allow_zero else "must be > 0"
        require(isinstance(value, int | float) and ok, f"{prefix}{name}", value, rule)


#: the fields each spec's rules name (shared with :data:`FIELD_RANGES`)
_ACC_PEAKS = tuple(f"peak_tflops_{x}" for x in PRECISIONS)
_ACC_POSITIVE = ("hbm_capacity_gib", "hbm_bandwidth_GBps")
_ACC_NON_NEGATIVE = ("price_usd", "tdp_w")
_TOPOLOGY_POSITIVE = ("bandwidth_GBps",)
_TOPOLOGY_NON_NEGATIVE = ("latency_ns",)
_CALIBRATION_FRACTIONS = ("gemm_efficiency_max", "attention_efficiency_max", "hbm_efficiency",
                          "sustained_compute_fraction", "scaleup_efficiency",
                          "scaleout_efficiency", "p2p_efficiency", "fp8_gemm_efficiency_ratio",
                          "fp4_gemm_efficiency_ratio", "scaleout_ring_efficiency",
                          "scaleup_alltoall_ratio")


@dataclass(frozen=True)
class AcceleratorSpec:
    """One accelerator model.

    Attributes:
        name: preset name (e.g. ``a100_80g``).
        peak_tflops_fp32 .. peak_tflops_fp4: dense (no sparsity) tensor-core peak, TFLOP/s;
            0 means the precision is unsupported (fp4: NVFP4 GEMMs on Blackwell).
        hbm_capacity_gib: device memory, GiB.
        hbm_bandwidth_GBps: peak device-memory bandwidth, decimal GB/s.
        price_usd: list price of one accelerator (for the cost model), USD.
        tdp_w: thermal design power, W.
    """

    name: str = "a100_80g"
    peak_tflops_fp32: float = 19.5
    peak_tflops_tf32: float = 156.0
    peak_tflops_fp16: float = 312.0
    peak_tflops_bf16: float = 312.0
    peak_tflops_fp8: float = 0.0
    peak_tflops_fp4: float = 0.0
    hbm_capacity_gib: float = 80.0
    hbm_bandwidth_GBps: float = 2039.0
    price_usd: float = 15000.0
    tdp_w: float = 400.0

    def __post_init__(self) -> None:
        p = "system.accelerator."
        require(isinstance(self.name, str) and bool(self.name), p + "name", self.name,
                "must be a non-empty string")
        _check_positive(self, p, _ACC_PEAKS, allow_zero=True)
        _check_positive(self, p, _ACC_POSITIVE, allow_zero=False)
        _check_positive(self, p, _ACC_NON_NEGATIVE, allow_zero=True)
        require(self.peak_tflops_fp16 > 0 or self.peak_tflops_bf16 > 0, p + "peak_tflops_fp16",
                self.peak_tflops_fp16, "an accelerator needs fp16 or bf16 peak > 0")

    def peak_tflops(self, precision: str) -> float:
        """Dense peak TFLOP/s at ``precision`` (one of :data:`PRECISIONS`).

        Raises:
            InputError: unknown precision, or one this accelerator does not support.
        """
        require(precision in PRECISIONS, "parallel.precision", precision,
                f"must be one of {', '.join(PRECISIONS)}")
        value = float(getattr(self, f"peak_tflops_{precision}"))
        require(value > 0, "parallel.precision", precision,
                f"not supported by accelerator {self.name} (peak_tflops_{precision} = 0)")
        return value


@dataclass(frozen=True)
class TopologyDimSpec:
    """One network dimension (ASTRA-sim 2.0 style: Ring / FullyConnected / Switch).

    Attributes:
        kind: ``Ring``, ``FullyConnected`` or ``Switch``.
        size: GPUs along this dimension; 0 = derived by :class:`SystemSpec` (scale-up:
            ``gpus_per_node``; scale-out: ``num_gpus // gpus_per_node``).
        bandwidth_GBps: line rate per GPU, one direction, decimal GB/s.
        latency_ns: per-hop latency, ns.
    """

    kind: str = "Switch"
    size: int = 0
    bandwidth_GBps: float = 300.0
    latency_ns: float = 700.0

    def validate(self, prefix: str) -> None:
        """Check the fields; ``prefix`` is the YAML path (e.g. ``system.scaleup.``)."""
        require(self.kind in TOPOLOGY_KINDS, prefix + "kind", self.kind,
                f"must be one of {', '.join(TOPOLOGY_KINDS)}")
        require(isinstance(self.size, int) and self.size >= 0, prefix + "size", self.size,
                "must be an integer >= 0 (0 = derived)")
        _check_positive(self, prefix, _TOPOLOGY_POSITIVE, allow_zero=False)
        _check_positive(self, prefix, _TOPOLOGY_NON_NEGATIVE, allow_zero=True)


@dataclass(frozen=True)
class CalibrationSpec:
    """Hardware-level parameters of the calibrated cost models (fitted once, for all cases).

    Attributes:
        gemm_efficiency_max: fraction of dense peak a large, square GEMM reaches.
        gemm_half_dim: a GEMM dimension of this size halves the efficiency along it
            (``eff = max * prod(d / (d + half))`` over m, n, k); models tile/wave quantization.
        sustained_compute_fraction: fraction of the microbenchmark GEMM / attention throughput
            sustained inside a long training step (clocks throttled at TDP, launch gaps, L2
            contention); fitted end to end; 1 = microbenchmark speed.
        attention_efficiency_max: fraction of peak a long-sequence flash-attention kernel reaches.
        attention_half_seq: sequence length at which attention efficiency halves.
        hbm_efficiency: achievable fraction of HBM bandwidth for memory-bound kernels.
        kernel_overhead_us: fixed time per kernel (launch, tail), microseconds.
        scaleup_efficiency: achievable bus bandwidth / scale-up line rate (NCCL, large messages).
        scaleout_efficiency: achievable bandwidth / scale-out line rate (per NIC, large messages).
        collective_base_latency_us: fixed time per collective (setup, launch), microseconds.
        collective_step_latency_us: software/pipeline latency per ring step, microseconds.
        switch_allreduce_gain: all-reduce bus bandwidth over that of other collectives inside
            a switched scale-up domain (in-switch reduction, NVLS on NVSwitch 3; 1 = none).
        scaleup_alltoall_ratio: all-to-all bandwidth inside the scale-up domain over that of
            all-gather / reduce-scatter (``scaleup_efficiency``): an all-to-all's many small
            peer-to-peer transfers reach less of the link (B200 NVLink5: 0.597 against 0.674);
            1 = as the other collectives.
        p2p_efficiency: achievable fraction of the line rate for pipeline send/recv.
        overlap_compute_slowdown: fractional slowdown of a compute kernel while a collective
            runs beside it (SMs used by the communication kernels; Echo §3.4).
        comm_hbm_bytes_per_net_byte: HBM bytes moved per network byte by an NCCL-style
            collective (ACE §2.3: 3-5 baseline, ~1 with an offload engine).
        scaleup_pair_loss: fraction of the scale-up bus bandwidth a 2-rank group loses (fewer
            NCCL channels between two GPUs); a group of k ranks in one node loses
            ``scaleup_pair_loss / (k - 1)`` (0 = no group-size dependence).
        scaleout_ring_efficiency: fraction of the per-NIC rate (``scaleout_efficiency``) NCCL's
            rings reach when a collective crosses nodes (nccl-tests on 8 A100 + 8 NICs per node
            reach ~125 of 8 x 23.5 GB/s); 1 = the single-NIC rate. All-to-all and p2p keep the
            per-NIC rate.
        scaleout_tree_level_latency_us: latency per level of NCCL's inter-node tree,
            microseconds; when > 0 the inter-node latency term of a collective spanning M nodes
            is the smaller of the ring's ``M - 1`` steps and the tree's ``ceil(log2 M)`` levels
            (NCCL picks the faster algorithm for latency-bound sizes); 0 = ring only.
        fp8_gemm_efficiency_ratio: fp8 GEMM efficiency over the bf16 one at the same shape
            (fp8 GEMMs reach a smaller fraction of their 2x peak: smaller tiles per byte of
            operand, scaling epilogues); 1 = the bf16 curve.
        fp4_gemm_efficiency_ratio: the same for NVFP4 GEMMs (Blackwell).
        fp8_extra_bytes_per_gemm_element: memory-bound bytes per GEMM input element fp8
            training adds (cast to fp8 with amax reduction, Transformer Engine's delayed
            scaling), charged as a memory-bound kernel per GEMM; 0 = none.
        kernel_launch_floor_us: least time of any compute kernel, microseconds: an eager
            framework dispatches kernels from the host at a bounded rate, so short kernels run
            at the host's pace, not the GPU's (``max(gpu time, floor)``); a software-stack
            value (``conf/stack``); 0 = no floor.
        interval80_log_halfwidth, interval95_log_halfwidth: split-conformal half-widths
            (natural log of time) of the 80% / 95% prediction intervals, from the
            leave-one-group-out residuals on published runs (``simcore/fidelity/intervals.py``);
            0 = no interval known.
    """

    gemm_efficiency_max: float = 0.88
    gemm_half_dim: float = 48.0
    sustained_compute_fraction: float = 1.0
    attention_efficiency_max: float = 0.6
    attention_half_seq: float = 512.0
    hbm_efficiency: float = 0.8
    kernel_overhead_us: float = 4.0
    scaleup_efficiency: float = 0.77
    scaleout_efficiency: float = 0.92
    collective_base_latency_us: float = 30.0
    collective_step_latency_us: float = 1.0
    switch_allreduce_gain: float = 1.0
    scaleup_alltoall_ratio: float = 1.0
    p2p_efficiency: float = 0.8
    overlap_compute_slowdown: float = 0.08
    comm_hbm_bytes_per_net_byte: float = 3.0
    scaleup_pair_loss: float = 0.0
    scaleout_ring_efficiency: float = 1.0
    scaleout_tree_level_latency_us: float = 0.0
    fp8_gemm_efficiency_ratio: float = 1.0
    fp8_extra_bytes_per_gemm_element: float = 0.0
    fp4_gemm_efficiency_ratio: float = 1.0
    kernel_launch_floor_us: float = 0.0
    interval80_log_halfwidth: float = 0.0
    interval95_log_halfwidth: float = 0.0

    def validate(self, prefix: str = "system.calibration.") -> None:
        """Check every field is a number in its physical range."""
        for name in _CALIBRATION_FRACTIONS:
            value = getattr(self, name)
            require(isinstance(value, int | float) and 0 < value <= 1, prefix + name, value,
                    "must be a fraction in (0, 1]")
        others = tuple(f.name for f in fields(self) if f.name not in _CALIBRATION_FRACTIONS)
        _check_positive(self, prefix, others, allow_zero=True)
        require(self.switch_allreduce_gain >= 1, prefix + "switch_allreduce_gain",
                self.switch_allreduce_gain, "must be >= 1")
        require(self.scaleup_pair_loss < 1, prefix + "scaleup_pair_loss",
                self.scaleup_pair_loss, "must be < 1 (fraction of bandwidth lost)")
        require(self.overlap_compute_slowdown < 1, prefix + "overlap_compute_slowdown",
                self.overlap_compute_slowdown, "must be < 1 (fraction of compute lost)")


TopologyDim = TopologyDimSpec  # the name the cluster seam uses (one dimension of ``dims``)

#: A range (low, low included, high, high included) a number must lie in.
FieldRange = tuple[float, bool, float, bool]
_AT_LEAST_0: FieldRange = (0.0, True, inf, True)
_ABOVE_0: FieldRange = (0.0, False, inf, True)

#: The numeric fields of the sub-specs whose every rule is a range on the field alone, with
#: that range (besides being a finite number: :func:`simcore.errors.require`), by spec class.
#: With one of these fields changed from a valid spec, the spec is valid exactly when the new
#: value is a finite number in its range and every rule of :data:`ONE_POSITIVE` still holds, so
#: a column of values can be checked at once (``search.run.batch.materialize_systems``);
#: ``tests/simcore/specs/test_field_ranges.py`` compares that with the checks above on values
#: around every bound. Fields not listed (names, kinds, sizes) are checked one value at a time.
FIELD_RANGES: dict[type, dict[str, FieldRange]] = {
    AcceleratorSpec: {**dict.fromkeys(_ACC_PEAKS, _AT_LEAST_0),
                      **dict.fromkeys(_ACC_POSITIVE, _ABOVE_0),
                      **dict.fromkeys(_ACC_NON_NEGATIVE, _AT_LEAST_0)},
    TopologyDimSpec: {**dict.fromkeys(_TOPOLOGY_POSITIVE, _ABOVE_0),
                      **dict.fromkeys(_TOPOLOGY_NON_NEGATIVE, _AT_LEAST_0)},
    CalibrationSpec: {**{f.name: _AT_LEAST_0 for f in fields(CalibrationSpec)},
                      **dict.fromkeys(_CALIBRATION_FRACTIONS, (0.0, False, 1.0, True)),
                      "switch_allreduce_gain": (1.0, True, inf, True),
                      "scaleup_pair_loss": (0.0, True, 1.0, False),
                      "overlap_compute_slowdown": (0.0, True, 1.0, False)},
}

#: The rules that involve several fields of one spec: at least one of the fields is > 0.
ONE_POSITIVE: dict[type, tuple[tuple[str, ...], ...]] = {
    AcceleratorSpec: (("peak_tflops_fp16", "peak_tflops_bf16"),),
}


@dataclass(frozen=True)
class DevicePool:
    """A set of identical accelerators inside a cluster (one device type, one calibration).

    Attributes:
        accelerator: the device; None = pool 0's (``SystemSpec.accelerator``).
        calibration: its fitted parameters; None = pool 0's (``SystemSpec.calibration``).
        count: accelerators in the pool, a positive whole number (required); the counts of a
            cluster's pools sum to ``num_gpus``.
        gpus_per_node: accelerators per node of this pool; 0 = the cluster's ``gpus_per_node``
            (a pool is made of whole nodes).
        scaleup: this pool's scale-up fabric (an asymmetric topology: the intra-node
            dimension of a V100 node differs from a P100 node's); None = the cluster's
            ``scaleup``. The scale-out network is shared by every pool.
    """

    accelerator: AcceleratorSpec | None = None
    calibration: CalibrationSpec | None = None
    count: int = 0
    gpus_per_node: int = 0
    scaleup: TopologyDimSpec | None = None

    def validate(self, prefix: str) -> None:
        """Check the fields; ``prefix`` is the YAML path (e.g. ``system.pools.1.``)."""
        require(isinstance(self.count, int) and not isinstance(self.count, bool)
                and self.count >= 1, prefix + "count", self.count,
                "must be a positive whole number")
        require(isinstance(self.gpus_per_node, int) and not isinstance(self.gpus_per_node, bool)
                and self.gpus_per_node >= 0, prefix + "gpus_per_node", self.gpus_per_node,
                "must be a whole number >= 0 (0 = system.gpus_per_node)")
        require(self.accelerator is None or isinstance(self.accelerator, AcceleratorSpec),
                prefix + "accelerator", self.accelerator, "must be an AcceleratorSpec or None")
        require(self.calibration is None or isinstance(self.calibration, CalibrationSpec),
                prefix + "calibration", self.calibration, "must be a CalibrationSpec or None")
        if self.calibration is not None:
            self.calibration.validate(prefix + "calibration.")
        if self.scaleup is not None:
            require(isinstance(self.scaleup, TopologyDimSpec), prefix + "scaleup", self.scaleup,
                    "must be a TopologyDimSpec or None")
            self.scaleup.validate(prefix + "scaleup.")


@dataclass(frozen=True)
class SystemSpec:
    """A cluster: accelerators, scale-up and scale-out fabrics, calibration.

    Attributes:
        name: preset name (e.g. ``dgx_a100_80g``).
        num_gpus: total accelerators.
        gpus_per_node: accelerators per scale-up domain.
        accelerator: the accelerator model of pool 0 (of every GPU when ``pools`` is empty).
        scaleup: the intra-node fabric (per-GPU bandwidth); ``dims[0]``.
        scaleout: the inter-node fabric (per-GPU NIC bandwidth); ``dims[1]``.
        calibration: fitted hardware-level parameters of pool 0.
        collective: collective algorithm per dimension (filled from the ``collective`` group;
            the default keeps the calibrated NCCL-aware model).
        memory: remote memory tier (filled from the ``memory`` group; default: none).
        endpoint: where collectives run and what they take from compute
            (:mod:`simcore.specs.endpoint`; default ``nccl``: the fitted overlap slowdown).
        scaleout_dims: the scale-out fabric as stacked inter-package dimensions, innermost
            first, each with its explicit ``size`` (the sizes multiply to ``num_gpus /
            gpus_per_node``), per-NPU bandwidth and latency; empty (default) = one scale-out
            dimension. When given, ``scaleout`` is replaced by their fold (module docstring).
        pools: the device pools, in rank order; empty = one pool of ``accelerator`` x
            ``num_gpus``. Stored normalized: pool 0's accelerator and calibration live in
            ``accelerator`` / ``calibration`` (its entries are None), and a single pool
            equivalent to the default is stored as ``()``. Read :attr:`devices` for the
            resolved pools.
    """

    name: str = "dgx_a100_80g"
    num_gpus: int = 8
    gpus_per_node: int = 8
    accelerator: AcceleratorSpec = field(default_factory=AcceleratorSpec)
    scaleup: TopologyDimSpec = field(default_factory=TopologyDimSpec)
    scaleout: TopologyDimSpec = field(
        default_factory=lambda: TopologyDimSpec(kind="Switch", bandwidth_GBps=25.0,
                                                latency_ns=5000.0))
    calibration: CalibrationSpec = field(default_factory=CalibrationSpec)
    collective: CollectiveSpec = field(default_factory=CollectiveSpec)
    memory: RemoteMemorySpec = field(default_factory=RemoteMemorySpec)
    pools: tuple[DevicePool, ...] = ()
    endpoint: EndpointSpec = field(default_factory=EndpointSpec)
    scaleout_dims: tuple[TopologyDimSpec, ...] = ()

    def __post_init__(self) -> None:
        p = "system."
        require(isinstance(self.name, str) and bool(self.name), p + "name", self.name,
                "must be a non-empty string")
        for key in ("num_gpus", "gpus_per_node"):
            value = getattr(self, key)
            require(isinstance(value, int) and not isinstance(value, bool) and value >= 1,
                    p + key, value, "must be an integer >= 1")
        require(self.num_gpus <= limit("graph_ranks"), p + "num_gpus", self.num_gpus,
                f"must be <= {int(limit('graph_ranks'))} (limit graph_ranks, SIMSWEEP_MAX_GRAPH_RANKS)")
        require(self.num_gpus % self.gpus_per_node == 0 or self.num_gpus < self.gpus_per_node,
                p + "num_gpus", self.num_gpus,
                f"must be a multiple of gpus_per_node={self.gpus_per_node} (or fewer)")
        self._fold_scaleout_dims()
        # a rule that involves one sub-spec field (and the shape fields) also goes in
        # _field_rules, which with_field runs alone (tests compare it with replace)
        self.scaleup.validate(p + "scaleup.")
        self.scaleout.validate(p + "scaleout.")
        self.calibration.validate(p + "calibration.")
        self._check_size("scaleup", self.scaleup)
        self._check_size("scaleout", self.scaleout)
        self._normalize_pools()

    def _check_size(self, name: str, dim: TopologyDimSpec) -> None:
        """``scaleup.size`` is 0 or ``gpus_per_node``; ``scaleout.size`` 0 or the node count."""
        if name == "scaleup":
            require(dim.size in (0, self.gpus_per_node), "system.scaleup.size", dim.size,
                    f"must be 0 or gpus_per_node={self.gpus_per_node}")
        else:
            require(dim.size in (0, self.num_nodes), "system.scaleout.size", dim.size,
                    f"must be 0 or num_gpus/gpus_per_node={self.num_nodes}")

    def _field_rules(self, name: str, value: Any) -> bool:
        """Run, in ``__post_init__``'s order, every rule of this class that involves the
        sub-spec field ``name`` set to ``value``: its own checks and those it shares with the
        shape fields (``num_gpus``, ``gpus_per_node``). ``accelerator``, ``collective``,
        ``memory`` and ``endpoint`` check themselves when built; no rule here reads them.
        False, having run nothing, for any other field."""
        if name in ("scaleup", "scaleout", "calibration"):
            value.validate(f"system.{name}.")
            if name != "calibration":
                self._check_size(name, value)
            return True
        return name in ("accelerator", "collective", "memory", "endpoint")

    def with_field(self, name: str, value: Any) -> SystemSpec:
        """``dataclasses.replace(self, **{name: value})``: the same system and the same error,
        checking only the rules that involve ``name`` (~3 us for a scale-out value, ~12 us
        for a calibration one, against ~22 us for a full check). Exact when each rule involves one sub-spec field and
        the shape fields, which holds without scale-out dims and device pools (their folding
        and normalization read several fields); with them, or for another field, this is
        that ``replace``."""
        if self.pools or self.scaleout_dims or not self._field_rules(name, value):
            return replace(self, **{name: value})
        out = object.__new__(SystemSpec)
        out.__dict__.update(self.__dict__)
        out.__dict__[name] = value
        return out

    def _fold_scaleout_dims(self) -> None:
        """Validate ``scaleout_dims`` and set ``scaleout`` to their fold (class docstring)."""
        dims = self.scaleout_dims
        key = "system.scaleout_dims"
        require(isinstance(dims, tuple | list), key, dims,
                "must be a list of topology dimensions (kind, size, bandwidth_GBps, latency_ns)")
        dims = tuple(dims)
        object.__setattr__(self, "scaleout_dims", dims)
        if not dims:
            return
        for i, d in enumerate(dims):
            require(isinstance(d, TopologyDimSpec), f"{key}.{i}", d,
                    "must be a topology dimension (kind, size, bandwidth_GBps, latency_ns)")
            d.validate(f"{key}.{i}.")
            require(d.size >= 2, f"{key}.{i}.size", d.size,
                    "must be an explicit integer >= 2 (NPUs along this dimension)")
        sizes = [d.size for d in dims]
        nodes = self.num_gpus // self.gpus_per_node
        require(int(prod(sizes)) == nodes, key, sizes,
                f"sizes must multiply to num_gpus/gpus_per_node={nodes}")
        fold = TopologyDimSpec(kind=dims[-1].kind, size=0,
                               bandwidth_GBps=sum(d.bandwidth_GBps for d in dims),
                               latency_ns=max(d.latency_ns for d in dims))
        object.__setattr__(self, "scaleout", fold)

    def _normalize_pools(self) -> None:
        """Validate ``pools`` and store them normalized (see the class docstring)."""
        pools = self.pools
        require(isinstance(pools, tuple | list), "system.pools", pools,
                "must be a list of device pools")
        if len(pools) == 0:
            object.__setattr__(self, "pools", ())
            return
        for i, pool in enumerate(pools):
            require(isinstance(pool, DevicePool), f"system.pools.{i}", pool,
                    "must be a DevicePool (accelerator, calibration, count, gpus_per_node)")
            pool.validate(f"system.pools.{i}.")
            per_node = pool.gpus_per_node or self.gpus_per_node
            require(per_node == self.gpus_per_node, f"system.pools.{i}.gpus_per_node",
                    pool.gpus_per_node, f"must be 0 or system.gpus_per_node="
                    f"{self.gpus_per_node} (per-pool node sizes are not modelled yet)")
            require(self.num_gpus < self.gpus_per_node or pool.count % per_node == 0,
                    f"system.pools.{i}.count", pool.count,
                    f"must be a multiple of gpus_per_node={per_node} (a pool is whole nodes)")
        counts = [pool.count for pool in pools]
        require(sum(counts) == self.num_gpus, "system.pools", counts,
                f"pool counts must sum to num_gpus={self.num_gpus}")
        first = pools[0]
        if first.accelerator is not None:
            object.__setattr__(self, "accelerator", first.accelerator)
        if first.calibration is not None:
            object.__setattr__(self, "calibration", first.calibration)
        if first.scaleup is not None:
            object.__setattr__(self, "scaleup", first.scaleup)
        head = replace(first, accelerator=None, calibration=None, gpus_per_node=0, scaleup=None)
        rest = tuple(_inherit(pool, self) for pool in pools[1:])
        normalized = () if not rest else (head, *rest)
        object.__setattr__(self, "pools", normalized)

    @property
    def devices(self) -> tuple[DevicePool, ...]:
        """The resolved device pools (at least one; accelerator, calibration, node size set)."""
        if not self.pools:
            return (DevicePool(self.accelerator, self.calibration, self.num_gpus,
                               self.gpus_per_node, self.scaleup),)
        return tuple(DevicePool(
            self.accelerator if p.accelerator is None else p.accelerator,
            self.calibration if p.calibration is None else p.calibration,
            p.count, p.gpus_per_node or self.gpus_per_node,
            self.scaleup if p.scaleup is None else p.scaleup) for p in self.pools)

    @property
    def uniform_devices(self) -> bool:
        """Whether every pool has pool 0's accelerator, calibration and scale-up fabric (one
        device type)."""
        return all(p.accelerator is None and p.calibration is None and p.scaleup is None
                   for p in self.pools)

    @property
    def num_pools(self) -> int:
        """Number of device pools D (1 by default)."""
        return max(1, len(self.pools))

    @property
    def pool_structure(self) -> tuple[tuple[int, int], ...]:
        """(count, gpus_per_node) per pool: the shape of the pools, no hardware numbers (part
        of the graph structure key)."""
        return tuple((p.count, p.gpus_per_node) for p in self.devices)

    @property
    def dims(self) -> tuple[TopologyDimSpec, ...]:
        """The topology dimensions, innermost first: ``(scaleup, scaleout)``."""
        return (self.scaleup, self.scaleout)

    @property
    def num_nodes(self) -> int:
        """Number of scale-up domains (at least 1)."""
        return max(1, self.num_gpus // self.gpus_per_node)

    def with_num_gpus(self, num_gpus: int) -> SystemSpec:
        """A copy with ``num_gpus`` replaced (derived sizes follow; explicit pool counts do
        not, so a multi-pool cluster must be given counts that sum to the new total)."""
        return replace(self, num_gpus=num_gpus,
                       scaleout=replace(self.scaleout, size=0))


def _inherit(pool: DevicePool, system: SystemSpec) -> DevicePool:
    """``pool`` with the fields equal to pool 0's (the system's) set to None (= inherit)."""
    acc = None if pool.accelerator == system.accelerator else pool.accelerator
    cal = None if pool.calibration == system.calibration else pool.calibration
    up = None if pool.scaleup == system.scaleup else pool.scaleup
    return replace(pool, accelerator=acc, calibration=cal, scaleup=up,
                   gpus_per_node=0 if pool.gpus_per_node == system.gpus_per_node
                   else pool.gpus_per_node)


def _build_pools(data: object, prefix: str) -> tuple[DevicePool, ...]:
    require(isinstance(data, list | tuple), prefix.rstrip("."), data,
            "must be a list of device pools")
    assert isinstance(data, list | tuple)
    out = []
    for i, item in enumerate(data):
        if isinstance(item, DevicePool):
            out.append(item)
            continue
        pool = _build(DevicePool, item, f"{prefix}{i}.")
        assert isinstance(pool, DevicePool)
        out.append(pool)
    return tuple(out)


def _build_dims(data: object, prefix: str) -> tuple[TopologyDimSpec, ...]:
    require(isinstance(data, list | tuple), prefix.rstrip("."), data,
            "must be a list of topology dimensions (kind, size, bandwidth_GBps, latency_ns)")
    assert isinstance(data, list | tuple)
    out = []
    for i, item in enumerate(data):
        dim = item if isinstance(item, TopologyDimSpec) else _build(TopologyDimSpec, item,
                                                                    f"{prefix}{i}.")
        assert isinstance(dim, TopologyDimSpec)
        out.append(dim)
    return tuple(out)


def _build(cls: type, data: object, prefix: str) -> object:
    require(isinstance(data, dict), prefix.rstrip("."), data, "must be a mapping")
    assert isinstance(data, dict)
    known = {f.name: f for f in fields(cls)}
    kwargs: dict[str, object] = {}
    for key, value in data.items():
        require(key in known, prefix + str(key), value,
                f"unknown key (known: {', '.join(known)})")
        nested = _NESTED.get((cls, key))
        if cls is SystemSpec and key == "pools":
            kwargs[key] = _build_pools(value, f"{prefix}{key}.")
        elif cls is SystemSpec and key == "scaleout_dims":
            kwargs[key] = _build_dims(value, f"{prefix}{key}.")
        elif nested and not (cls is DevicePool and value is None):
            kwargs[key] = _build(nested, value, f"{prefix}{key}.")
        else:
            kwargs[key] = value
    if cls is TopologyDimSpec:
        spec = TopologyDimSpec(**kwargs)  # type: ignore[arg-type]
        spec.validate(prefix)
        return spec
    if cls is CalibrationSpec:
        calib = CalibrationSpec(**kwargs)  # type: ignore[arg-type]
        calib.validate(prefix)
        return calib
    if cls is AcceleratorSpec and prefix != "system.accelerator.":
        try:  # AcceleratorSpec names its keys system.accelerator.*; a pool's live elsewhere
            return AcceleratorSpec(**kwargs)  # type: ignore[arg-type]
        except InputError as err:
            raise InputError(prefix + err.key.rpartition(".")[2], err.value, err.rule) from None
    return cls(**kwargs)


_NESTED: dict[tuple[type, str], type] = {
    (SystemSpec, "accelerator"): AcceleratorSpec,
    (SystemSpec, "scaleup"): TopologyDimSpec,
    (SystemSpec, "scaleout"): TopologyDimSpec,
    (SystemSpec, "calibration"): CalibrationSpec,
    (SystemSpec, "collective"): CollectiveSpec,
    (SystemSpec, "memory"): RemoteMemorySpec,
    (SystemSpec, "endpoint"): EndpointSpec,
    (DevicePool, "accelerator"): AcceleratorSpec,
    (DevicePool, "calibration"): CalibrationSpec,
    (DevicePool, "scaleup"): TopologyDimSpec,
}


def system_from_dict(data: dict[str, object]) -> SystemSpec:
    """Build a :class:`SystemSpec` from a plain nested dict (the resolved ``system`` config).

    Missing keys take the dataclass defaults; unknown keys raise
    :class:`~simcore.errors.InputError` naming them (``system.<path>``).
    """
    spec = _build(SystemSpec, data, "system.")
    assert isinstance(spec, SystemSpec)
    return spec
