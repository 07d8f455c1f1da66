"""One traced training step, torch-free: the ops in program order and the parameters.

A :class:`TracedStep` is what the recorder (:mod:`.record`) produces and what the Chakra codec
(:mod:`.chakra_io`) writes to and reads from an ET file; the traced workload family builds its
graphs from it. Everything is frozen and hashable, so a step can key caches.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["AFTER_BLOCKS", "BEFORE_BLOCKS", "PHASES", "TracedOp", "TracedParam", "TracedStep"]

#: the phases of a training step, in order
PHASES = ("forward", "backward", "optimizer")
#: block tags of the ops before the first and after the last named block
BEFORE_BLOCKS, AFTER_BLOCKS = -1, -2


@dataclass(frozen=True)
class TracedOp:
    """One aten op of the step.

    Attributes:
        name: schema name without overload (``aten::mm``).
        phase: index into :data:`PHASES`.
        in_shapes / out_shapes: tensor shapes of the positional inputs and of the outputs.
        dtype: element type of the first output (``float32``, ``bfloat16``, ...).
        flops: model FLOPs (:mod:`.flops`).
        bytes_read / bytes_written: tensor bytes the kernel reads and writes (0 for views).
        deps: indices of the ops whose outputs it reads (by tensor storage).
        gemms: ``(m, n, k, count)`` products for the GEMM time model.
        attention: ``(batch_heads, seq_q, seq_kv, head_dim, weight)`` or empty.
        view: the op only aliases its input (no kernel).
        block: index of the named repeated block the op belongs to (forward or backward), or
            :data:`BEFORE_BLOCKS` / :data:`AFTER_BLOCKS` (e.g. the embedding / the head and
            the loss); :data:`BEFORE_BLOCKS` when no blocks were named.
        param: index (into :attr:`TracedStep.params`) of a parameter the kernel reads directly
            (a linear layer's weight in its forward product), or -1.
        twin: for a backward op, the index of the forward op whose gradient it computes (the
            autograd node it ran in, linked by the node's sequence number as the PyTorch
            profiler links forward and backward ops), or -1.
    """

    name: str
    phase: int
    in_shapes: tuple[tuple[int, ...], ...]
    out_shapes: tuple[tuple[int, ...], ...]
    dtype: str
    flops: float
    bytes_read: int
    bytes_written: int
    deps: tuple[int, ...]
    gemms: tuple[tuple[int, int, int, int], ...] = ()
    attention: tuple[float, ...] = ()
    view: bool = False
    block: int = -1
    param: int = -1
    twin: int = -1


@dataclass(frozen=True)
class TracedParam:
    """One trainable parameter.

    Attributes:
        name: qualified name (``layer1.0.conv1.weight``).
        numel: elements.
        elem_bytes: bytes per element.
        first_forward: index of the first forward op that reads it (-1: unused).
        first_backward: index of the first backward op that reads it (-1: none).
        grad_ready: index of the op that writes its final gradient (-1: no gradient).
    """

    name: str
    numel: int
    elem_bytes: int
    first_forward: int = -1
    first_backward: int = -1
    grad_ready: int = -1


@dataclass(frozen=True)
class TracedStep:
    """A recorded training step of one model on one device.

    Attributes:
        name: label (the factory's import path).
        batch_size: samples of the traced batch (leading dimension of the first input).
        ops: every op, in program order.
        params: trainable parameters in ``model.parameters()`` order.
        activation_bytes: bytes autograd saved for backward (the live activations at the end of
            the forward pass), parameters excluded.
        buffer_bytes: non-trainable module state (e.g. batch-norm running statistics).
        block_out_bytes: per named block, the bytes of its output activation (what a pipeline
            stage boundary after that block sends); empty when no blocks were named.
    """

    name: str
    batch_size: int
    ops: tuple[TracedOp, ...]
    params: tuple[TracedParam, ...]
    activation_bytes: int = 0
    buffer_bytes: int = 0
    block_out_bytes: tuple[int, ...] = ()

    @property
    def num_blocks(self) -> int:
        """Named repeated blocks (0 if none were named)."""
        return len(self.block_out_bytes)

    @property
    def num_params(self) -> int:
        """Trainable parameters (elements)."""
        return sum(p.numel for p in self.params)

    def flops(self, phase: str | None = None) -> float:
        """Model FLOPs of ``phase`` (all phases if None)."""
        want = None if phase is None else PHASES.index(phase)
        return float(sum(op.flops for op in self.ops if want is None or op.phase == want))
