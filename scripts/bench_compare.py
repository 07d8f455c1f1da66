"""Run one benchmark script on a base commit and on the working tree, alternately, in one run.

A speed claim ("no regression", "3x faster") needs both sides measured on the same machine in
the same session: load on a shared machine drifts by more than most changes are worth. This
script checks the base commit out into a temporary git worktree, then runs the base's own copy
of the benchmark (its imports match its tree) and the working tree's copy, alternating
``--rounds`` times, each in a fresh process, and prints every table it got, labelled, plus the
median wall time per side.

Usage::

    python scripts/bench_compare.py --base 9aae6ec scripts/bench_llm.py
    python scripts/bench_compare.py --base main~5 --rounds 3 scripts/bench_sweep.py -- --case gpt3

Arguments after ``--`` go to the benchmark on both sides.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _run(tree: Path, script: str, extra: list[str]) -> tuple[float, str]:
    env = {**os.environ, "PYTHONPATH": str(tree), "RAY_USAGE_STATS_ENABLED": "0"}
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, str(tree / script), *extra], cwd=tree, env=env,
                          capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{script} failed in {tree} (exit {proc.returncode}):\n{proc.stderr}")
    return wall, proc.stdout


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, run both sides alternately and print their outputs."""
    args = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in args:
        cut = args.index("--")
        args, extra = args[:cut], args[cut + 1:]
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("script", help="benchmark path relative to the repository root")
    ap.add_argument("--base", required=True, help="git revision to compare against")
    ap.add_argument("--rounds", type=int, default=2, help="alternations (each side runs this often)")
    ns = ap.parse_args(args)
    if ns.rounds < 1:
        ap.error(f"--rounds={ns.rounds}: must be at least 1")
    sha = subprocess.run(["git", "rev-parse", "--short", ns.base], cwd=REPO, check=True,
                         capture_output=True, text=True).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="simsweep-base-") as tmp:
        base = Path(tmp) / "tree"
        subprocess.run(["git", "worktree", "add", "--detach", "-q", str(base), sha], cwd=REPO,
                       check=True)
        try:
            walls: dict[str, list[float]] = {"base": [], "head": []}
            for r in range(ns.rounds):
                for side, tree in (("base", base), ("head", REPO)):
                    wall, out = _run(tree, ns.script, extra)
                    walls[side].append(wall)
                    label = f"base {sha}" if side == "base" else "working tree"
                    print(f"## {ns.script}, {label}, round {r + 1} ({wall:.1f} s)\n{out}",
                          flush=True)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(base)], cwd=REPO,
                           check=False)
    b, h = statistics.median(walls["base"]), statistics.median(walls["head"])
    print(f"median wall per run: base {sha} {b:.1f} s, working tree {h:.1f} s "
          f"(base / head = {b / h:.2f}x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
