"""Benchmark: ``simsweep astra`` on the GPT-3 175B / 64-NPU ASTRA-sim workload vs ASTRA-sim itself.

Baseline: ASTRA-sim's own wall time on the same inputs on this 2-core machine kind, as published
with the inputs (shared/astra-inputs/gpt3_175b_64npu/README.md): 30.6 s congestion-unaware,
40.4 s congestion-aware, 0.64 GB peak memory. For each backend the command is run as a fresh
process (interpreter start-up included) several times:
- ``cold``: an empty trace cache (every file read, inflated, compared with its layout's template;
  one file per layout decoded);
- ``warm``: the trace cache populated by the previous run (the OS file cache is warm in both).
Python bytecode is compiled once beforehand into a private folder (``PYTHONPYCACHEPREFIX``), as
an installed package has it. Each table header prints the machine's load average (the machine
is shared: absolute times are pessimistic when it is loaded; CPU time is the fairer figure).
It prints the median wall and CPU time, the peak RSS of the process, the ratios to ASTRA-sim, and
whether all 64 NPUs reproduce ASTRA-sim's printed numbers (exact match count and worst relative error).
A second table times the same work inside one process (imports excluded; a Python + numpy start
costs ~0.5 s here): reading the 64 traces from the warm decode cache plus simulating, and
simulating alone (peak Python allocations by tracemalloc).

A third table runs simsweep's own 256-NPU export (shared/astra-inputs/gpt3_175b_256npu_export: DP 4 x
TP 8 x PP 8, 2-D unaware network and 1-D aware network) the same way, against ASTRA-sim's measured
cost on it from that README (16.6 s wall / 16.3 s CPU unaware, 29.6 s wall / 24.6 s CPU aware);
the speed-up is CPU time over CPU time (this machine is shared, so wall time is noisier).

A fourth table does the same on a 1,024-NPU export (GPT-3 175B, DP 8 x TP 8 x PP 16, 2-D [Switch 8,
Switch 128] unaware, and the same trace on a 1-D Switch 1024 network for the aware backend, made
from the first dimension as ``system.gpus_per_node=1024`` would), written by ``simsweep chakra
export`` into ``--export1024`` if that folder holds no trace yet; ASTRA-sim's cost at 1,024 NPUs
(about 101 s / 212 s CPU unaware / aware) is the issue's measurement on this machine kind, not a
run of this exact export, so no NPU is checked there. ``--large`` adds 4,096- and 16,384-NPU
exports (DP 32 / 128, TP 8, PP 16): the export's own time (one run, into a fresh folder) and the
unaware run's, cold and warm (medians of ``--repeat`` fresh processes).

A fifth table (``--unfolded``, or alone with ``--only-unfolded``) runs the 256-NPU export with rank
folding off (``simulate_astra(..., fold=False)``, what ``simsweep astra --no-fold`` runs: every NPU
simulated step by step, the path taken when no two ranks fold, e.g. on a Ring dimension or a
multi-dimensional aware network), in a fresh process with a warm trace cache: the child's CPU time
(reading included) and its simulation's alone, ASTRA-sim's CPU time on the same files (from the
reference's README) and the speed-up (ASTRA-sim's CPU time over the child's), and the NPUs equal to
ASTRA-sim's output.

Usage: python scripts/bench_astra.py [--inputs DIR] [--export256 DIR] [--export1024 DIR] [--repeat 3]
       [--only-export | --only-64 | --only-unfolded] [--unfolded] [--large] [--large-dir DIR]
"""

from __future__ import annotations

import argparse
import atexit
import csv
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT = REPO.parent / "shared" / "astra-inputs" / "gpt3_175b_64npu"
ASTRA_SIM_S = {"unaware": 30.6, "aware": 40.4}
EXPORT256 = DEFAULT.parent / "gpt3_175b_256npu_export"
# backend -> (system file, network file, expected file, ASTRA-sim wall s, ASTRA-sim CPU s) from its README
EXPORT256_CASES = {
    "unaware": ("system.json", "network.yml", "expected_unaware.csv", 16.6, 16.3),
    "aware": ("system_1d.json", "network_1d.yml", "expected_aware_1d.csv", 29.6, 24.6),
}
# NPUs -> chakra export overrides (GPT-3 175B, TP 8, PP 16, micro-batch 2, 8 micro-batches per replica)
EXPORTS = {n: ["workload=gpt3_175b", "system=dgx_a100_80g", "parallel.sequence_parallel=false",
               f"system.num_gpus={n}", "parallel.tp=8", "parallel.pp=16",
               f"parallel.global_batch={n // 8}", "parallel.micro_batch=2"] for n in (1024, 4096, 16384)}
