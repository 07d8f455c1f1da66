"""Software stack: the few parameters where training stacks on the same hardware differ.

A :class:`StackSpec` scales the hardware calibration for the framework that runs the job
(``conf/stack/{megatron_lm,megatron_core,deepspeed,nemo}.yaml``, config key ``stack``):

* ``kernel_efficiency``: the stack's sustained GEMM / attention throughput relative to
  Megatron-LM's (the reference the hardware calibration's ``sustained_compute_fraction`` is
  fitted on): the residual of what the modelled mechanisms (gradient accumulation below,
  launch floor) leave. The published runs of the DeepSpeed + Megatron stack (MT-NLG, BLOOM)
  report 10-25% lower TFLOP/s per GPU than Megatron-LM on the same A100 clusters and model
  shapes (Smith et al. 2022; Narayanan et al. 2021). Fitted once by
  ``scripts/fit_end_to_end.py`` on the public runs of that stack.
* ``kernel_overhead_us``: fixed time per kernel (launch and framework gaps); ``None`` keeps the
  hardware calibration's value.
* ``kernel_launch_floor_us``: least time of any kernel (the host's dispatch pace in an eager
  framework; ``None`` keeps the calibration's value, 0).
* ``grad_accumulation_fusion``: whether the weight-gradient GEMM accumulates into the gradient
  buffer (Megatron-LM 2022 / Megatron-Core ``gradient_accumulation_fusion``) or every
  micro-batch's gradient is added by a separate memory-bound kernel into a buffer that is fp32
  in bf16 runs and reduced in fp32 (the DeepSpeed pipeline engine and its bf16 optimizer);
  ``None`` keeps the plan's value (:class:`~simcore.specs.parallel.ParallelSpec`). A mechanism,
  not a fit: the kernel's bytes follow from the dtypes.
* ``bf16_optimizer``: DeepSpeed's ``BF16_Optimizer`` gradient path in bf16 runs (DeepSpeed 0.6.5
  source, the release BLOOM trained with: ``runtime/bf16_optimizer.py`` ``update_hp_grads`` adds
  ``lp.grad.to(fp32)`` into the fp32 gradient after every micro-batch's backward, 18 bytes per
  parameter; ``runtime/pipe/engine.py`` ``_bf16_reduce_grads`` all-reduces the fp32 gradients,
  which ``runtime/engine.py`` ``allreduce_bucket`` casts to ``communication_data_type``, bf16 by
  default; ``step`` all-gathers each rank's updated bf16 shard). ``None`` keeps the plan's value
  (:class:`~simcore.specs.parallel.ParallelSpec`). A mechanism, not a fit.

Applying a stack returns a new :class:`~simcore.specs.system.SystemSpec` whose calibration
carries the scaled values (:func:`apply_stack`) and a new plan with the stack's training-loop
settings (:func:`apply_stack_plan`); the cost models see nothing else.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, replace

from simcore.errors import require
from simcore.specs.parallel import ParallelSpec
from simcore.specs.system import SystemSpec

__all__ = ["STACKS", "STACK_PLAN_FIELDS", "StackSpec", "apply_stack", "apply_stack_plan",
           "stack_from_dict"]

#: the stack presets of conf/stack/
STACKS = ("megatron_lm", "megatron_core", "deepspeed", "nemo")


@dataclass(frozen=True)
class StackSpec:
    """One training software stack (see the module docstring)."""

    name: str = "megatron_lm"
    kernel_efficiency: float = 1.0
    kernel_overhead_us: float | None = None
    kernel_launch_floor_us: float | None = None
    grad_accumulation_fusion: bool | None = None
    bf16_optimizer: bool | None = None

    def __post_init__(self) -> None:
        p = "stack."
        require(isinstance(self.name, str) and bool(self.name), p + "name", self.name,
                "must be a non-empty string")
        require(isinstance(self.kernel_efficiency, int | float)
                and 0 < self.kernel_efficiency <= 1.5, p + "kernel_efficiency",
                self.kernel_efficiency, "must be in (0, 1.5]")
        require(self.kernel_overhead_us is None or (
            isinstance(self.kernel_overhead_us, int | float) and self.kernel_overhead_us >= 0),
            p + "kernel_overhead_us", self.kernel_overhead_us, "must be >= 0 or null")
        require(self.kernel_launch_floor_us is None or (
            isinstance(self.kernel_launch_floor_us, int | float)
            and self.kernel_launch_floor_us >= 0),
            p + "kernel_launch_floor_us", self.kernel_launch_floor_us, "must be >= 0 or null")
        require(self.grad_accumulation_fusion is None
                or isinstance(self.grad_accumulation_fusion, bool),
                p + "grad_accumulation_fusion", self.grad_accumulation_fusion,
                "must be true, false or null")
        require(self.bf16_optimizer is None or isinstance(self.bf16_optimizer, bool),
                p + "bf16_optimizer", self.bf16_optimizer, "must be true, false or null")


def stack_from_dict(data: dict[str, object]) -> StackSpec:
    """A :class:`StackSpec` from the resolved ``stack`` config (unknown keys are errors;
    ``source`` / ``fitted`` provenance keys are ignored)."""
    known = {"name", "kernel_efficiency", "kernel_overhead_us", "kernel_launch_floor_us",
             "grad_accumulation_fusion", "bf16_optimizer"}
    kwargs = {k: v for k, v in data.items() if k not in ("source", "fitted")}
    for key, value in kwargs.items():
        require(key in known, f"stack.{key}", value, f"unknown key (known: {', '.join(known)})")
    return StackSpec(**kwargs)  # type: ignore[arg-type]


def apply_stack(system: SystemSpec, stack: StackSpec) -> SystemSpec:
    """``system`` with its calibration scaled for ``stack``."""
    calib = system.calibration
    fraction = min(1.0, calib.sustained_compute_fraction * stack.kernel_efficiency)
    changes: dict[str, float] = {"sustained_compute_fraction": fraction}
    if stack.kernel_overhead_us is not None:
        changes["kernel_overhead_us"] = float(stack.kernel_overhead_us)
    if stack.kernel_launch_floor_us is not None:
        changes["kernel_launch_floor_us"] = float(stack.kernel_launch_floor_us)
    return replace(system, calibration=replace(calib, **changes))


#: the plan fields a stack sets (its training-loop settings: gradient accumulation, reduction)
STACK_PLAN_FIELDS = ("grad_accumulation_fusion", "bf16_optimizer")


def apply_stack_plan(plan: ParallelSpec, stack: StackSpec,
                     plan_set: Collection[str] = ()) -> ParallelSpec:
    """``plan`` with the stack's training-loop settings (:data:`STACK_PLAN_FIELDS`) where the
    stack gives one (not null), except the fields in ``plan_set``: those the plan's own config
    set explicitly (``+parallel.bf16_optimizer=false`` beside ``stack=deepspeed``) keep its
    value."""
    changes = {name: getattr(stack, name) for name in STACK_PLAN_FIELDS
               if getattr(stack, name) is not None and name not in plan_set}
    return replace(plan, **changes) if changes else plan
