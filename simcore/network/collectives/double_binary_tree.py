"""Double binary tree: reduce up a heap-ordered binary tree, broadcast down it; a mirrored tree too.

ASTRA-sim's ``DoubleBinaryTreeAllReduce`` (reference/astra-sim-and-chakra.md §1.4): a rank
receives (and reduces) its children's buffers, sends to its parent and receives the result back,
then sends it to its children; the tree over positions ``0..n-1`` is mirrored (position
``n-1-pos``) on odd chunks, so two chunks of D/2 use the two trees of NCCL's double binary tree.
Like ASTRA-sim's it runs an all-reduce whatever phase it is asked for (its output is its input).
Closed form: 2 ceil(log2 p) steps and 2 D on the wire, the busiest rank's bytes (an inner node
with two children in one tree, a leaf in the other) from 5 ranks on; smaller trees send less.
The whole collective (``steps``, the ET graph) is the two trees, each carrying D/2.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from simcore.network.collectives._base import AR, CollectiveAlgorithm, FloatArray, Step
from simcore.network.collectives._et import RankGraph

__all__ = ["DoubleBinaryTree"]


def _tree_links(n: int, mirrored: bool) -> tuple[list[int], list[list[int]]]:
    """Parent (-1 for the root) and children of each rank in a heap-ordered binary tree."""
    order = list(range(n))[::-1] if mirrored else list(range(n))
    parent = [-1] * n
    children: list[list[int]] = [[] for _ in range(n)]
    for pos in range(1, n):
        child, par = order[pos], order[(pos - 1) // 2]
        parent[child] = par
        children[par].append(child)
    return parent, children


class DoubleBinaryTree(CollectiveAlgorithm):
    """ASTRA-sim's ``doubleBinaryTree`` (all-reduce)."""

    name: ClassVar[str] = "doubleBinaryTree"
    astra_names: ClassVar[tuple[str, ...]] = ("doubleBinaryTree",)
    kinds: ClassVar[tuple[str, ...]] = (AR,)
    closed_form_min_ranks: ClassVar[int] = 5

    def _phase(self, kind: str, p: FloatArray, nbytes: FloatArray) -> tuple[FloatArray, FloatArray]:
        return np.asarray(2.0 * np.ceil(np.log2(p))), np.asarray(2.0 * nbytes)

    def lanes(self, comm: str, n: int, pos: int, size: int, chunk: int = 0, window: int = 0
              ) -> list[list[Step]]:
        mirror = chunk % 2 == 1
        node = n - 1 - pos if mirror else pos

        def real(p: int) -> int:
            return n - 1 - p if mirror else p

        kids = tuple(real(c) for c in (2 * node + 1, 2 * node + 2) if c < n)
        steps: list[Step] = []
        if kids:
            steps.append(Step((), kids, size, True))
        if node > 0:
            parent = real((node - 1) // 2)
            steps.append(Step((parent,), (parent,), size, False))
        if kids:
            steps.append(Step(kids, (), size, False))
        return [steps]

    def steps(self, comm: str, n: int, pos: int, size: int) -> list[Step]:
        """Both trees, each over half of the buffer."""
        return [s for chunk in (0, 1) for lane in self.lanes(comm, n, pos, size // 2, chunk) for s in lane]

    def final_size(self, comm: str, size: int, n: int) -> int:
        return size

    def et_divisor(self, n: int) -> int:
        return 2

    def _et_graph(self, comm: str, n: int, size: int, reduce_micros: int, step_micros: int
                  ) -> list[RankGraph]:
        graphs = [RankGraph(r, reduce_micros) for r in range(n)]
        half = size // 2
        for t, mirrored in enumerate((False, True)):
            parent, children = _tree_links(n, mirrored)
            for r, g in enumerate(graphs):
                reduced = [g.reduce([g.recv(c, half, 2 * t, [])], half) for c in children[r]]
                if parent[r] >= 0:
                    g.send(parent[r], half, 2 * t, reduced)
                    got = [g.recv(parent[r], half, 2 * t + 1, [])]
                else:
                    got = reduced
                for c in children[r]:
                    g.send(c, half, 2 * t + 1, got)
        return graphs
