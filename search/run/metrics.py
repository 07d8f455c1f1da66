"""Result columns of a simulated batch, and the cluster cost and power added to them.

A :class:`simcore.engine.result.BatchResult` becomes flat (B,) columns: its metrics
(``iteration_time_s``, ``compute_s``, ...), ``exposed_comm_<kind>_s``, ``feasible`` and
``reason``; throughput ``samples_per_s`` and ``tokens_per_s`` from the workload family's samples and
tokens per iteration (:meth:`simcore.workloads.WorkloadFamily.tokens_per_iter`: sequences x length
for the transformer and GNMT's target tokens; for a family without sequences, ResNet or DLRM, the
family defines tokens as samples), so a sweep mixing families has one set of metric names. Cost
and power come from :func:`simcore.cost.system_cost` (capital cost amortized
over the cluster's lifetime, facility power with PUE; see that module for the model and its
sources), vectorized over the batch; sweeps add them as columns and studies derive their
objectives from them (:mod:`search.study.objectives`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from simcore.cost import ClusterCostSpec, system_cost
from simcore.errors import InputError

__all__ = ["cluster_money", "cost_columns", "cost_spec_from", "per_iteration", "result_columns",
           "throughput_columns"]


def result_columns(res: Any) -> dict[str, NDArray[Any]]:
    """BatchResult -> flat columns (metrics, exposed_comm_<kind>_s, feasible, reason)."""
    from simcore.engine.result import METRICS

    cols: dict[str, NDArray[Any]] = {name: np.asarray(getattr(res, name), dtype=np.float64)
                                     for name in METRICS}
    for kind, value in sorted(res.exposed_comm_by_kind.items()):
        cols[f"exposed_comm_{kind}_s"] = np.asarray(value, dtype=np.float64)
    cols["feasible"] = np.asarray(res.feasible, dtype=bool)
    cols["reason"] = np.asarray([r or "" for r in res.reason], dtype=object)
    return cols


def per_iteration(model: Any, parallel: Any) -> tuple[int, int]:
    """(samples, tokens) of one iteration, as the workload's family counts them."""
    from simcore.workloads import family_of

    family = family_of(model)
    return family.samples_per_iter(model, parallel), family.tokens_per_iter(model, parallel)


def throughput_columns(model: Any, parallel: Any,
                       time_s: NDArray[np.float64]) -> dict[str, NDArray[np.float64]]:
    """``samples_per_s`` and ``tokens_per_s`` of (B,) iteration times (NaN where time is NaN)."""
    samples, tokens = per_iteration(model, parallel)
    time_s = np.asarray(time_s, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return {"samples_per_s": samples / time_s, "tokens_per_s": tokens / time_s}


def cost_spec_from(cfg: Mapping[str, Any]) -> ClusterCostSpec:
    """``search.cost`` (a plain mapping) -> :class:`ClusterCostSpec`."""
    known = set(ClusterCostSpec.__dataclass_fields__)
    for key in cfg:
        if key not in known:
            raise InputError(f"search.cost.{key}", cfg[key], "unknown cost key")
    try:
        return ClusterCostSpec(**dict(cfg))
    except InputError as err:
        raise InputError(f"search.cost.{err.key}", err.value, err.rule) from None
    except TypeError as err:  # a missing key
        raise InputError("search.cost", sorted(cfg), str(err)) from None


def cluster_money(systems: Sequence[Any], cost: ClusterCostSpec) -> Any:
    """:func:`simcore.cost.system_cost` of each system's cluster (vectorized; accelerators
    summed over each cluster's device pools)."""
    return system_cost(list(systems), cost)


def cost_columns(systems: Sequence[Any], time_s: NDArray[np.float64],
                 cost: ClusterCostSpec) -> dict[str, NDArray[Any]]:
    """``cost_usd_per_iter``, ``capex_usd`` and ``power_kw`` (kW, facility) per point."""
    money = cluster_money(systems, cost)
    return {"cost_usd_per_iter": money.cost_usd_per_iter(time_s), "capex_usd": money.capex_usd,
            "power_kw": money.facility_power_w / 1000.0}
