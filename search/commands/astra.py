"""``simsweep astra``: run unmodified ASTRA-sim inputs (thin; the logic is in simcore.emulator).

Prints, per NPU, ASTRA-sim's end-of-run line ``sys[<i>] finished, <T> cycles, exposed
communication <X> cycles`` (1 cycle = 1 ns).
"""

from __future__ import annotations

import argparse
import sys
import warnings

from simcore.formats import (
    network_backends,
    read_comm_groups,
    read_network,
    read_programs,
    read_remote_memory,
    read_system,
    simulate_astra,
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="simsweep astra", description=__doc__.splitlines()[0])
    parser.add_argument("--workload", required=True, help="ET prefix: files <prefix>.<npu>.et")
    parser.add_argument("--system", required=True, help="ASTRA-sim system JSON")
    parser.add_argument("--network", required=True, help="analytical network YAML")
    parser.add_argument("--remote-memory", help="remote-memory JSON")
    parser.add_argument("--comm-group", help='communicator-group JSON ("empty" = none)')
    parser.add_argument("--network-backend", choices=network_backends(), default="unaware")
    parser.add_argument("--no-fold", dest="fold", action="store_false",
                        help="simulate every NPU step by step, no rank folding (the same results; the path taken "
                             "when no ranks fold, to check folding or time that path)")
    return parser


def _keep_freed_memory() -> None:
    """Ask glibc's allocator to reuse freed memory instead of unmapping it (this command is a
    short-lived process): decoding traces allocates and frees many large numpy temporaries, and
    by default each comes from a fresh mmap whose pages fault in again (0.2 s of the 0.4 s system
    time of a cold 256-NPU run). No-op where the C library has no ``mallopt``."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return
    m_trim_threshold, m_top_pad, m_mmap_threshold = -1, -2, -3  # glibc malloc.h
    mallopt(m_mmap_threshold, 256 << 20)
    mallopt(m_trim_threshold, 1 << 30)
    mallopt(m_top_pad, 64 << 20)


def main(argv: list[str]) -> int:
    """Run the workload and print one line per NPU; bad input -> InputError (exit 2)."""
    try:
        args = _parser().parse_args(argv)
    except SystemExit as stop:
        return int(stop.code or 0)
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = _warn_line
        system = read_system(args.system)
        network = read_network(args.network)
        memory = read_remote_memory(args.remote_memory) if args.remote_memory else None
        groups = read_comm_groups(args.comm_group, network.npus) if args.comm_group not in (None, "empty") else None
    _keep_freed_memory()
    programs = read_programs(args.workload, network.npus)
    results = simulate_astra(programs, system, network, args.network_backend, groups, memory, fold=args.fold)
    out = sys.stdout
    for r in results:
        out.write(f"sys[{r.npu}] finished, {r.finish_ns} cycles, exposed communication {r.exposed_comm_ns} cycles\n")
    return 0


def _warn_line(message: Warning | str, *_: object, **__: object) -> None:
    print(f"simsweep astra: warning: {message}", file=sys.stderr)
