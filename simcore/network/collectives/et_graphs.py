"""Collective algorithms written out as custom-collective Chakra ET graphs (one per rank).

Each registry algorithm writes the message pattern of its steps (its ``et_graph``; the modules
of :mod:`simcore.network.collectives` describe the patterns, reference/astra-sim-and-chakra.md
§1.4); this module checks the request and builds the traces. Ranks are positions in the
communicator; the file for rank r is ``<prefix>.<r>.et`` (§1.4, custom collectives), written by
:func:`write_collective`.
"""

from __future__ import annotations

from simcore.errors import InputError
from simcore.network.collectives import REGISTRY
from simcore.network.collectives._base import ET_KINDS
from simcore.traces.chakra.export import write_traces as write_collective  # <prefix>.<rank>.et
from simcore.traces.chakra.trace import EtTrace

__all__ = ["build_collective", "et_algorithms", "write_collective"]


def et_algorithms() -> tuple[str, ...]:
    """Names of the registry algorithms that write ET graphs (of some collective)."""
    return tuple(sorted(name for name, a in REGISTRY.items()
                        if any(a.et_supports(kind) is None for kind in ET_KINDS)))


def build_collective(
    algorithm: str, collective: str, num_ranks: int, size_bytes: int, reduce_micros: int = 0,
    step_micros: int = 0,
) -> list[EtTrace]:
    """Per-rank ET graphs of ``algorithm`` for ``collective`` over ``num_ranks`` ranks.

    Args:
        algorithm: a registry name of :func:`et_algorithms` (ASTRA-sim config strings).
        collective: ``all_reduce``, ``reduce_scatter`` or ``all_gather``.
        num_ranks: n >= 2.
        size_bytes: D, the collective's size as ASTRA-sim's ``comm_size`` (all-gather: per rank).
        reduce_micros: duration of each reduction COMP node.
        step_micros: a per-step system-layer delay (ASTRA-sim's endpoint delay: once before
            the first step and after every receive), added as COMP nodes; algorithms with
            ``et_step_delays`` only (0 = none).

    Raises:
        InputError: unknown algorithm/collective, n < 2, or D not divisible as needed.
    """
    names = et_algorithms()
    if algorithm not in names:
        raise InputError("collective.algorithm", algorithm, f"must be one of {list(names)}")
    if collective not in ET_KINDS:
        raise InputError("collective.type", collective, f"must be one of {sorted(ET_KINDS)}")
    if num_ranks < 2:
        raise InputError("collective.num_ranks", num_ranks, "needs at least 2 ranks")
    alg = REGISTRY[algorithm]
    divisor = alg.et_divisor(num_ranks)
    if size_bytes <= 0 or (collective != "all_gather" and size_bytes % divisor):
        raise InputError("collective.size_bytes", size_bytes, f"must be a positive multiple of {divisor}")
    if step_micros and not alg.et_step_delays:
        with_steps = [n for n in names if REGISTRY[n].et_step_delays]
        raise InputError("collective.step_micros", step_micros, f"only {', '.join(with_steps)} have steps")
    graphs = alg.et_graph(collective, num_ranks, size_bytes, reduce_micros, step_micros)
    return [g.builder.build(path=f"rank {g.rank}") for g in graphs]
