"""Fidelities: how a compiled workload graph is costed (calibrated to real hardware, or ASTRA-sim).

:data:`REGISTRY` maps the config key ``fidelity`` to a :class:`~simcore.fidelity._base.Fidelity`.
"""

from __future__ import annotations

from simcore.errors import InputError
from simcore.fidelity._base import FEATURES, Fidelity
from simcore.fidelity.astra.fidelity import AstraFidelity
from simcore.fidelity.calibrated import CalibratedFidelity

__all__ = ["FEATURES", "FIDELITY_MODES", "REGISTRY", "Fidelity", "get_fidelity"]

#: fidelity name -> fidelity
REGISTRY: dict[str, Fidelity] = {
    "calibrated": CalibratedFidelity(),
    "astra": AstraFidelity(),
}

#: the registered names, in registry order
FIDELITY_MODES = tuple(REGISTRY)


def get_fidelity(name: str) -> Fidelity:
    """The fidelity registered as ``name``."""
    fid = REGISTRY.get(name)
    if fid is None:
        raise InputError("fidelity", name, f"must be one of {', '.join(REGISTRY)}")
    return fid
