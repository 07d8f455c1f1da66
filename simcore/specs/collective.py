"""CollectiveSpec: the collective algorithm per network dimension (``conf/collective/``).

Mirrors ASTRA-sim's system JSON ``*-implementation`` lists and ``preferred-dataset-splits``
(reference/astra-sim-and-chakra.md §1.4, §2.1), plus in-switch reduction on Switch dimensions
(ASTRA-sim 2.0 paper; reference/methods-hap-ace-echo.md §4). A list holds one algorithm per
dimension of the system, ``[scale-up, scale-out]``; a single entry applies to both. ``auto``
keeps the calibrated NCCL-aware model (:mod:`simcore.network.collectives.nccl`); an explicit
algorithm uses its alpha-beta cost (:mod:`simcore.network.collectives.calibrated_algorithms`).

Field names are the YAML keys. Validated on construction.
"""

from __future__ import annotations

from dataclasses import dataclass

from simcore.errors import require

__all__ = ["ALGORITHMS", "CollectiveSpec"]

ALGORITHMS = ("auto", "ring", "direct", "halvingDoubling", "doubleBinaryTree")
_COMM_KEYS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")
# which algorithms ASTRA-sim implements per collective (reference §1.4)
_ALLOWED = {
    "all_reduce": ALGORITHMS,
    "all_gather": ("auto", "ring", "direct", "halvingDoubling"),
    "reduce_scatter": ("auto", "ring", "direct", "halvingDoubling"),
    "all_to_all": ("auto", "ring", "direct"),
}
NUM_DIMS = 2  # scale-up, scale-out (simcore.specs.system.SystemSpec)


@dataclass(frozen=True)
class CollectiveSpec:
    """Collective algorithms per dimension ``[scale-up, scale-out]`` (one entry: both).

    Attributes:
        name: preset name.
        all_reduce, all_gather, reduce_scatter, all_to_all: algorithm per dimension, one of
            :data:`ALGORITHMS`; ``auto`` (only alone on every dimension) = calibrated model.
        chunks_per_collective: chunks a collective is split into; chunks pipeline through
            the dimensions (ASTRA-sim ``preferred-dataset-splits``). Explicit algorithms only.
        in_network: all-reduce is reduced inside the switch on Switch dimensions.
    """

    name: str = "default"
    all_reduce: tuple[str, ...] = ("auto",)
    all_gather: tuple[str, ...] = ("auto",)
    reduce_scatter: tuple[str, ...] = ("auto",)
    all_to_all: tuple[str, ...] = ("auto",)
    chunks_per_collective: int = 1
    in_network: bool = False

    def __post_init__(self) -> None:
        p = "collective."
        for key in _COMM_KEYS:
            value = getattr(self, key)
            if isinstance(value, list | str):
                value = (value,) if isinstance(value, str) else tuple(value)
                object.__setattr__(self, key, value)
            require(isinstance(value, tuple) and 1 <= len(value) <= NUM_DIMS, p + key, value,
                    f"must be a list of 1..{NUM_DIMS} algorithms ([scale-up, scale-out])")
            for alg in value:
                require(alg in _ALLOWED[key], p + key, alg,
                        f"must be one of {', '.join(_ALLOWED[key])}")
            require("auto" not in value or set(value) == {"auto"}, p + key, list(value),
                    "auto cannot be mixed with explicit algorithms")
        c = self.chunks_per_collective
        require(isinstance(c, int) and not isinstance(c, bool) and c >= 1,
                p + "chunks_per_collective", c, "must be an integer >= 1")
        require(isinstance(self.in_network, bool), p + "in_network", self.in_network,
                "must be true or false")

    def per_dim(self, key: str) -> tuple[str, str]:
        """(scale-up, scale-out) algorithm of collective ``key`` (e.g. ``all_reduce``)."""
        algs: tuple[str, ...] = getattr(self, key)
        return (algs[0], algs[-1])

    @property
    def is_default(self) -> bool:
        """True when every collective uses the calibrated model unchanged."""
        return not self.in_network and all(
            set(getattr(self, k)) == {"auto"} for k in _COMM_KEYS)
