"""OmegaConf resolvers of simsweep configs.

``${pool_gpus:${.pools}}`` is the sum of the ``count`` of a cluster's device pools
(``conf/system/mixed_*.yaml`` set ``num_gpus`` with it), so a sweep or study that changes a
pool's size (``system.pools.1.count=16,32,48``) gets a consistent ``num_gpus`` (and ``dp``)
without stating it: the interpolation is resolved after the overrides are applied.
"""

from __future__ import annotations

from typing import Any

from omegaconf import OmegaConf

from simcore.errors import InputError

__all__ = ["pool_gpus", "register_resolvers"]


def pool_gpus(pools: Any) -> int:
    """Accelerators in ``pools`` (a list of mappings, each with a whole ``count``)."""
    if pools is None or isinstance(pools, str) or not hasattr(pools, "__iter__"):
        raise InputError("system.pools", pools, "pool_gpus needs a list of device pools")
    total = 0
    for i, pool in enumerate(pools):
        count = pool.get("count") if hasattr(pool, "get") else None
        if isinstance(count, bool) or not isinstance(count, int):
            raise InputError(f"system.pools.{i}.count", count, "must be a whole number")
        total += count
    return total


def register_resolvers() -> None:
    """Register the resolvers (idempotent)."""
    if not OmegaConf.has_resolver("pool_gpus"):
        OmegaConf.register_new_resolver("pool_gpus", pool_gpus)
