"""``simsweep chakra``: show, export and generate Chakra execution traces.

- ``show FILE [--limit N]``: one JSON object per line (GlobalMetadata, then each node), in the
  protobuf JSON mapping ``chakra_jsonizer`` prints (reference/astra-sim-and-chakra.md §4.3).
- ``export --out PREFIX [overrides]``: the configured LLM workload (Hydra overrides as for
  ``simsweep simulate``) as ``PREFIX.<rank>.et`` for every rank, ``PREFIX.comm_groups.json``,
  and ``PREFIX.system.json`` / ``PREFIX.network.yml`` describing the configured system, so that
  ``simsweep astra`` (or ASTRA-sim) runs it as is. Compute durations are the direct simulation's.
- ``collective --algorithm A --collective C --ranks N --size BYTES --out PREFIX``: a native
  algorithm as custom-collective ET files (``all-reduce-implementation-custom``).
- ``msccl XML --size BYTES --out PREFIX``: MSCCL-IR XML converted to per-rank ET files.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from simcore.errors import InputError
from simcore.formats import check_prefix, read_trace


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="simsweep chakra", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="action", required=True)
    show = sub.add_parser("show", help="print a trace as JSON lines (like chakra_jsonizer)")
    show.add_argument("file")
    show.add_argument("--limit", type=int, default=None, help="at most this many nodes")
    exp = sub.add_parser("export", help="write the configured LLM workload as per-rank ET files")
    exp.add_argument("--out", required=True, help="output prefix: files <out>.<rank>.et")
    exp.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. parallel.tp=8")
    col = sub.add_parser("collective", help="a native algorithm as custom-collective ET files")
    col.add_argument("--algorithm", required=True)
    col.add_argument("--collective", default="all_reduce")
    col.add_argument("--ranks", type=int, required=True)
    col.add_argument("--size", type=int, required=True, help="comm_size in bytes")
    col.add_argument("--reduce-micros", type=int, default=0)
    col.add_argument("--out", required=True)
    ms = sub.add_parser("msccl", help="convert MSCCL-IR XML to per-rank ET files")
    ms.add_argument("xml")
    ms.add_argument("--size", type=int, required=True, help="collective size in bytes")
    ms.add_argument("--out", required=True)
    return p


def _show(args: argparse.Namespace) -> int:
    from simcore.formats import trace_to_json

    if args.limit is not None and args.limit < 0:
        raise InputError("--limit", args.limit, "must be >= 0 (nodes printed after the metadata)")
    trace = read_trace(args.file, cache=False)
    out = sys.stdout
    for k, obj in enumerate(trace_to_json(trace)):
        if args.limit is not None and k > args.limit:
            break
        out.write(json.dumps(obj) + "\n")
    return 0


def _export(args: argparse.Namespace) -> int:
    from search.config.build import build_specs
    from search.config.compose import compose
    from simcore.formats import astra_system_files, write_comm_groups, write_workload

    out = check_prefix(args.out, "--out")
    model, parallel, system = build_specs(compose(list(args.overrides)))
    system_json, network_yaml = astra_system_files(system)
    paths, nodes, groups = write_workload(out, model, parallel, system)
    write_comm_groups(f"{out}.comm_groups.json", groups)
    Path(f"{out}.system.json").write_text(json.dumps(system_json, indent=1) + "\n")
    Path(f"{out}.network.yml").write_text(network_yaml)
    Path(f"{out}.remote_memory.json").write_text(
        json.dumps({"memory-type": "NO_MEMORY_EXPANSION"}) + "\n")
    print(f"wrote {len(paths)} ET files ({nodes} nodes) {out}.<rank>.et, {len(groups)} comm groups; "
          f"run: simsweep astra --workload {out} --system {out}.system.json "
          f"--network {out}.network.yml --remote-memory {out}.remote_memory.json "
          f"--comm-group {out}.comm_groups.json\n"
          f"or ASTRA-sim: AstraSim_Analytical_Congestion_Unaware --workload-configuration={out} "
          f"--system-configuration={out}.system.json --network-configuration={out}.network.yml "
          f"--remote-memory-configuration={out}.remote_memory.json "
          f"--comm-group-configuration={out}.comm_groups.json")
    return 0


def _collective(args: argparse.Namespace) -> int:
    from simcore.formats import build_collective, write_collective

    check_prefix(args.out, "--out")
    traces = build_collective(args.algorithm, args.collective, args.ranks, args.size, args.reduce_micros)
    paths = write_collective(args.out, traces)
    print(f"wrote {len(paths)} ET files {args.out}.<rank>.et")
    return 0


def _msccl(args: argparse.Namespace) -> int:
    from simcore.formats import msccl_to_traces, write_collective

    check_prefix(args.out, "--out")
    paths = write_collective(args.out, msccl_to_traces(Path(args.xml), args.size))
    print(f"wrote {len(paths)} ET files {args.out}.<rank>.et")
    return 0


def main(argv: list[str]) -> int:
    """Run the command; bad input -> InputError (exit 2)."""
    try:
        args = _parser().parse_args(argv)
    except SystemExit as stop:
        return int(stop.code or 0)
    action = {"show": _show, "export": _export, "collective": _collective, "msccl": _msccl}
    try:
        return action[args.action](args)
    except BrokenPipeError:  # e.g. `simsweep chakra show f | head`
        sys.stderr.close()
        return 0
