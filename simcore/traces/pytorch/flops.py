"""FLOPs and kernel shapes of the aten ops that do arithmetic (torch-free).

Counting convention (model FLOPs, as Narayanan et al. 2021 and the transformer family's
:meth:`~simcore.workloads.transformer.spec.ModelSpec.model_flops_per_sample`): one
multiply-accumulate is 2 FLOPs and only matrix products count; element-wise and reduction ops
are memory-bound kernels costed by their bytes, with 0 FLOPs here. (torchvision's published
"GFLOPS" of a model, e.g. 4.09 for ResNet-50, count multiply-accumulates: half of these.)

- ``mm`` ``[m,k] @ [k,n]``, ``addmm`` (bias ignored): ``2 m n k``; ``bmm`` / ``baddbmm``
  ``[b,m,k] @ [b,k,n]``: ``2 b m n k``.
- ``convolution``: ``2 x numel(out) x numel(weight) / C_out`` (= ``C_in/groups x prod(kernel)``
  MACs per output element; transposed: ``numel(input) x numel(weight) / C_in``). Its GEMM for the
  kernel-time model is the implicit GEMM ``m = N prod(out spatial)``, ``n = C_out / groups``,
  ``k = C_in / groups x prod(kernel)``, once per group.
- ``convolution_backward``: the input gradient and the weight gradient each cost one forward
  convolution (``output_mask`` says which are computed).
- fused attention ``[B,H,S_q,D]``: forward ``4 B H S_q S_kv D`` (two products, full count as
  Megatron reports, whatever the causal mask); backward twice that (four products).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from math import prod
from typing import Any

__all__ = ["ATTENTION_BWD", "ATTENTION_FWD", "Arith", "arithmetic"]

Shape = tuple[int, ...]

ATTENTION_FWD = frozenset({
    "aten::_scaled_dot_product_flash_attention", "aten::_scaled_dot_product_efficient_attention",
    "aten::_scaled_dot_product_flash_attention_for_cpu", "aten::_scaled_dot_product_cudnn_attention",
    "aten::_flash_attention_forward", "aten::_efficient_attention_forward",
})
ATTENTION_BWD = frozenset(n + "_backward" for n in ATTENTION_FWD)


@dataclass(frozen=True)
class Arith:
    """What an arithmetic op computes.

    Attributes:
        flops: model FLOPs (2 per multiply-accumulate).
        gemms: ``(m, n, k, count)`` GEMMs the kernel-time model costs (``count`` alike).
        attention: ``(batch_heads, seq_q, seq_kv, head_dim, weight)`` of a fused attention core
            (weight 1 forward, 2.5 backward: FlashAttention-2's backward), or empty.
    """

    flops: float
    gemms: tuple[tuple[int, int, int, int], ...] = ()
    attention: tuple[float, ...] = ()


_NONE = Arith(0.0)


def _gemm(m: int, n: int, k: int, count: int = 1) -> Arith:
    return Arith(2.0 * m * n * k * count, ((m, n, k, count),))


def _conv(inp: Shape, weight: Shape, out: Shape, groups: int, transposed: bool) -> Arith:
    """One forward convolution as an implicit GEMM per group."""
    kernel = prod(weight[2:])
    if transposed:  # weight [C_in, C_out/g, *k]: the transpose of the forward GEMM
        m, n, k = inp[0] * prod(inp[2:]), weight[1] * kernel, weight[0] // groups
        macs = prod(inp) * prod(weight) / weight[0]
    else:
        m, n, k = out[0] * prod(out[2:]), weight[0] // groups, weight[1] * kernel
        macs = prod(out) * prod(weight) / weight[0]
    return Arith(2.0 * macs, ((m, n, k, groups),))


def _attention(q: Shape, k: Shape, backward: bool) -> Arith:
    *batch, s_q, d = q
    s_kv = k[-2]
    bh = prod(batch)
    fwd = 4.0 * bh * s_q * s_kv * d
    return Arith(2.0 * fwd if backward else fwd, (),
                 (float(bh), float(s_q), float(s_kv), float(d), 2.5 if backward else 1.0))


def arithmetic(name: str, shapes: Sequence[Shape | None], out_shapes: Sequence[Shape | None],
               scalars: Sequence[Any] = ()) -> Arith:
    """FLOPs and kernel shapes of op ``name`` (``aten::...``).

    Args:
        name: the op's schema name without overload (``aten::mm``).
        shapes: shape of each positional argument (None where it is not a tensor).
        out_shapes: shape of each output tensor.
        scalars: the positional arguments themselves (for ``groups``, ``transposed``,
            ``output_mask`` of the convolutions).
    """
    s = list(shapes)
    if name == "aten::mm" and s[0] and s[1]:
        return _gemm(s[0][0], s[1][1], s[0][1])
    if name == "aten::addmm" and s[1] and s[2]:
        return _gemm(s[1][0], s[2][1], s[1][1])
    if name in ("aten::bmm", "aten::baddbmm"):
        a, b = (s[0], s[1]) if name == "aten::bmm" else (s[1], s[2])
        if a and b:
            return _gemm(a[1], b[2], a[2], a[0])
    if name in ("aten::convolution", "aten::_convolution") and s[0] and s[1] and out_shapes[0]:
        return _conv(s[0], s[1], out_shapes[0], int(_at(scalars, 8, 1)), bool(_at(scalars, 6, False)))
    if name == "aten::convolution_backward" and s[1] and s[2] and s[0]:
        one = _conv(s[1], s[2], s[0], int(_at(scalars, 9, 1)), bool(_at(scalars, 7, False)))
        mask = _at(scalars, 10, (True, True, True))
        assert isinstance(mask, Sequence)
        n = int(bool(mask[0])) + int(bool(mask[1]))
        return Arith(one.flops * n, one.gemms * n)
    if name in ATTENTION_FWD and s[0] and s[1]:
        return _attention(s[0], s[1], False)
    if name in ATTENTION_BWD and len(s) > 2 and s[1] and s[2]:  # (grad_out, q, k, v, ...)
        return _attention(s[1], s[2], True)
    return _NONE


def _at(values: Sequence[Any], i: int, default: Any) -> Any:
    return values[i] if i < len(values) and values[i] is not None else default
