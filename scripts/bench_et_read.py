"""Benchmark: reading Chakra ET files with simcore.traces.chakra.et vs the official protobuf parser.

Reads every ``<prefix>.<rank>.et`` of a workload (default: the shared GPT-3 175B, 64 NPUs,
gzip) and prints one table: files, nodes, MB (compressed / raw), median seconds and nodes/s for
- ``official pb2``: mlc-chakra's protolib + et_def_pb2 (upb), parsing every Node (baseline),
- ``cold``: simcore decode with no cache (decompress + frame + vectorized decode, threads),
- ``warm disk``: simcore with the per-file disk cache populated, in a fresh process state,
- ``warm memory``: simcore again in the same process (in-memory cache).
Wall-clock and CPU seconds (all threads) are both printed: on a shared machine the CPU time is
the steadier figure.

Usage: python scripts/bench_et_read.py [--prefix P] [--repeat 5] [--threads N]
"""

from __future__ import annotations

import argparse
import gzip
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from simcore.traces.chakra import cache as et_cache
from simcore.traces.chakra.et import read_traces, trace_paths

DEFAULT = Path(__file__).resolve().parents[1].parent / "shared/astra-inputs/gpt3_175b_64npu/workload"


def _official(paths: list[str]) -> int:
    from chakra.schema.protobuf import et_def_pb2 as pb
    from chakra.src.third_party.utils import protolib

    total = 0
    for p in paths:
        fh = protolib.openFileRd(p)
        meta = pb.GlobalMetadata()
        protolib.decodeMessage(fh, meta)
        node = pb.Node()
        while protolib.decodeMessage(fh, node):
            total += 1
            node = pb.Node()
        fh.close()
    return total


def _median(
    fn: Callable[[], object], repeat: int, before: Callable[[], None] | None = None
) -> tuple[float, float]:
    """Median wall seconds and median CPU seconds (all threads of this process)."""
    walls, cpus = [], []
    for _ in range(repeat):
        if before:
            before()
        c, t = time.process_time(), time.perf_counter()
        fn()
        walls.append(time.perf_counter() - t)
        cpus.append(time.process_time() - c)
    return statistics.median(walls), statistics.median(cpus)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prefix", default=str(DEFAULT))
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--no-official", action="store_true")
    args = ap.parse_args(argv)
    paths = trace_paths(args.prefix)
    mb_gz = sum(os.path.getsize(p) for p in paths) / 1e6
    mb_raw = sum(len(gzip.decompress(Path(p).read_bytes())) if Path(p).read_bytes()[:2] == b"\x1f\x8b"
                 else os.path.getsize(p) for p in paths) / 1e6
    with tempfile.TemporaryDirectory(prefix="et_bench_") as cache:
        os.environ["SIMSWEEP_CACHE_DIR"] = cache
        nodes = sum(t.num_nodes for t in read_traces(args.prefix, cache=False))

        def cold() -> None:
            read_traces(args.prefix, cache=False, threads=args.threads)

        rows = []
        if not args.no_official:
            try:
                t_off = _median(lambda: _official(paths), max(1, min(args.repeat, 3)))
                rows.append(("official pb2 (baseline)", t_off))
            except ImportError:
                print("note: mlc-chakra not installed; no baseline", file=sys.stderr)
        rows.append(("simcore cold (no cache)", _median(cold, args.repeat)))
        read_traces(args.prefix, threads=args.threads)  # populate the disk cache
        rows.append(("simcore warm disk cache", _median(
            lambda: read_traces(args.prefix, threads=args.threads), args.repeat, et_cache.clear_memory)))
        rows.append(("simcore warm memory", _median(
            lambda: read_traces(args.prefix, threads=args.threads), args.repeat)))
    base = rows[0][1][0] if rows[0][0].startswith("official") else None
    load = os.getloadavg()[0]
    print(f"files={len(paths)} nodes={nodes} MB gz={mb_gz:.1f} raw={mb_raw:.1f} "
          f"cpus={os.cpu_count()} load={load:.1f}")
    print(f"{'reader':<26} {'median s':>9} {'cpu s':>8} {'nodes/s':>12} {'vs official':>12}")
    for name, (sec, cpu) in rows:
        ratio = f"{base / sec:10.1f}x" if base else "-"
        print(f"{name:<26} {sec:9.4f} {cpu:8.4f} {nodes / sec:12.3g} {ratio:>12}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
