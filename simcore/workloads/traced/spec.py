"""Spec of the traced family: a recorded training step (an ET file written by ``simsweep trace``).

The spec names the file; the step is read once per file content (cached by the size and a
BLAKE2b hash of the bytes, the ET cache's key: never the path or mtime, which ``cp -p`` or
``rsync -t`` keep when they replace a file) without PyTorch. Field names
are the YAML keys of the ``workload`` config group when ``workload.family = traced``.
"""

from __future__ import annotations

from dataclasses import dataclass

from simcore.errors import require
from simcore.traces.chakra.cache import content_key
from simcore.traces.pytorch.step import TracedStep

__all__ = ["DDP_BUCKET_MB", "DDP_FIRST_BUCKET_MB", "TracedSpec", "load_step"]

#: DDP's default bucket cap (``bucket_cap_mb``) and its smaller first bucket
#: (``torch.distributed._DEFAULT_FIRST_BUCKET_BYTES`` = 1 MiB), PyTorch's reducer defaults
DDP_BUCKET_MB = 25.0
DDP_FIRST_BUCKET_MB = 1.0

_STEPS: dict[tuple[int, str], TracedStep] = {}  # content key -> step, least recent first
_STEPS_MAX = 16


def load_step(path: str) -> TracedStep:
    """The step stored at ``path`` (decoded once per content: size and hash of the bytes; the
    same content under two paths is decoded once)."""
    from simcore.traces.pytorch.api import read_step

    key = content_key(path)
    step = _STEPS.pop(key, None)
    if step is None:
        step = read_step(path)
        if len(_STEPS) >= _STEPS_MAX:
            del _STEPS[next(iter(_STEPS))]  # least recently used first
    _STEPS[key] = step
    return step


@dataclass(frozen=True)
class TracedSpec:
    """A traced model.

    Attributes:
        trace: path of the ET written by ``simsweep trace`` (``<prefix>.0.et``); the traced
            batch is one micro-batch (``parallel.micro_batch`` must equal it).
        name: label (default: the traced factory).
        bucket_mb: DDP gradient bucket cap in MiB (FSDP / ZeRO-3 units use the same cap).
        family: the registry key of this family.
    """

    trace: str
    name: str = ""
    bucket_mb: float = DDP_BUCKET_MB
    family: str = "traced"

    def __post_init__(self) -> None:
        require(isinstance(self.trace, str) and bool(self.trace) and self.trace != "???",
                "workload.trace", self.trace, "must name an ET file written by simsweep trace "
                "(<out>.0.et of simsweep trace ... --out <out>)")
        require(self.bucket_mb > 0, "workload.bucket_mb", self.bucket_mb, "must be > 0")

    @property
    def step(self) -> TracedStep:
        """The recorded step."""
        return load_step(self.trace)
