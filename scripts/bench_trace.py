"""Time ex-situ tracing of a ~100 M-parameter model (GPT-2 small's shape, 124 M + untied head).

Usage: ``PYTHONPATH=. python scripts/bench_trace.py [batch] [seq]``. Prints the import time of
PyTorch, the time of one traced training step (forward, loss, backward, Adam step) on the meta
device, and the size of the trace. The issue's bar: under 30 s on this machine.
"""

from __future__ import annotations

import sys
import time


def main() -> None:
    batch, seq = (int(sys.argv[1]), int(sys.argv[2])) if len(sys.argv) > 2 else (8, 1024)
    t0 = time.perf_counter()
    import torch  # noqa: F401

    from simcore.traces.pytorch.api import trace_model

    t1 = time.perf_counter()
    step = trace_model("tests.simcore.traces.pytorch.gpt:gpt_small", [f"{batch}x{seq}:int64"],
                       optimizer="adam")
    t2 = time.perf_counter()
    print(f"import torch: {t1 - t0:.2f} s")
    print(f"trace gpt_small ({step.num_params / 1e6:.1f} M parameters, batch {batch}x{seq}): "
          f"{t2 - t1:.2f} s, {len(step.ops)} ops, {step.flops() / 1e12:.2f} TFLOP per step")
    print(f"total: {t2 - t0:.2f} s")


if __name__ == "__main__":
    main()