ASTRA_1024_CPU_S = {"unaware": 101.0, "aware": 212.0}  # issue's measurement, this machine kind
LINE = re.compile(r"sys\[(\d+)\] finished, (\d+) cycles, exposed communication (\d+) cycles")
_PYCACHE = tempfile.mkdtemp(prefix="simsweep_pyc_")
atexit.register(shutil.rmtree, _PYCACHE, ignore_errors=True)


def _env(**extra: str) -> dict[str, str]:
    """The child's environment: this repository, bytecode cached in a private folder."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return dict(env, PYTHONPATH=str(REPO), PYTHONPYCACHEPREFIX=_PYCACHE, **extra)


def _load() -> str:
    return "load average " + " / ".join(f"{x:.1f}" for x in os.getloadavg())


def _run(inputs: Path, backend: str, cache_dir: str, system: str = "system.json", network: str = "network.yml",
         workload: str = "workload") -> tuple[float, float, dict[int, tuple[int, int]], float]:
    cmd = [sys.executable, "-m", "search.cli", "astra", "--workload", str(inputs / workload),
           "--system", str(inputs / system), "--network", str(inputs / network),
           "--remote-memory", str(inputs / "remote_memory.json"), "--comm-group", str(inputs / "comm_groups.json"),
           "--network-backend", backend]
    env = _env(SIMSWEEP_CACHE_DIR=cache_dir)
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
    cases = []
    for backend, (system, network, expected_file, _, astra_cpu) in EXPORT256_CASES.items():
        with open(inputs / expected_file) as fh:
            expected = {int(r["npu"]): (int(r["finish_cycles"]), int(r["exposed_comm_cycles"]))
                        for r in csv.DictReader(fh)}
        cases.append((backend, system, network, "workload", astra_cpu, expected))
    _cold_warm_table(f"simsweep's GPT-3 175B export, 256 NPUs ({inputs})", inputs, cases, repeat)


def _cold_warm_table(title: str, inputs: Path, cases: Sequence[tuple[str, str, str, str, float,
                                                                  dict[int, tuple[int, int]] | None]],
                     repeat: int) -> None:
    """Fresh-process runs, cold and warm ET cache, CPU time against ASTRA-sim's CPU time."""
    print(f"\n{title}; median of {repeat} fresh-process runs; {_load()}")
    print(f"{'backend':<8} {'ET cache':<8} {'wall s':>7} {'CPU s':>6} {'ASTRA-sim CPU s':>15} {'speed-up (CPU)':>14} "
          f"{'exact NPUs':>10}")
    for backend, system, network, workload, astra_cpu, expected in cases:
        for mode in ("cold", "warm"):
            walls, cpus = [], []
            with tempfile.TemporaryDirectory(prefix="simsweep_et_") as warm_dir:
                if mode == "warm":
                    _run(inputs, backend, warm_dir, system, network, workload)
                for _ in range(repeat):
                    with tempfile.TemporaryDirectory(prefix="simsweep_et_") as cold_dir:
                        wall, _, got, cpu = _run(inputs, backend, cold_dir if mode == "cold" else warm_dir,
                                                 system, network, workload)
                    walls.append(wall)
                    cpus.append(cpu)
            exact = "-" if expected is None else f"{sum(got.get(n) == expected[n] for n in expected)}/{len(expected)}"
            cpu = statistics.median(cpus)
            print(f"{backend:<8} {mode:<8} {statistics.median(walls):7.2f} {cpu:6.2f} {astra_cpu:15.1f} "
                  f"{astra_cpu / cpu:13.1f}x {exact:>10}")


