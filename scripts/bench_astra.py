"""Benchmark: ``simsweep astra`` on the GPT-3 175B / 64-NPU ASTRA-sim workload vs ASTRA-sim itself.

Baseline: ASTRA-sim's own wall time on the same inputs on this 2-core machine kind, as published
with the inputs (shared/astra-inputs/gpt3_175b_64npu/README.md): 30.6 s congestion-unaware,
40.4 s congestion-aware, 0.64 GB peak memory. For each backend the command is run as a fresh
process (interpreter start-up included) several times:
- ``cold``: an empty ET decode cache (every file decompressed and decoded);
- ``warm``: the ET decode cache populated by the previous run (the OS file cache is warm in both).
It prints the median wall time, the peak RSS of the process, the ratio to ASTRA-sim, and whether
all 64 NPUs reproduce ASTRA-sim's printed numbers (exact match count and worst relative error).
A second table times the same work inside one process (imports excluded; a Python + numpy start
costs ~0.5 s here): reading the 64 traces from the warm decode cache plus simulating, and
simulating alone (peak Python allocations by tracemalloc).

A third table runs simsweep's own 256-NPU export (shared/astra-inputs/gpt3_175b_256npu_export: DP 4 x
TP 8 x PP 8, 2-D unaware network and 1-D aware network) the same way, against ASTRA-sim's measured
cost on it from that README (16.6 s wall / 16.3 s CPU unaware, 29.6 s wall / 24.6 s CPU aware);
the speed-up is CPU time over CPU time (this machine is shared, so wall time is noisier).

Usage: python scripts/bench_astra.py [--inputs DIR] [--export256 DIR] [--repeat 3]
"""

from __future__ import annotations

import argparse
import csv
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT = next(
    (p for p in (REPO.parent / "shared" / "astra-inputs" / "gpt3_175b_64npu",
                 Path("/work/shared/astra-inputs/gpt3_175b_64npu")) if p.exists()),
    REPO.parent / "shared" / "astra-inputs" / "gpt3_175b_64npu",
)
ASTRA_SIM_S = {"unaware": 30.6, "aware": 40.4}
EXPORT256 = DEFAULT.parent / "gpt3_175b_256npu_export"
# backend -> (system file, network file, expected file, ASTRA-sim wall s, ASTRA-sim CPU s) from its README
EXPORT256_CASES = {
    "unaware": ("system.json", "network.yml", "expected_unaware.csv", 16.6, 16.3),
    "aware": ("system_1d.json", "network_1d.yml", "expected_aware_1d.csv", 29.6, 24.6),
}
LINE = re.compile(r"sys\[(\d+)\] finished, (\d+) cycles, exposed communication (\d+) cycles")


def _run(inputs: Path, backend: str, cache_dir: str, system: str = "system.json", network: str = "network.yml"
         ) -> tuple[float, float, dict[int, tuple[int, int]], float]:
    cmd = [sys.executable, "-m", "search.cli", "astra", "--workload", str(inputs / "workload"),
           "--system", str(inputs / system), "--network", str(inputs / network),
           "--remote-memory", str(inputs / "remote_memory.json"), "--comm-group", str(inputs / "comm_groups.json"),
           "--network-backend", backend]
    env = dict(os.environ, PYTHONPATH=str(REPO), SIMSWEEP_CACHE_DIR=cache_dir)
    with tempfile.TemporaryFile() as out:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.DEVNULL, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            raise RuntimeError(f"simsweep astra failed with exit code {proc.returncode}")
        out.seek(0)
        text = out.read().decode()
    peak_mb = usage.ru_maxrss / 1024  # this child's own peak resident set
    got = {int(m[0]): (int(m[1]), int(m[2])) for m in LINE.findall(text)}
    return wall, peak_mb, got, usage.ru_utime + usage.ru_stime


def _export_table(inputs: Path, repeat: int) -> None:
    """The 256-NPU export, both backends, cold and warm, against ASTRA-sim's CPU time."""
    print(f"\nsimsweep's GPT-3 175B export, 256 NPUs ({inputs}); median of {repeat} fresh-process runs")
    print(f"{'backend':<8} {'ET cache':<8} {'wall s':>7} {'CPU s':>6} {'ASTRA-sim CPU s':>15} {'speed-up (CPU)':>14} "
          f"{'exact NPUs':>10}")
    for backend, (system, network, expected_file, _, astra_cpu) in EXPORT256_CASES.items():
        with open(inputs / expected_file) as fh:
            expected = {int(r["npu"]): (int(r["finish_cycles"]), int(r["exposed_comm_cycles"]))
                        for r in csv.DictReader(fh)}
        for mode in ("cold", "warm"):
            walls, cpus = [], []
            with tempfile.TemporaryDirectory(prefix="simsweep_et_") as warm_dir:
                if mode == "warm":
                    _run(inputs, backend, warm_dir, system, network)
                for _ in range(repeat):
                    with tempfile.TemporaryDirectory(prefix="simsweep_et_") as cold_dir:
                        wall, _, got, cpu = _run(inputs, backend, cold_dir if mode == "cold" else warm_dir,
                                                 system, network)
                    walls.append(wall)
                    cpus.append(cpu)
            exact = sum(got.get(n) == expected[n] for n in expected)
            cpu = statistics.median(cpus)
            print(f"{backend:<8} {mode:<8} {statistics.median(walls):7.2f} {cpu:6.2f} {astra_cpu:15.1f} "
                  f"{astra_cpu / cpu:13.1f}x {exact:>6}/{len(expected)}")


