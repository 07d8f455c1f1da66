"""Collective algorithms: one module per algorithm, each its closed form, steps and Chakra ET graph.

:data:`REGISTRY` maps a name to its :class:`~simcore.network.collectives._base.CollectiveAlgorithm`;
:func:`algorithm` also takes a ``conf/collective`` alias (``auto`` = the calibrated NCCL model)
and :func:`astra_algorithm` an ASTRA-sim ``*-implementation`` string (reference/
astra-sim-and-chakra.md §1.4). Adding an algorithm = one module here and one line below; the
contract suite ``tests/contracts/test_collective_algorithms.py`` runs over every entry.
"""

from __future__ import annotations

from types import MappingProxyType

from simcore.errors import InputError
from simcore.network.collectives._base import CollectiveAlgorithm, Step
from simcore.network.collectives.direct import Direct
from simcore.network.collectives.double_binary_tree import DoubleBinaryTree
from simcore.network.collectives.halving_doubling import HalvingDoubling
from simcore.network.collectives.in_switch import InSwitch
from simcore.network.collectives.nccl import Nccl
from simcore.network.collectives.ring import Ring

__all__ = ["ASTRA_NAMES", "REGISTRY", "CollectiveAlgorithm", "Step", "algorithm", "astra_algorithm"]

REGISTRY: MappingProxyType[str, CollectiveAlgorithm] = MappingProxyType({
    a.name: a for a in (Ring(), Direct(), HalvingDoubling(), DoubleBinaryTree(), InSwitch(), Nccl())
})
_BY_NAME = {name: a for a in REGISTRY.values() for name in (a.name, *a.aliases)}
_BY_ASTRA = {name: a for a in REGISTRY.values() for name in a.astra_names}
ASTRA_NAMES = tuple(_BY_ASTRA)  # the native algorithm strings ASTRA-sim accepts (before directN)


def algorithm(name: str) -> CollectiveAlgorithm:
    """The algorithm called ``name`` (registry key or alias) in ``conf/collective``."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise InputError("collective.algorithm", name, f"must be one of {', '.join(sorted(_BY_NAME))}") from None


def astra_algorithm(name: str) -> CollectiveAlgorithm:
    """The algorithm of an ASTRA-sim implementation string (``ring``, ``oneDirect``, ...; no window)."""
    try:
        return _BY_ASTRA[name]
    except KeyError:
        raise InputError("implementation", name, "unknown native collective algorithm") from None