def _export(folder: Path, npus: int) -> tuple[float, float]:
    """``simsweep chakra export`` of :data:`EXPORTS` ``[npus]`` into ``folder`` (skipped if there);
    returns its (wall, CPU) seconds (0, 0 when skipped). Adds 1-D aware system/network files."""
    if not (folder / "workload.0.et").exists():
        folder.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "search.cli", "chakra", "export", "--out", str(folder / "workload"),
               *EXPORTS[npus]]
        env = _env()
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        if os.waitstatus_to_exitcode(status) != 0:
            raise RuntimeError(f"chakra export of {npus} NPUs failed")
        cost = (wall, usage.ru_utime + usage.ru_stime)
    else:
        cost = (0.0, 0.0)
    for name in ("system.json", "network.yml", "remote_memory.json", "comm_groups.json"):
        src = folder / f"workload.{name}"
        if src.exists() and not (folder / name).exists():
            shutil.copy(src, folder / name)
    _one_dimension(folder)
    return cost


def _one_dimension(folder: Path) -> None:
    """``system_1d.json`` / ``network_1d.yml``: the first dimension's link over all NPUs (Switch)."""
    import json

    import yaml

    net = yaml.safe_load((folder / "network.yml").read_text())
    npus = 1
    for k in net["npus_count"]:
        npus *= int(k)
    (folder / "network_1d.yml").write_text(
        f"topology: [ Switch ]\nnpus_count: [ {npus} ]\nbandwidth: [ {net['bandwidth'][0]} ]\n"
        f"latency: [ {net['latency'][0]} ]\n")
    system = json.loads((folder / "system.json").read_text())
    for key, value in system.items():
        if key.endswith("-implementation") and isinstance(value, list):
            system[key] = value[:1]
    (folder / "system_1d.json").write_text(json.dumps(system, indent=1) + "\n")


_UNFOLDED = """
import sys, time
from simcore.emulator.inputs import read_comm_groups, read_network, read_remote_memory, read_system
from simcore.emulator.load import read_programs
from simcore.emulator.run import simulate_astra
folder, system, network, backend = sys.argv[1:5]
net = read_network(f"{folder}/{network}")
programs = read_programs(f"{folder}/workload", net.npus)
programs = [programs[i] for i in range(net.npus)]
args = (read_system(f"{folder}/{system}"), net, backend, read_comm_groups(f"{folder}/comm_groups.json", net.npus),
        read_remote_memory(f"{folder}/remote_memory.json"))
start = time.process_time()
results = simulate_astra(programs, *args, fold=False)
print(f"simulation CPU {time.process_time() - start:.3f}")
for r in results:
    print(f"sys[{r.npu}] finished, {r.finish_ns} cycles, exposed communication {r.exposed_comm_ns} cycles")
"""


def _run_unfolded(inputs: Path, backend: str, system: str, network: str, cache_dir: str
                  ) -> tuple[float, float, float, dict[int, tuple[int, int]]]:
    """One fresh process simulating every NPU (fold off): wall, CPU, simulation CPU, results."""
    cmd = [sys.executable, "-c", _UNFOLDED, str(inputs), system, network, backend]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            env=_env(SIMSWEEP_CACHE_DIR=cache_dir))
    text = proc.stdout.read().decode() if proc.stdout else ""
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"the unfolded {backend} run failed")
    sim = re.search(r"simulation CPU ([0-9.]+)", text)
    got = {int(m[0]): (int(m[1]), int(m[2])) for m in LINE.findall(text)}
    return wall, usage.ru_utime + usage.ru_stime, float(sim[1]) if sim else float("nan"), got


