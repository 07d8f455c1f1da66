"""Op templates: the distinct kernels of a workload graph and the node types built from them.

A transformer iteration has ~1e5 graph nodes but only a few dozen *distinct* ops (the same
layer forward repeats for every layer and micro-batch). Each node carries a ``template`` index;
a template is a weighted sum of *kernels*, and a kernel is one cost-model call (a GEMM, an
attention core, a memory-bound pass, a collective, a point-to-point send). Durations are then
computed once per kernel as (K, B) arrays, once per template as (U, B) = W @ kernels, and
gathered per node or summed per chain by the engine (DESIGN.md, "The vectorized engine").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

__all__ = ["COMPUTE", "KERNEL_COSTS", "OpTable"]

#: template kind of compute (anything else is an index into engine.result.COMM_KINDS)
COMPUTE = -1

#: kernel cost families and their argument names (cost-model signatures)
KERNEL_COSTS: dict[str, tuple[str, ...]] = {
    "gemm": ("m", "n", "k"),
    "attn": ("batch_heads", "seq_q", "seq_kv", "head_dim"),
    "mem": ("bytes",),
    "coll": ("comm_type", "bytes", "group_size", "ranks_per_node"),
    "p2p": ("bytes", "cross_node"),
}


@dataclass
class OpTable:
    """Interns kernels and templates; read by the evaluator.

    Attributes:
        kernels: (cost, args) per kernel index.
        templates: per template, the (kernel index, weight) parts.
        template_kind: per template, :data:`COMPUTE` or a comm-kind index.
        template_names: per template, a label for timelines.
    """

    kernels: list[tuple[str, tuple[float, ...]]] = field(default_factory=list)
    templates: list[tuple[tuple[int, float], ...]] = field(default_factory=list)
    template_kind: list[int] = field(default_factory=list)
    template_names: list[str] = field(default_factory=list)
    _kernel_ids: dict[tuple[str, tuple[float, ...]], int] = field(default_factory=dict)
    _template_ids: dict[tuple[str, tuple[tuple[int, float], ...], int], int] = field(
        default_factory=dict
    )

    def kernel(self, cost: str, *args: float) -> int:
        """Index of the kernel ``cost(args)`` (interned)."""
        if cost not in KERNEL_COSTS or len(args) != len(KERNEL_COSTS[cost]):
            raise ValueError(f"kernel {cost}{args}: unknown cost or wrong argument count")
        key = (cost, tuple(float(a) for a in args))
        kid = self._kernel_ids.get(key)
        if kid is None:
            kid = len(self.kernels)
            self._kernel_ids[key] = kid
            self.kernels.append(key)
        return kid

    def template(self, name: str, parts: Sequence[tuple[int, float]], kind: int = COMPUTE) -> int:
        """Index of the template ``sum(weight x kernel)`` called ``name`` (interned)."""
        frozen = tuple((int(k), float(w)) for k, w in parts)
        key = (name, frozen, kind)
        tid = self._template_ids.get(key)
        if tid is None:
            tid = len(self.templates)
            self._template_ids[key] = tid
            self.templates.append(frozen)
            self.template_kind.append(kind)
            self.template_names.append(name)
        return tid

    def scaled(self, tid: int, factor: float, suffix: str) -> int:
        """A template ``factor`` times template ``tid`` (e.g. one chunk of a split op)."""
        parts = [(k, w * factor) for k, w in self.templates[tid]]
        return self.template(self.template_names[tid] + suffix, parts, self.template_kind[tid])

    def weights(self) -> NDArray[np.float64]:
        """(U, K) dense matrix W with template durations = W @ kernel durations."""
        w = np.zeros((len(self.templates), len(self.kernels)))
        for t, parts in enumerate(self.templates):
            for k, weight in parts:
                w[t, k] += weight
        return w

    def kernel_args(self, cost: str) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
        """Kernel indices of family ``cost`` and their (n, nargs) argument matrix."""
        idx = [i for i, (c, _) in enumerate(self.kernels) if c == cost]
        args = np.array([self.kernels[i][1] for i in idx], dtype=np.float64)
        return np.asarray(idx, dtype=np.int64), args.reshape(len(idx), len(KERNEL_COSTS[cost]))
