"""Ex-situ tracing: record one training step of a ``torch.nn.Module`` without real compute.

The model and its inputs live on PyTorch's ``meta`` device (tensors with shapes, dtypes and
strides but no data; every aten op runs its shape function only), so a step of a large model is
recorded on a laptop CPU in seconds. This is Echo's ex-situ tracing (methods-hap-ace-echo.md
§3.1: "one device plays every rank"), with meta tensors in place of a real GPU: the operators,
shapes and dependencies are recorded, the kernel times come later from the calibrated models of
the target accelerator.

A :class:`~torch.utils._python_dispatch.TorchDispatchMode` sees every aten op below autograd,
forward, backward (the autograd engine carries the mode into its threads) and optimizer alike.
For each op it records the name, the tensor shapes, the dtype, the FLOPs (:mod:`.flops`), the
bytes read and written and the data dependencies: an op depends on the last op that wrote the
storage of each tensor it reads (views share their base's storage, in-place ops rewrite it).
No reference to a recorded tensor is kept (that would stop autograd from stealing gradient
buffers and record copies a real step does not make); a storage id freed and reused is safe
because every op output re-registers its writer, and the tensors nobody wrote (parameters,
inputs, buffers) live through the whole step.
``torch.autograd.graph.saved_tensors_hooks`` measures the activations kept for the backward
pass. Imports ``torch`` lazily (:mod:`.torch_import`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any

from simcore.errors import InputError
from simcore.traces.pytorch.flops import arithmetic
from simcore.traces.pytorch.step import (
    AFTER_BLOCKS,
    BEFORE_BLOCKS,
    PHASES,
    TracedOp,
    TracedParam,
    TracedStep,
)
from simcore.traces.pytorch.torch_import import require_torch

__all__ = ["NO_KERNEL", "OPTIMIZERS", "trace_step"]

#: ops that allocate or alias without running a kernel (besides the schema's view ops)
NO_KERNEL = frozenset({"aten::empty", "aten::empty_strided", "aten::empty_like", "aten::detach",
                       "aten::lift_fresh", "aten::alias", "aten::_unsafe_view",
                       "aten::new_empty", "aten::new_empty_strided", "aten::set_"})
#: optimizers the step may include (``none``: forward and backward only)
OPTIMIZERS = ("none", "sgd", "adam", "adamw")


#: gather-like ops: the index of the input they read only where an index points
GATHERS = {"aten::embedding": 0, "aten::index_select": 0, "aten::gather": 0,
           "aten::nll_loss_forward": 0, "aten::nll_loss2d_forward": 0,
           "aten::nll_loss_backward": 1, "aten::nll_loss2d_backward": 1}


def _nbytes(t: Any) -> int:
    return int(t.numel() * t.element_size())


def _bytes_read(name: str, tensors_in: list[Any], tensors_out: list[Any]) -> int:
    """Bytes a kernel reads: its input tensors, except the table a gather-like op indexes
    (:data:`GATHERS`): of that it reads one element per gathered output element (embedding,
    index_select, gather: the output's size) or per target (NLL loss forward: one log-prob
    per target; its backward reads none of the log-probs, it scatters into a fresh gradient)."""
    total = sum(_nbytes(t) for t in tensors_in)
    at = GATHERS.get(name)
    if at is None or at >= len(tensors_in):
        return total
    table = tensors_in[at]
    if "nll_loss" not in name:
        used = sum(_nbytes(t) for t in tensors_out[:1])
    elif name.endswith("_forward") and len(tensors_in) > 1:
        used = int(tensors_in[1].numel()) * int(table.element_size())  # one per target
    else:
        used = 0
    return total - _nbytes(table) + min(used, _nbytes(table))


def _storage_key(t: Any) -> int:
    try:
        return int(t.untyped_storage()._cdata)
    except (RuntimeError, NotImplementedError):  # tensors without a storage (sparse, nested)
        return id(t)


class _Recorder:
    """State of one recording; :meth:`mode` returns the dispatch mode that feeds it."""

    def __init__(self, torch: Any, param_keys: dict[int, int], param_numel: list[int]) -> None:
        self.torch = torch
        self.param_numel = param_numel
        self.ops: list[TracedOp] = []
        self.writer: dict[int, int] = {}
        self.phase = 0
        self.param_keys = param_keys
        self.first: list[dict[int, int]] = [{}, {}, {}]  # per phase: param index -> first op
        self.block = BEFORE_BLOCKS  # the named block the next ops belong to
        self.seq_op: dict[int, int] = {}  # autograd node sequence number -> forward op
        self.last_seq = -1

    def mode(self) -> Any:
        from torch.utils._python_dispatch import TorchDispatchMode
        from torch.utils._pytree import tree_leaves

        rec = self

        class _Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                                   kwargs: Any = None) -> Any:
                out = func(*args, **(kwargs or {}))
                rec.record(func, args, tree_leaves(out))
                return out

        return _Mode()

    def record(self, func: Any, args: Sequence[Any], outs: list[Any]) -> None:
        torch = self.torch
        name = func._schema.name
        tensors_in = [a for a in args if isinstance(a, torch.Tensor)]
        for a in args:  # tensor lists (cat, stack, foreach ops)
            if isinstance(a, list | tuple):
                tensors_in += [x for x in a if isinstance(x, torch.Tensor)]
        tensors_out = [o for o in outs if isinstance(o, torch.Tensor)]
        index = len(self.ops)
        view = (bool(getattr(func, "is_view", False)) or name in NO_KERNEL
                or not name.startswith("aten::"))  # profiler markers and the like
        deps: set[int] = set()
        param = -1
        for t in tensors_in:
            key = _storage_key(t)
            w = self.writer.get(key)
            if w is not None:
                deps.add(w)
            p = self.param_keys.get(key)
            if p is not None and not view:
                self.first[self.phase].setdefault(p, index)
                if param < 0 or t.numel() > self.param_numel[param]:
                    param = p  # the largest: a linear layer's weight, not its bias
        twin = self._twin(index)
        shapes = [tuple(a.shape) if isinstance(a, torch.Tensor) else None for a in args]
        out_shapes = [tuple(o.shape) for o in tensors_out]
        arith = arithmetic(name, shapes, out_shapes, list(args))
        ref = tensors_out[0] if tensors_out else (tensors_in[0] if tensors_in else None)
        self.ops.append(TracedOp(
            name=name, phase=self.phase,
            in_shapes=tuple(tuple(t.shape) for t in tensors_in),
            out_shapes=tuple(out_shapes),
            dtype=str(ref.dtype).removeprefix("torch.") if ref is not None else "",
            flops=arith.flops, bytes_read=0 if view else _bytes_read(name, tensors_in, tensors_out),
            bytes_written=0 if view else sum(_nbytes(t) for t in tensors_out),
            deps=tuple(sorted(deps)),
            gemms=arith.gemms, attention=arith.attention, view=view, block=self.block,
            param=param, twin=twin,
        ))
        if not view:  # a view aliases: readers of it wait for the op that wrote the storage
            for t in tensors_out:
                self.writer[_storage_key(t)] = index


    def _twin(self, index: int) -> int:
        """Forward: remember the autograd node this op created (the thread's sequence counter
        moved past it); backward: the forward op of the node that runs this op (-1 if none)."""
        torch = self.torch
        if self.phase == 0:
            seq = int(torch._C._autograd._get_sequence_nr()) - 1
            if seq != self.last_seq:
                self.seq_op[seq] = index
                self.last_seq = seq
            return -1
        node = torch._C._current_autograd_node()
        return self.seq_op.get(int(node._sequence_nr()), -1) if node is not None else -1


def _fused_attention_mode(torch: Any) -> Any:
    """A torch-function mode running ``scaled_dot_product_attention`` (no explicit mask) as the
    fused flash-attention op, as a GPU does; on ``meta`` the dispatcher would pick the math
    decomposition (batched GEMMs, softmax, mask), which is not what runs on the accelerator."""
    from torch.overrides import TorchFunctionMode

    sdpa = torch.nn.functional.scaled_dot_product_attention
    fused = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu

    class _Fuse(TorchFunctionMode):
        def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            kw = dict(kwargs or {})
            if (func is sdpa and len(args) == 3 and kw.get("attn_mask") is None
                    and not kw.get("enable_gqa", False)):
                out, _ = fused(*args, dropout_p=kw.get("dropout_p", 0.0),
                               is_causal=kw.get("is_causal", False), scale=kw.get("scale"))
                return out
            return func(*args, **kw)

    return _Fuse()


def _block_hooks(torch: Any, model: Any, path: str, rec: _Recorder, out_bytes: list[int]) -> list[Any]:
    """Hooks tagging ops with the index of the block of ``model.<path>`` (a ModuleList or
    Sequential) they belong to. Forward: a block's pre-hook opens it, its post-hook moves on to
    :data:`AFTER_BLOCKS`. Backward runs the blocks in reverse: a gradient hook on block i's
    output opens block i, one on the first block's input opens :data:`BEFORE_BLOCKS`."""
    blocks: Any = model
    for part in path.split("."):
        if not hasattr(blocks, part):
            raise InputError("blocks", path, f"{type(model).__name__} has no submodule {part!r}")
        blocks = getattr(blocks, part)
    if not isinstance(blocks, torch.nn.ModuleList | torch.nn.Sequential) or len(blocks) == 0:
        raise InputError("blocks", path, "must name a non-empty ModuleList or Sequential")
    out_bytes.extend([0] * len(blocks))

    def opener(tag: int) -> Any:
        def hook(_grad: Any) -> None:
            rec.block = tag
        return hook

    def pre(i: int) -> Any:
        def hook(_mod: Any, args: Any) -> None:
            rec.block = i
            first = args[0] if args else None
            if i == 0 and isinstance(first, torch.Tensor) and first.requires_grad:
                first.register_hook(opener(BEFORE_BLOCKS))
        return hook

    def post(i: int) -> Any:
        def hook(_mod: Any, _args: Any, out: Any) -> None:
            rec.block = AFTER_BLOCKS
            t = out[0] if isinstance(out, tuple | list) else out
            if isinstance(t, torch.Tensor):
                out_bytes[i] = int(t.numel() * t.element_size())
                if t.requires_grad:
                    t.register_hook(opener(i))
        return hook

    handles = []
    for i, block in enumerate(blocks):
        handles.append(block.register_forward_pre_hook(pre(i)))
        handles.append(block.register_forward_hook(post(i)))
    return handles