def _unfolded_table(inputs: Path, repeat: int) -> None:
    """The 256-NPU export with folding off, both backends, warm ET cache, against ASTRA-sim's CPU time."""
    print(f"\nfolding off: every NPU of the 256-NPU export simulated ({inputs}); warm ET cache; median of "
          f"{repeat} fresh-process runs; {_load()}")
    print(f"{'backend':<8} {'wall s':>7} {'CPU s':>6} {'sim CPU s':>9} {'ASTRA-sim CPU s':>15} "
          f"{'speed-up (CPU)':>14} {'exact NPUs':>10}")
    for backend, (system, network, expected_file, _, astra_cpu) in EXPORT256_CASES.items():
        with open(inputs / expected_file) as fh:
            expected = {int(r["npu"]): (int(r["finish_cycles"]), int(r["exposed_comm_cycles"]))
                        for r in csv.DictReader(fh)}
        walls, cpus, sims = [], [], []
        with tempfile.TemporaryDirectory(prefix="simsweep_et_") as cache:
            _run(inputs, backend, cache, system, network)  # decode every rank's trace into the cache
            for _ in range(repeat):
                wall, cpu, sim, got = _run_unfolded(inputs, backend, system, network, cache)
                walls.append(wall)
                cpus.append(cpu)
                sims.append(sim)
        exact = sum(got.get(n) == expected[n] for n in expected)
        cpu = statistics.median(cpus)
        print(f"{backend:<8} {statistics.median(walls):7.2f} {cpu:6.2f} {statistics.median(sims):9.2f} "
              f"{astra_cpu:15.1f} {astra_cpu / cpu:13.2f}x {exact:>6}/{len(expected)}")


def _export1024_table(folder: Path, repeat: int) -> None:
    wall, cpu = _export(folder, 1024)
    if wall:
        print(f"\nexported 1,024 NPUs into {folder}: {wall:.1f} s wall, {cpu:.1f} s CPU")
    cases = [("unaware", "system.json", "network.yml", "workload", ASTRA_1024_CPU_S["unaware"], None),
             ("aware", "system_1d.json", "network_1d.yml", "workload", ASTRA_1024_CPU_S["aware"], None)]
    _cold_warm_table(f"GPT-3 175B export, 1,024 NPUs ({folder}); ASTRA-sim's CPU time: the issue's "
                     "measurement at 1,024 NPUs", folder, cases, repeat)


def _large_table(base: Path, repeat: int) -> None:
    """4,096 and 16,384 NPUs: the export's time and the unaware run's, cold then warm."""
    rows = []
    for npus in (4096, 16384):
        folder = base / f"gpt3_{npus}"
        ewall, ecpu = _export(folder, npus)
        cold, warm = [], []
        with tempfile.TemporaryDirectory(prefix="simsweep_et_") as cache:
            for _ in range(repeat):
                shutil.rmtree(cache, ignore_errors=True)
                wall, _, got, cpu = _run(folder, "unaware", cache)
                cold.append((wall, cpu))
                wall, _, got, cpu = _run(folder, "unaware", cache)
                warm.append((wall, cpu))
        med = [statistics.median(x) for x in (*zip(*cold, strict=True), *zip(*warm, strict=True))]
        rows.append((npus, ewall, ecpu, *med, len(got)))
    print(f"\nlarge exports (unaware; export: one run; runs: median of {repeat} fresh processes; folders under "
          f"{base}); {_load()}")
    print(f"{'NPUs':>6} {'export wall s':>13} {'export CPU s':>12} {'cold wall s':>11} {'cold CPU s':>10} "
          f"{'warm wall s':>11} {'warm CPU s':>10} {'NPUs printed':>12}")
    for npus, ewall, ecpu, cwall, ccpu, wwall, wcpu, printed in rows:
        exported = f"{ewall:13.1f} {ecpu:12.1f}" if ewall else f"{'(present)':>13} {'-':>12}"
        print(f"{npus:>6} {exported} {cwall:11.1f} {ccpu:10.2f} {wwall:11.1f} {wcpu:10.2f} {printed:>12}")


