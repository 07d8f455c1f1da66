"""Struct-of-arrays view of B systems, the input of every vectorized cost model.

:class:`SystemBatch` holds one (B,) float64 array per numeric field of
:class:`~simcore.specs.system.SystemSpec` (nested fields flattened with ``_``), so a cost model
evaluates B design points with one numpy expression (DESIGN.md, "The vectorized engine": every
node's duration is a (B,) vector). A single system is a batch of one.

Device pools add an axis: every per-device number (peak FLOP/s, HBM, price, TDP, calibration)
is also held as a (D, B) array ``pool_*`` (D pools, the same D for every system of a batch:
the pool counts are part of the structure key). The (B,) fields are the pool-0 rows of those
arrays, so a cost model written for one device type runs unchanged on pool 0;
:meth:`SystemBatch.pool` gives the batch as seen by a device of pool ``d`` (its (B,) fields are
pool ``d``'s), and :func:`gather_by_pool` picks, per op template, the row of the pool that
runs it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields, replace
from functools import partial
from operator import attrgetter
from typing import Any

import numpy as np
from numpy.typing import NDArray

from simcore.errors import InputError
from simcore.ir.intsets import unique_inverse
from simcore.specs.system import (
    PRECISIONS,
    AcceleratorSpec,
    CalibrationSpec,
    DevicePool,
    SystemSpec,
    TopologyDimSpec,
)

__all__ = ["SystemBatch", "as_column", "as_row", "gather_by_pool", "per_distinct"]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]

_CALIBRATION_KEYS = tuple(f.name for f in fields(CalibrationSpec))


def as_column(x: object) -> FloatArray:
    """A scalar or (U,) array of per-template values as a (U, 1) float column."""
    return np.asarray(x, dtype=np.float64).reshape(-1, 1)


def as_row(x: FloatArray) -> FloatArray:
    """A (B,) batch array as a (1, B) row, to broadcast against (U, 1) columns."""
    return x[None, :]


def _peak_flops(pool: DevicePool, precision: str) -> float:
    assert pool.accelerator is not None
    return float(getattr(pool.accelerator, f"peak_tflops_{precision}")) * 1e12


def _calibration(pool: DevicePool, key: str) -> float:
    return float(getattr(pool.calibration, key))


def _scaleup(pool: DevicePool) -> TopologyDimSpec:
    assert pool.scaleup is not None
    return pool.scaleup


def _accelerator(pool: DevicePool) -> AcceleratorSpec:
    assert pool.accelerator is not None
    return pool.accelerator


def _distinct(objs: list[Any]) -> tuple[list[Any], IntArray]:
    """Distinct objects (by identity, in order of their ``id``) and the index of each."""
    ids = np.fromiter(map(id, objs), dtype=np.int64, count=len(objs))
    _, first, idx = unique_inverse(ids)
    return [objs[i] for i in first.tolist()], idx


def per_distinct(get: Callable[[Any], Any], objs: Sequence[Any]) -> NDArray[Any]:
    """(B,) ``get(o)`` for each of ``objs``, called once per distinct object (by identity):
    the points of a sweep batch share their unchanged sub-specs, so a per-point read is a
    handful of calls instead of B."""
    uniq, idx = _distinct(list(objs))
    return np.asarray([get(o) for o in uniq]).take(idx, axis=0)


def _first_of(idx: IntArray, n: int) -> IntArray:
    """Position of the first occurrence of each of ``n`` distinct indices."""
    first = np.full(n, idx.size, dtype=np.int64)
    np.minimum.at(first, idx, np.arange(idx.size, dtype=np.int64))
    return first


def gather_by_pool(per_pool: FloatArray, pool_of_row: object) -> FloatArray:
    """Rows of a (D, U, B) per-pool array picked per template: (U, B) with row ``u`` taken
    from pool ``pool_of_row[u]`` (a (U,) int array, or one int for every row)."""
    arr = np.asarray(per_pool, dtype=np.float64)
    rows = np.broadcast_to(np.asarray(pool_of_row, dtype=np.int64), (arr.shape[1],))
    if rows.size and (rows.min() < 0 or rows.max() >= arr.shape[0]):
        raise InputError("pool", int(rows.max()), f"must be in [0, {arr.shape[0]})")
    return np.asarray(arr[rows, np.arange(arr.shape[1])])


@dataclass(frozen=True, eq=False)
class SystemBatch:
    """B systems as arrays of shape (B,), per-device numbers also per pool, shape (D, B).

    Attributes:
        specs: the systems, in batch order.
        num_gpus, gpus_per_node: cluster shape.
        peak_flops: precision -> (B,) dense peak FLOP/s (not TFLOP/s).
        hbm_bandwidth_Bps: (B,) peak HBM bandwidth, bytes/s.
        hbm_capacity_bytes: (B,) HBM capacity, bytes.
        scaleup_bandwidth_Bps, scaleout_bandwidth_Bps: (B,) per-GPU line rate, bytes/s.
        scaleup_latency_s, scaleout_latency_s: (B,) per-hop latency, s.
        calib: calibration key -> (B,) values (units as in :class:`CalibrationSpec`).
        pool_count: (D, B) accelerators per pool.
        pool_peak_flops, pool_hbm_bandwidth_Bps, pool_hbm_capacity_bytes, pool_calib: the
            per-device fields above per pool, (D, B); the (B,) fields are their row ``pool_index``.
        pool_price_usd, pool_tdp_w: (D, B) price and TDP of one accelerator of each pool.
        pool_scaleup_bandwidth_Bps, pool_scaleup_latency_s: (D, B) each pool's scale-up
            fabric (asymmetric topologies); the (B,) scale-up fields are row ``pool_index``.
        pool_index: which pool the (B,) fields show (0 unless made by :meth:`pool`).
    """

    specs: tuple[SystemSpec, ...]
    num_gpus: FloatArray
    gpus_per_node: FloatArray
    peak_flops: dict[str, FloatArray]
    hbm_bandwidth_Bps: FloatArray
    hbm_capacity_bytes: FloatArray
    scaleup_bandwidth_Bps: FloatArray
    scaleout_bandwidth_Bps: FloatArray
    scaleup_latency_s: FloatArray
    scaleout_latency_s: FloatArray
    calib: dict[str, FloatArray]
    pool_count: FloatArray
    pool_peak_flops: dict[str, FloatArray]
    pool_hbm_bandwidth_Bps: FloatArray
    pool_hbm_capacity_bytes: FloatArray
    pool_calib: dict[str, FloatArray]
    pool_price_usd: FloatArray
    pool_tdp_w: FloatArray
    pool_scaleup_bandwidth_Bps: FloatArray
    pool_scaleup_latency_s: FloatArray
    pool_index: int = 0

    @classmethod
    def from_specs(cls, systems: Sequence[SystemSpec]) -> SystemBatch:
        """Stack ``systems`` (at least one, all with the same number of pools) into arrays of
        shape (B,) and (D, B)."""
        if len(systems) == 0:
            raise InputError("systems", 0, "a batch needs at least one system")
        num_pools = {max(1, n) for n in {len(s.pools) for s in systems}}  # SystemSpec.num_pools
        if len(num_pools) != 1:
            raise InputError("system.pools", sorted(num_pools),
                             "all systems of a batch must have the same number of pools")
        if all(not s.pools for s in systems):  # one pool: read the system fields directly
            return cls._one_pool(systems)
        return cls._from_devices(systems)

    @classmethod
    def _from_devices(cls, systems: Sequence[SystemSpec]) -> SystemBatch:
        """:meth:`from_specs` through each system's resolved device pools (any pools)."""
        devices = [s.devices for s in systems]

        def col(get: Callable[[SystemSpec], float]) -> FloatArray:
            return np.array([float(get(s)) for s in systems], dtype=np.float64)

        # sweeps share accelerator and calibration objects between points: read each distinct
        # object once per field and spread by index (same values as reading every point)
        num_d = len(devices[0])
        by_acc = [_distinct([dev[d].accelerator for dev in devices]) for d in range(num_d)]
        by_cal = [_distinct([dev[d].calibration for dev in devices]) for d in range(num_d)]
        by_up = [_distinct([dev[d].scaleup for dev in devices]) for d in range(num_d)]
        out_objs, out_idx = _distinct([s.scaleout for s in systems])

        def scaleout(get: Callable[[TopologyDimSpec], float]) -> FloatArray:
            return np.array([float(get(o)) for o in out_objs], dtype=np.float64)[out_idx]

        def grid(get: Callable[[DevicePool], float], part: list[tuple[list[Any], IntArray]]
                 | None = None) -> FloatArray:
            if part is None:
                return np.array([[float(get(dev[d])) for dev in devices]
                                 for d in range(num_d)], dtype=np.float64)
            out = np.empty((num_d, len(devices)), dtype=np.float64)
            for d, (objs, idx) in enumerate(part):
                first = [devices[int(i)][d] for i in _first_of(idx, len(objs))]
                out[d] = np.array([float(get(pool)) for pool in first], dtype=np.float64)[idx]
            return out

        peak = {p: grid(partial(_peak_flops, precision=p), by_acc) for p in PRECISIONS}
        hbm_bw = grid(lambda d: _accelerator(d).hbm_bandwidth_GBps * 1e9, by_acc)
        hbm_cap = grid(lambda d: _accelerator(d).hbm_capacity_gib * 2**30, by_acc)
        calib = {k: grid(partial(_calibration, key=k), by_cal) for k in _CALIBRATION_KEYS}
        up_bw = grid(lambda d: _scaleup(d).bandwidth_GBps * 1e9, by_up)
        up_lat = grid(lambda d: _scaleup(d).latency_ns * 1e-9, by_up)
        return cls(
            specs=tuple(systems),
            num_gpus=col(lambda s: s.num_gpus),
            gpus_per_node=col(lambda s: s.gpus_per_node),
            peak_flops={p: v[0] for p, v in peak.items()},
            hbm_bandwidth_Bps=hbm_bw[0],
            hbm_capacity_bytes=hbm_cap[0],
            scaleup_bandwidth_Bps=up_bw[0],
            scaleout_bandwidth_Bps=scaleout(lambda o: o.bandwidth_GBps * 1e9),
            scaleup_latency_s=up_lat[0],
            scaleout_latency_s=scaleout(lambda o: o.latency_ns * 1e-9),
            calib={k: v[0] for k, v in calib.items()},
            pool_count=grid(lambda d: d.count),
            pool_peak_flops=peak,
            pool_hbm_bandwidth_Bps=hbm_bw,
            pool_hbm_capacity_bytes=hbm_cap,
            pool_calib=calib,
            pool_price_usd=grid(lambda d: _accelerator(d).price_usd, by_acc),
            pool_tdp_w=grid(lambda d: _accelerator(d).tdp_w, by_acc),
            pool_scaleup_bandwidth_Bps=up_bw,
            pool_scaleup_latency_s=up_lat,
        )

    @classmethod
    def _one_pool(cls, systems: Sequence[SystemSpec]) -> SystemBatch:
        """:meth:`from_specs` for systems without ``pools`` (their one device pool is the
        system's accelerator, calibration, scale-up fabric and ``num_gpus``): the same
        arrays, each field read once per distinct sub-spec object."""
        def col(name: str, objs: tuple[list[Any], IntArray], scale: float = 1.0) -> FloatArray:
            # the field of each distinct object as float64, times ``scale`` in numpy: the
            # same IEEE products as ``float(x) * scale`` per object (a random sweep has a
            # distinct object per point)
            uniq, idx = objs
            vals = np.fromiter(map(attrgetter(name), uniq), dtype=np.float64, count=len(uniq))
            return (vals * scale if scale != 1.0 else vals).take(idx)

        accs = _distinct([s.accelerator for s in systems])
        cals = _distinct([s.calibration for s in systems])
        ups = _distinct([s.scaleup for s in systems])
        outs = _distinct([s.scaleout for s in systems])
        peak = {p: col(f"peak_tflops_{p}", accs, 1e12) for p in PRECISIONS}
        hbm_bw = col("hbm_bandwidth_GBps", accs, 1e9)
        hbm_cap = col("hbm_capacity_gib", accs, 2**30)
        calib = {k: col(k, cals) for k in _CALIBRATION_KEYS}
        up_bw = col("bandwidth_GBps", ups, 1e9)
        up_lat = col("latency_ns", ups, 1e-9)
        num_gpus = np.array([float(s.num_gpus) for s in systems], dtype=np.float64)
        return cls(
            specs=tuple(systems),
            num_gpus=num_gpus,
            gpus_per_node=np.array([float(s.gpus_per_node) for s in systems], dtype=np.float64),
            peak_flops=peak,
            hbm_bandwidth_Bps=hbm_bw,
            hbm_capacity_bytes=hbm_cap,
            scaleup_bandwidth_Bps=up_bw,
            scaleout_bandwidth_Bps=col("bandwidth_GBps", outs, 1e9),
            scaleup_latency_s=up_lat,
            scaleout_latency_s=col("latency_ns", outs, 1e-9),
            calib=calib,
            pool_count=num_gpus[None, :].copy(),
            pool_peak_flops={p: v[None, :] for p, v in peak.items()},
            pool_hbm_bandwidth_Bps=hbm_bw[None, :],
            pool_hbm_capacity_bytes=hbm_cap[None, :],
            pool_calib={k: v[None, :] for k, v in calib.items()},
            pool_price_usd=col("price_usd", accs)[None, :],
            pool_tdp_w=col("tdp_w", accs)[None, :],
            pool_scaleup_bandwidth_Bps=up_bw[None, :],
            pool_scaleup_latency_s=up_lat[None, :],
        )

    @property
    def num_pools(self) -> int:
        """The number of device pools D."""
        return int(self.pool_count.shape[0])

    def pool(self, d: int) -> SystemBatch:
        """The batch as seen by a device of pool ``d``: its (B,) per-device fields are pool
        ``d``'s rows, its scale-up fabric too (scale-out and cluster fields unchanged; the
        (D, B) arrays kept whole)."""
        if not (isinstance(d, int | np.integer) and 0 <= d < self.num_pools):
            raise InputError("pool", d, f"must be in [0, {self.num_pools})")
        d = int(d)
        if d == self.pool_index:
            return self
        return replace(
            self,
            peak_flops={p: v[d] for p, v in self.pool_peak_flops.items()},
            hbm_bandwidth_Bps=self.pool_hbm_bandwidth_Bps[d],
            hbm_capacity_bytes=self.pool_hbm_capacity_bytes[d],
            calib={k: v[d] for k, v in self.pool_calib.items()},
            scaleup_bandwidth_Bps=self.pool_scaleup_bandwidth_Bps[d],
            scaleup_latency_s=self.pool_scaleup_latency_s[d],
            pool_index=d,
        )

    @property
    def size(self) -> int:
        """The batch size B."""
        return int(self.num_gpus.shape[0])

    def peak(self, precision: str) -> FloatArray:
        """(B,) dense peak FLOP/s at ``precision``.

        Raises:
            InputError: unknown precision, or unsupported (peak 0) by some system of the batch.
        """
        if precision not in self.peak_flops:
            raise InputError("parallel.precision", precision,
                             f"must be one of {', '.join(PRECISIONS)}")
        peak = self.peak_flops[precision]
        if np.any(peak <= 0):
            dev = self.specs[int(np.argmax(peak <= 0))].devices[self.pool_index]
            bad = _accelerator(dev).name
            raise InputError("parallel.precision", precision,
                             f"not supported by accelerator {bad}")
        return peak
