"""Workload families: a generator per family turns a spec and a parallelization into a graph.

:data:`REGISTRY` maps the config key ``workload.family`` to a
:class:`~simcore.workloads._base.WorkloadFamily`; :func:`family_of` finds a spec's family.
"""

from __future__ import annotations

from simcore.errors import InputError
from simcore.workloads._base import Workload, WorkloadFamily
from simcore.workloads.cnn.family import ResNetFamily
from simcore.workloads.recsys.family import DLRMFamily
from simcore.workloads.rnn.family import GNMTFamily
from simcore.workloads.traced.family import TracedFamily
from simcore.workloads.transformer.family import TransformerFamily

__all__ = ["REGISTRY", "Workload", "WorkloadFamily", "family_of", "get_family"]

#: family name -> family (the config key ``workload.family``)
REGISTRY: dict[str, WorkloadFamily] = {
    "transformer": TransformerFamily(),
    "resnet": ResNetFamily(),
    "gnmt": GNMTFamily(),
    "dlrm": DLRMFamily(),
    "traced": TracedFamily(),
}


def get_family(name: str) -> WorkloadFamily:
    """The family registered as ``name``."""
    fam = REGISTRY.get(name)
    if fam is None:
        raise InputError("workload.family", name, f"must be one of {', '.join(REGISTRY)}")
    return fam


def family_of(spec: object) -> WorkloadFamily:
    """The family of a spec: its ``family`` field if it has one, else its type."""
    name = getattr(spec, "family", None)
    if isinstance(name, str):
        return get_family(name)
    for fam in REGISTRY.values():
        if isinstance(spec, fam.spec_type):
            return fam
    raise InputError("workload", type(spec).__name__, "is the spec of no registered workload family")