def _expected(inputs: Path, backend: str) -> dict[int, tuple[int, int]]:
    with open(inputs / f"expected_{backend}.csv") as fh:
        return {int(r["npu"]): (int(r["finish_cycles"]), int(r["exposed_comm_cycles"])) for r in csv.DictReader(fh)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inputs", type=Path, default=DEFAULT)
    parser.add_argument("--export256", type=Path, default=EXPORT256)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only-export", action="store_true", help="run only the 256-NPU export table")
    args = parser.parse_args()
    if args.only_export:
        _export_table(args.export256, args.repeat)
        return 0
    rows = []
    for backend in ("unaware", "aware"):
        expected = _expected(args.inputs, backend)
        for mode in ("cold", "warm"):
            walls, peaks = [], []
            with tempfile.TemporaryDirectory(prefix="simsweep_et_") as warm_dir:
                if mode == "warm":
                    _run(args.inputs, backend, warm_dir)  # populate the decode cache
                for _ in range(args.repeat):
                    if mode == "cold":
                        with tempfile.TemporaryDirectory(prefix="simsweep_et_") as cold_dir:
                            wall, peak, got, _ = _run(args.inputs, backend, cold_dir)
                    else:
                        wall, peak, got, _ = _run(args.inputs, backend, warm_dir)
                    walls.append(wall)
                    peaks.append(peak)
            exact = sum(got.get(n) == expected[n] for n in expected)
            worst = max(abs(got[n][0] - expected[n][0]) / expected[n][0] if n in got else 1.0 for n in expected)
            median = statistics.median(walls)
            rows.append((backend, mode, median, max(peaks), ASTRA_SIM_S[backend] / median, exact, worst))
    print(f"GPT-3 175B, 64 NPUs ({args.inputs}); median of {args.repeat} fresh-process runs")
    print(f"{'backend':<8} {'ET cache':<8} {'wall s':>7} {'peak MB':>8} {'ASTRA-sim s':>11} {'speed-up':>8} "
          f"{'exact NPUs':>10} {'worst err':>9}")
    for backend, mode, median, peak, ratio, exact, worst in rows:
        print(f"{backend:<8} {mode:<8} {median:7.2f} {peak:8.0f} {ASTRA_SIM_S[backend]:11.1f} {ratio:7.1f}x "
              f"{exact:>7}/64 {worst:9.2e}")
    _in_process(args.inputs, args.repeat)
    if args.export256.is_dir():
        _export_table(args.export256, args.repeat)
    return 0


def _in_process(inputs: Path, repeat: int) -> None:
    import tracemalloc

    sys.path.insert(0, str(REPO))
    from simcore.emulator.inputs import read_comm_groups, read_network, read_system
    from simcore.emulator.load import read_programs
    from simcore.emulator.run import simulate_astra
    from simcore.traces.chakra import cache as et_cache

    system, network = read_system(inputs / "system.json"), read_network(inputs / "network.yml")
    groups = read_comm_groups(inputs / "comm_groups.json", network.npus)
    print(f"\nin one process, imports excluded; median of {repeat}")
    print(f"{'backend':<8} {'read+sim s':>10} {'sim s':>7} {'sim peak MB':>11} {'speed-up (read+sim)':>20}")
    for backend in ("unaware", "aware"):
        total, sim = [], []
        for _ in range(repeat):
            et_cache.clear_memory()
            start = time.perf_counter()
            programs = read_programs(inputs / "workload", network.npus)
            mid = time.perf_counter()
            simulate_astra(programs, system, network, backend, groups)
            end = time.perf_counter()
            total.append(end - start)
            sim.append(end - mid)
        tracemalloc.start()
        simulate_astra(programs, system, network, backend, groups)
        peak = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
        med = statistics.median(total)
        print(f"{backend:<8} {med:10.2f} {statistics.median(sim):7.2f} {peak:11.1f} {ASTRA_SIM_S[backend] / med:19.1f}x")


if __name__ == "__main__":
    sys.exit(main())