def _expected(inputs: Path, backend: str) -> dict[int, tuple[int, int]]:
    with open(inputs / f"expected_{backend}.csv") as fh:
        return {int(r["npu"]): (int(r["finish_cycles"]), int(r["exposed_comm_cycles"])) for r in csv.DictReader(fh)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inputs", type=Path, default=DEFAULT)
    parser.add_argument("--export256", type=Path, default=EXPORT256)
    parser.add_argument("--export1024", type=Path, default=Path(tempfile.gettempdir()) / "simsweep_gpt3_1024",
                        help="folder of the 1,024-NPU export (written there if absent)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only-export", action="store_true", help="run only the export tables")
    parser.add_argument("--only-64", action="store_true", help="run only the 64-NPU tables")
    parser.add_argument("--only-unfolded", action="store_true", help="run only the folding-off table")
    parser.add_argument("--unfolded", action="store_true", help="also the folding-off table (slow)")
    parser.add_argument("--large", action="store_true", help="also the 4,096- and 16,384-NPU exports")
    parser.add_argument("--large-dir", type=Path, help="folder of the large exports (default: beside --export1024)")
    args = parser.parse_args()
    subprocess.run([sys.executable, "-c", "import search.commands.astra, simcore.emulator.folded_switch"],
                   env=_env(), check=True)  # compile the bytecode once, as an installed package has it
    if args.only_unfolded:
        _unfolded_table(args.export256, args.repeat)
        return 0
    if args.only_export:
        if args.export256.is_dir():
            _export_table(args.export256, args.repeat)
        _export1024_table(args.export1024, args.repeat)
        _optional_tables(args)
        return 0
    rows = []
    for backend in ("unaware", "aware"):
        expected = _expected(args.inputs, backend)
        for mode in ("cold", "warm"):
            walls, peaks, cpus = [], [], []
            with tempfile.TemporaryDirectory(prefix="simsweep_et_") as warm_dir:
                if mode == "warm":
                    _run(args.inputs, backend, warm_dir)  # populate the decode cache
                for _ in range(args.repeat):
                    if mode == "cold":
                        with tempfile.TemporaryDirectory(prefix="simsweep_et_") as cold_dir:
                            wall, peak, got, cpu = _run(args.inputs, backend, cold_dir)
                    else:
                        wall, peak, got, cpu = _run(args.inputs, backend, warm_dir)
                    walls.append(wall)
                    peaks.append(peak)
                    cpus.append(cpu)
            exact = sum(got.get(n) == expected[n] for n in expected)
            worst = max(abs(got[n][0] - expected[n][0]) / expected[n][0] if n in got else 1.0 for n in expected)
            rows.append((backend, mode, statistics.median(walls), statistics.median(cpus), max(peaks), exact, worst))
    print(f"GPT-3 175B, 64 NPUs ({args.inputs}); median of {args.repeat} fresh-process runs; {_load()}")
    print("(ASTRA-sim's time is its wall time on an idle machine, single-threaded: about its CPU time)")
    print(f"{'backend':<8} {'ET cache':<8} {'wall s':>7} {'CPU s':>6} {'peak MB':>8} {'ASTRA-sim s':>11} "
          f"{'speed-up (wall)':>15} {'speed-up (CPU)':>14} {'exact NPUs':>10} {'worst err':>9}")
    for backend, mode, wall, cpu, peak, exact, worst in rows:
        astra = ASTRA_SIM_S[backend]
        print(f"{backend:<8} {mode:<8} {wall:7.2f} {cpu:6.2f} {peak:8.0f} {astra:11.1f} {astra / wall:14.1f}x "
              f"{astra / cpu:13.1f}x {exact:>7}/64 {worst:9.2e}")
    _in_process(args.inputs, args.repeat)
    if args.only_64:
        return 0
    if args.export256.is_dir():
        _export_table(args.export256, args.repeat)
    _export1024_table(args.export1024, args.repeat)
    _optional_tables(args)
    return 0


def _optional_tables(args: argparse.Namespace) -> None:
    """The large exports and the folding-off table, when asked for."""
    if args.large:
        _large_table(args.large_dir or args.export1024.parent, args.repeat)
    if args.unfolded:
        _unfolded_table(args.export256, args.repeat)


def _in_process(inputs: Path, repeat: int) -> None:
    import tracemalloc

    sys.path.insert(0, str(REPO))
    from simcore.emulator.inputs import read_comm_groups, read_network, read_system
    from simcore.emulator.load import read_programs
    from simcore.emulator.run import simulate_astra
    from simcore.traces.chakra import cache as et_cache

    system, network = read_system(inputs / "system.json"), read_network(inputs / "network.yml")
    groups = read_comm_groups(inputs / "comm_groups.json", network.npus)
    print(f"\nin one process, imports excluded; median of {repeat}; {_load()}")
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
