"""Megatron-style tensor parallelism of a traced model's named blocks (Shoeybi et al. 2019).

The linear layers of every named block (the matrix products that read a parameter, in forward
program order) are taken in pairs: the first of a pair is *column-parallel* (its weight split
along the output features, each of the ``tp`` ranks computes ``1/tp`` of the outputs), the
second *row-parallel* (split along the input features, each rank a partial sum of the full
output). Everything the block computes between the two runs on the split activations (the
attention heads between QKV and the output projection, the activation between the MLP's two
products) and costs ``1/tp``; the rest (layer norms, residual adds) is replicated. A single
linear layer after the blocks is the vocabulary-parallel output layer (column-parallel; the
loss after it runs on the split logits, Megatron's parallel cross-entropy, whose per-token
scalars are not counted, as the transformer family does not). The embedding stays replicated.

Communication (Megatron's ``f``/``g`` operators, all-reduce over the ``tp`` group): in forward,
one all-reduce of the row-parallel product's output; in backward, one of the column-parallel
product's input gradient. Per micro-batch that is ``4 x blocks`` all-reduces of the block's
activation for a GPT block (two pairs), plus one for the output layer's input gradient.

Backward ops follow their forward op (:attr:`~simcore.traces.pytorch.step.TracedOp.twin`): the
data- and weight-gradient products of a split linear layer are split along the same weight
dimension (where ``x W^T`` and its gradients put it, else the dimension equal to the split
feature count: the GEMM time model is symmetric in ``m, n, k``), the
backward of an op inside a split region costs ``1/tp``. Split weights hold ``1/tp`` of their
elements per rank (biases stay whole: a small overcount).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from simcore.errors import InputError
from simcore.traces.pytorch.step import AFTER_BLOCKS, TracedOp, TracedStep

__all__ = ["COLUMN", "ROW", "TpSplit", "linear_roles", "split_step"]

COLUMN, ROW = 1, 2


@dataclass(frozen=True)
class TpSplit:
    """One tensor-parallel rank's view of a traced step.

    Attributes:
        step: the step with every op and parameter as one rank holds it.
        allreduce_after: op index -> bytes of the TP all-reduce issued after that op.
        roles: forward op index of each split linear layer -> :data:`COLUMN` / :data:`ROW`.
    """

    step: TracedStep
    allreduce_after: dict[int, int]
    roles: dict[int, int]


def linear_roles(step: TracedStep, tp: int) -> dict[int, int]:
    """Forward op index -> :data:`COLUMN` / :data:`ROW` of the split linear layers.

    Raises:
        InputError: no blocks were named, they hold no linear layer, a block has an odd
            number of linear layers, or a split feature count is not divisible by ``tp``.
    """
    if step.num_blocks == 0:
        raise InputError("parallel.tp", tp, "needs the repeated blocks named when tracing "
                         "(--blocks): their linear layers are the ones split")
    by_block: dict[int, list[int]] = {}
    for i, op in enumerate(step.ops):
        if op.phase == 0 and op.gemms and op.param >= 0:
            by_block.setdefault(op.block, []).append(i)
    roles: dict[int, int] = {}
    for block, idx in sorted(by_block.items()):
        if block >= 0:
            if len(idx) % 2:
                raise InputError("parallel.tp", tp, f"block {block} has {len(idx)} linear layers; "
                                 "they are split in column-parallel / row-parallel pairs")
            roles.update({i: COLUMN if j % 2 == 0 else ROW for j, i in enumerate(idx)})
        elif block == AFTER_BLOCKS and len(idx) == 1:
            roles[idx[0]] = COLUMN
    if not any(block >= 0 for block in by_block):
        raise InputError("parallel.tp", tp, "finds no linear layer (a product reading a weight) "
                         "in the named blocks; a trace written before weights were tagged must be "
                         "traced again")
    for i, role in roles.items():
        _m, n, k, _c = step.ops[i].gemms[0]
        features = n if role == COLUMN else k
        if features % tp:
            raise InputError("parallel.tp", tp, f"must divide the {features} features op {i} "
                             f"({step.ops[i].name}) splits")
    return roles


def _regions(step: TracedStep, roles: dict[int, int]) -> list[bool]:
    """Per op: a forward op between a column-parallel product and its row-parallel partner
    (or after the vocabulary-parallel output layer), i.e. on split activations."""
    inside = [False] * len(step.ops)
    order = sorted(roles)
    for j, i in enumerate(order):
        if roles[i] != COLUMN:
            continue
        end = order[j + 1] if j + 1 < len(order) and roles[order[j + 1]] == ROW else len(step.ops)
        for x in range(i + 1, end):
            if step.ops[x].phase == 0:
                inside[x] = True
    return inside


def _split_dim(gemm: tuple[int, int, int, int], features: int, tp: int,
               prefer: int) -> tuple[int, int, int, int]:
    """``gemm`` with its split dimension divided: ``prefer`` (where ``x @ W^T`` and its
    gradients put it) if it has the feature count, else the first one that has it."""
    dims = list(gemm[:3])
    at = prefer if dims[prefer] == features else (dims.index(features) if features in dims else 1)
    dims[at] //= tp
    return dims[0], dims[1], dims[2], gemm[3]


def _prefer(role: int, forward: bool, reads_weight: bool) -> int:
    """Index in ``(m, n, k)`` of the split features: ``y = x W^T`` is ``(T, out, in)``, its
    input gradient ``dy W`` is ``(T, in, out)``, its weight gradient ``dy^T x`` ``(out, in, T)``."""
    if role == COLUMN:
        return 1 if forward else (2 if reads_weight else 0)
    return 2 if forward else 1


def _split_rows(gemm: tuple[int, int, int, int], tp: int) -> tuple[int, int, int, int]:
    m, n, k, count = gemm
    return (m, n, k, count // tp) if count % tp == 0 else (m // tp, n, k, count)


def _scaled(op: TracedOp, tp: int, gemms: tuple[tuple[int, int, int, int], ...],
            partial_sums: bool = False) -> TracedOp:
    """``op`` on one TP rank: ``1/tp`` of its work and bytes (a product writing partial sums
    of a full-size output, which the all-reduce then sums, writes all of it)."""
    att = op.attention
    if att:
        att = (att[0] / tp, *att[1:])
    written = op.bytes_written if partial_sums else op.bytes_written // tp
    return replace(op, flops=op.flops / tp, bytes_read=op.bytes_read // tp,
                   bytes_written=written, gemms=gemms, attention=att)


_SPLITS: dict[tuple[int, int], tuple[TracedStep, TpSplit]] = {}  # (id(step), tp), newest last
_SPLITS_MAX = 8


def split_step(step: TracedStep, tp: int) -> TpSplit:
    """The step as one of ``tp`` tensor-parallel ranks runs it (``tp = 1``: unchanged; the
    last few splits are remembered per step object).

    Raises:
        InputError: see :func:`linear_roles`; or ``tp`` does not divide the batch x heads of
            a split attention core.
    """
    if tp == 1:
        return TpSplit(step, {}, {})
    hit = _SPLITS.get((id(step), tp))
    if hit is not None and hit[0] is step:
        return hit[1]
    out = _split(step, tp)
    if len(_SPLITS) >= _SPLITS_MAX:
        del _SPLITS[next(iter(_SPLITS))]
    _SPLITS[(id(step), tp)] = (step, out)
    return out


def _split(step: TracedStep, tp: int) -> TpSplit:
    roles = linear_roles(step, tp)
    inside = _regions(step, roles)
    ops: list[TracedOp] = []
    after: dict[int, int] = {}
    split_params: set[int] = set()
    for i, op in enumerate(step.ops):
        src = i if op.phase == 0 else op.twin
        role = roles.get(src, 0) if src >= 0 else 0
        if role:
            _m, n, k, _c = step.ops[src].gemms[0]
            features = n if role == COLUMN else k
            reads_weight = op.param == step.ops[src].param
            # all-reduced: the row-parallel output, the column-parallel input gradient
            reduced = (op.phase == 0 and role == ROW) or (op.phase == 1 and role == COLUMN
                                                          and reads_weight)
            at = _prefer(role, op.phase == 0, reads_weight)
            ops.append(_scaled(op, tp, tuple(_split_dim(g, features, tp, at) for g in op.gemms),
                               partial_sums=reduced))
            split_params.add(step.ops[src].param)
            if reduced:
                after[i] = op.bytes_written
        elif src >= 0 and inside[src]:
            if op.attention and op.attention[0] % tp:
                raise InputError("parallel.tp", tp, f"must divide the {op.attention[0]:g} "
                                 f"batch x heads of attention op {i} ({op.name})")
            ops.append(_scaled(op, tp, tuple(_split_rows(g, tp) for g in op.gemms)))
        else:
            ops.append(op)
    params = tuple(replace(p, numel=p.numel // tp) if i in split_params else p
                   for i, p in enumerate(step.params))
    fwd_full = sum(op.bytes_written for op in step.ops if op.phase == 0)
    fwd_local = sum(op.bytes_written for op in ops if op.phase == 0)
    activations = int(step.activation_bytes * fwd_local / max(fwd_full, 1))
    local = replace(step, ops=tuple(ops), params=params, activation_bytes=activations)
    return TpSplit(local, after, roles)
