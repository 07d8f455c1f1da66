"""``simsweep trace``: record one training step of a PyTorch model as a Chakra ET (thin).

``simsweep trace torchvision.models:resnet50 --input-shape 32x3x224x224 --out runs/r50`` builds
the model on PyTorch's meta device, records forward, loss and backward (and an optimizer step
with ``--optimizer``) without computing anything, writes ``runs/r50.0.et`` and prints a summary.
Needs the optional extra: ``pip install 'simsweep[trace]'``.

``simsweep trace --import-et run.json --ranks 8 --out runs/real`` converts an execution trace
written by ``torch.profiler.ExecutionTraceObserver`` instead (no PyTorch needed): Chakra ETs
``runs/real.<r>.et`` for ``simsweep astra`` and ``runs/real.traced.0.et`` for the traced family;
with ``--kineto run.kineto.json`` (the ``torch.profiler`` Chrome trace of the same step) the
compute nodes carry the measured durations.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from simcore.errors import InputError

_JSON_TYPES = {list: "an array", str: "a string", type(None): "null", bool: "a boolean"}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="simsweep trace", description=__doc__.splitlines()[0])
    p.add_argument("model", nargs="?", help="import path package.module:factory of a torch.nn.Module")
    p.add_argument("--import-et", metavar="JSON", help="convert an ExecutionTraceObserver JSON")
    p.add_argument("--ranks", type=int, default=1, help="with --import-et: ranks to write")
    p.add_argument("--kineto", metavar="JSON", help="with --import-et: the torch.profiler (Kineto) "
                   "trace of the same step, linked for measured op durations")
    p.add_argument("--input-shape", action="append", metavar="SHAPE[:DTYPE]",
                   help="one per positional input, e.g. 8x3x224x224 or 4x1024:int64")
    p.add_argument("--dtype", default="float32", help="parameter / default input dtype")
    p.add_argument("--optimizer", default="none", choices=("none", "sgd", "adam", "adamw"))
    p.add_argument("--kwargs", default="{}", help="factory keyword arguments as JSON")
    p.add_argument("--blocks", help="attribute path of the repeated blocks (e.g. blocks, "
                   "transformer.h): pipeline stages are cut between them, tensor parallelism "
                   "splits their linear layers")
    p.add_argument("--out", required=True, help="output prefix: writes <out>.0.et")
    return p


def main(argv: list[str]) -> int:
    """Trace, write the ET, print one summary line per quantity."""
    try:
        args = _parser().parse_args(argv)
    except SystemExit as stop:
        return int(stop.code or 0)
    from simcore.formats import check_prefix

    check_prefix(args.out, "--out")
    try:
        kwargs = json.loads(args.kwargs)
    except json.JSONDecodeError as err:
        raise InputError("--kwargs", args.kwargs, f"must be a JSON object: {err}") from None
    if not isinstance(kwargs, dict):
        raise InputError("--kwargs", args.kwargs, "must be a JSON object of the factory's keyword arguments, "
                                                  f"e.g. '{{\"layers\": 24}}', not {_JSON_TYPES.get(type(kwargs), 'a number')}")
    if args.import_et:
        return _import(args.import_et, args.out, args.ranks, args.kineto)
    if not args.model or not args.input_shape:
        raise InputError("simsweep trace", argv, "needs a model and --input-shape (or --import-et)")
    from simcore.formats import trace_model, write_step

    t0 = time.perf_counter()
    try:
        step = trace_model(args.model, args.input_shape, dtype=args.dtype, optimizer=args.optimizer,
                           kwargs=kwargs, blocks=args.blocks)
    except InputError as err:
        if err.key == "dtype":
            raise InputError("--dtype", err.value, err.rule) from None
        raise
    path = write_step(args.out, step)
    out = sys.stdout
    out.write(f"traced {args.model}: {len(step.ops)} ops, {step.num_params:,} parameters, "
              f"batch {step.batch_size}\n")
    out.write(f"FLOPs forward {step.flops('forward'):.4g}, backward {step.flops('backward'):.4g}, "
              f"total {step.flops():.4g}\n")
    out.write(f"activations {step.activation_bytes / 2**20:.1f} MiB; wrote {path} "
              f"in {time.perf_counter() - t0:.2f} s\n")
    return 0


def _import(path: str, out: str, ranks: int, kineto: str | None = None) -> int:
    from simcore.formats import import_execution_trace

    if ranks < 1:
        raise InputError("--ranks", ranks, "must be >= 1")
    paths, step_path = import_execution_trace(path, out, ranks, kineto=kineto)
    linked = f" (linked with {kineto}: measured durations)" if kineto else ""
    print(f"wrote {len(paths)} Chakra ET file(s) {out}.<rank>.et{linked} and the traced step {step_path}")
    return 0