def _default_loss(out: Any) -> Any:
    import torch
    from torch.utils._pytree import tree_leaves

    leaves = [x for x in tree_leaves(out) if isinstance(x, torch.Tensor) and x.is_floating_point()]
    if not leaves:
        raise InputError("model output", type(out).__name__, "has no floating-point tensor to "
                         "take a loss of; pass loss_fn")
    return leaves[0].mean()


def _optimizer(torch: Any, kind: str, params: list[Any]) -> Any:
    if kind == "sgd":
        return torch.optim.SGD(params, lr=0.1, momentum=0.9, foreach=False)
    if kind == "adam":
        return torch.optim.Adam(params, foreach=False)
    return torch.optim.AdamW(params, foreach=False)


def trace_step(
    model: Any, inputs: Sequence[Any], *, loss_fn: Callable[[Any], Any] | None = None,
    optimizer: str = "none", name: str = "model", fused_attention: bool = True,
    blocks: str | None = None,
) -> TracedStep:
    """Record one training step: forward, loss, backward (and an optimizer step).

    Args:
        model: a ``torch.nn.Module`` whose parameters are on the ``meta`` device.
        inputs: its positional inputs, on ``meta`` (the first one's leading dimension is the
            batch size).
        loss_fn: output -> scalar loss (default: the mean of the first floating-point output).
        optimizer: one of :data:`OPTIMIZERS`.
        name: label of the step.
        fused_attention: record ``scaled_dot_product_attention`` as one fused attention op
            (FlashAttention on the accelerator) rather than the meta device's math path.
        blocks: attribute path of the model's repeated blocks (``transformer.h``, ``blocks``):
            ops are tagged with their block (pipeline stages are cut between blocks).

    Raises:
        InputError: the model fails on these inputs (the message names the error), or
            ``optimizer`` is unknown.
    """
    torch = require_torch()
    if optimizer not in OPTIMIZERS:
        raise InputError("optimizer", optimizer, f"must be one of {', '.join(OPTIMIZERS)}")
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    param_keys = {_storage_key(p): i for i, (_, p) in enumerate(named)}
    rec = _Recorder(torch, param_keys, [int(p.numel()) for _, p in named])
    saved: dict[int, int] = {}

    def pack(t: Any) -> Any:
        key = _storage_key(t)
        if key not in param_keys:
            saved[key] = int(t.untyped_storage().nbytes())
        return t

    opt = _optimizer(torch, optimizer, [p for _, p in named]) if optimizer != "none" else None
    out_bytes: list[int] = []
    handles = _block_hooks(torch, model, blocks, rec, out_bytes) if blocks else []
    try:
        fuse = _fused_attention_mode(torch) if fused_attention else contextlib.nullcontext()
        with rec.mode():
            with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), fuse:
                out = model(*inputs)
                loss = (loss_fn or _default_loss)(out)
            rec.phase = PHASES.index("backward")
            loss.backward()
            grads = [rec.writer.get(_storage_key(p.grad), -1) if p.grad is not None else -1
                     for _, p in named]
            if opt is not None:
                rec.phase = PHASES.index("optimizer")
                rec.block = BEFORE_BLOCKS
                opt.step()
    except InputError:
        raise
    except Exception as err:  # the user's model failed: one line naming what went wrong
        msg = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise InputError(f"model {name}", [tuple(getattr(x, "shape", ())) for x in inputs],
                         f"fails on these inputs: {type(err).__name__}: {msg}") from err
    finally:
        for h in handles:
            h.remove()
    params = tuple(
        TracedParam(n, int(p.numel()), int(p.element_size()),
                    rec.first[0].get(i, -1), rec.first[1].get(i, -1), grads[i])
        for i, (n, p) in enumerate(named))
    buffers = sum(int(b.numel() * b.element_size()) for b in model.buffers())
    batch = int(inputs[0].shape[0]) if inputs and inputs[0].ndim else 1
    return TracedStep(name=name, batch_size=batch, ops=tuple(rec.ops), params=params,
                      activation_bytes=sum(saved.values()), buffer_bytes=buffers,
                      block_out_bytes=tuple(out_bytes))
