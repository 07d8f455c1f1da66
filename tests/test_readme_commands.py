"""Every command in the README's code blocks, run as written on a fresh clone without ``shared/``.

``test_every_readme_command_is_classified`` reads the README's ``simsweep ...`` lines (``\\``
continuations joined, ``# ...`` comments dropped) and fails when one is neither run here nor
skipped with a stated reason, so a new README command cannot go untested silently.
``test_readme_commands_run_on_a_fresh_clone`` clones this repository into a temporary folder
(tracked files as they are in the working tree; no ``../shared`` beside it), and runs the
commands through the ``simsweep`` entry point with the installed environment (``PYTHONPATH`` =
the clone, cwd = the clone, so MLflow's store is the clone's ``.simsweep/``), all in one process
that starts one local Ray for every sweep and search (the only difference from typing them one
by one: Ray's start-up is paid once). Each must exit 0 and give a non-degenerate result: a sweep
or a search a results table with more than one distinct feasible objective value, a simulation
a positive iteration time, ``validate`` an error table, ``astra`` every NPU finished. Commands
that name the user's own files (``FILE``, ``PREFIX``, ``ALGO.xml``, ``inputs/``) run on files
the clone has: the traces ``chakra export`` just wrote and ``tests/data``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"

# a README command -> the command run (placeholders replaced by files the clone has)
_EXPORT = "runs/x"
RUN: dict[str, str] = {
    "simsweep chakra export --out PREFIX [overrides]": f"simsweep chakra export --out {_EXPORT}",
    "simsweep chakra show FILE [--limit N]": f"simsweep chakra show {_EXPORT}.0.et --limit 5",
    "simsweep chakra collective --algorithm ring --ranks 8 --size 1048576 --out PREFIX":
        "simsweep chakra collective --algorithm ring --ranks 8 --size 1048576 --out runs/ring",
    "simsweep chakra msccl ALGO.xml --size 1048576 --out PREFIX":
        "simsweep chakra msccl tests/data/chakra/ring_allreduce_4gpu.xml --size 1048576 "
        "--out runs/msccl",
    "simsweep astra --workload inputs/workload --system inputs/system.json --network "
    "inputs/network.yml --remote-memory inputs/remote_memory.json --comm-group "
    "inputs/comm_groups.json --network-backend aware":
        f"simsweep astra --workload {_EXPORT} --system {_EXPORT}.system.json --network "
        f"{_EXPORT}.network.yml --remote-memory tests/data/astra/no_memory.json --comm-group "
        f"{_EXPORT}.comm_groups.json --network-backend aware",
    "simsweep validate --cases tests/data/validation/extra_cases.csv --out pred.csv": "",
    "simsweep simulate workload=gpt3_175b parallel=megatron_tp8_pp8 system=dgx_a100_80g "
    "system.num_gpus=1024": "",
    "simsweep simulate workload=llama3_70b parallel.tp=8 parallel.pp=4 "
    "parallel.sequence_parallel=true system=dgx_h100_80g system.num_gpus=512 "
    "parallel.global_batch=512 --json --trace timeline.json": "",
    "simsweep simulate workload=resnet50 system.num_gpus=8 parallel.global_batch=2048 "
    "parallel.micro_batch=256": "",
    "simsweep simulate workload=dlrm system.num_gpus=16 parallel.ep=16 "
    "parallel.global_batch=65536 parallel.micro_batch=4096": "",
    "simsweep simulate workload=gnmt system.num_gpus=16 parallel.global_batch=2048 "
    "parallel.micro_batch=128": "",
    "simsweep simulate workload=resnet50 system.num_gpus=64 parallel.global_batch=8192 "
    "parallel.micro_batch=128 system.endpoint.collective_engine=endpoint": "",
    "simsweep simulate collective=in_network memory=pool": "",
    "simsweep sweep": "",
    "simsweep sweep 'workload=resnet50,gnmt,dlrm' system.num_gpus=8 parallel.global_batch=256 "
    "parallel.micro_batch=32 system.endpoint.collective_engine=endpoint,ace": "",
    "simsweep sweep system=mixed_v100_p100 workload=gpt_tiny parallel.precision=fp16 "
    "parallel.global_batch=192 system.pools.0.count=16,32 system.pools.1.count=16,32": "",
    "simsweep sweep system.num_gpus=64 parallel.global_batch=512 parallel.tp=1,2,4,8 "
    "parallel.pp=1,2,4": "",
    "simsweep sweep 'system=glob(dgx_*)' system.num_gpus=64 parallel.tp=1,8": "",
    "simsweep sweep sweep.mode=random sweep.num_points=5000 sweep.seed=1 "
    "'system.scaleout.bandwidth_GBps=interval(25,400)' "
    "'system.accelerator.peak_tflops_bf16=int(interval(300,1000))' "
    "'system.scaleup.bandwidth_GBps=tag(log,interval(100,1800))'": "",
    "simsweep sweep sweep.mode=sobol sweep.num_points=4096 "
    "'system.scaleout.bandwidth_GBps=interval(25,400)' "
    "'system.accelerator.hbm_bandwidth_GBps=interval(1500,3500)'": "",
    "simsweep sweep sweep=default parallel.tp=8": "",
    "simsweep sweep system.num_gpus=16 parallel.global_batch=32 "
    "collective=default,ring,in_network memory=default,per_node,pool": "",
    # the folder of the example is the default sweep's, run above
    "simsweep sweep sweep.resume=true sweep.output_dir=outputs/sweep-default-20261121-081500":
        "simsweep sweep sweep.resume=true sweep.output_dir={default_sweep}",
    "simsweep sync outputs/sweep-default-20261121-081500": "simsweep sync {default_sweep}",
    "simsweep search system=mixed_v100_p100 workload=gpt_tiny parallel.precision=fp16 "
    "parallel.global_batch=192 'search.space.system.pools.1.count=range(16,49,16)' "
    "'search.space.parallel.work_split=choice(even,balanced,explicit)' "
    "'search.space.parallel.work_shares.1=interval(0.25,1.0)' "
    "'search.objectives=[iteration_time_s,capex_usd]' search.n_trials=48": "",
    "simsweep search workload=gpt3_175b system=dgx_h100_80g system.num_gpus=1024 "
    "parallel.global_batch=1536 search.n_trials=40": "",
    "simsweep search system.num_gpus=64 parallel.global_batch=512 'parallel.tp=choice(1,2,4,8)' "
    "'system.scaleout.bandwidth_GBps=tag(log, interval(12.5,400))' "
    "'search.space.parallel.micro_batch=int_interval(1,8)' "
    "'search.derived.parallel.dp=system.num_gpus / (parallel.tp * parallel.pp)' "
    "search.objectives=[iteration_time_s,cost_usd_per_iter] search.sampler=nsga2 "
    "search.n_trials=48": "",
}
SKIP: dict[str, str] = {
    "simsweep trace torchvision.models:resnet50 --input-shape 32x3x224x224 --dtype bfloat16 "
    "--out runs/r50": "optional PyTorch extra; tests/simcore/traces/pytorch trace ResNet-50",
    "simsweep trace mypkg.models:gpt --kwargs '{\"layers\": 24}' --input-shape 8x2048:int64 "
    "--dtype bfloat16 --blocks blocks --out runs/gpt": "the user's own model package",
    "simsweep trace --import-et step.json --kineto step.kineto.json --ranks 8 --out runs/real":
        "the user's own PyTorch and Kineto traces (tests/simcore/traces/pytorch/"
        "test_kineto_link.py links a real profiler step)",
    "simsweep sweep workload=traced workload.trace=runs/gpt.0.et system=dgx_h100_80g "
    "system.num_gpus=64 parallel.micro_batch=8 parallel.global_batch=512 "
    "parallel.tp=1,2,4,8 parallel.pp=1,2 system.scaleup.bandwidth_GBps=150,450,900":
        "the trace of the user's model above (tests/search/sweep/test_sweep_traced.py sweeps "
        "a traced GPT)",
    "simsweep simulate workload=traced workload.trace=runs/gpt.0.et parallel.micro_batch=8 "
    "parallel.tp=2": "the trace of the user's model above",
    "simsweep search search=dlrm_placement": "a 96-trial example study "
                                             "(tests/search/study/test_search_families.py "
                                             "searches DLRM)",
    "simsweep astra --workload runs/real --system S.json --network N.yml":
        "files of the trace import above (astra runs on an export here)",
    "simsweep search search=gpt3_175b_1024_h100": "200 GPT-3 175B plans (~12 s; the 40-trial "
                                                  "search above runs its space); "
                                                  "tests/search/study/test_structural_fast.py "
                                                  "builds 120 of its plans",
    "simsweep search search=gpt3_175b_1024_h100_overlap": "200 GPT-3 175B plans; "
                                                          "tests/search/study/"
                                                          "test_overlap_search.py runs 16 "
                                                          "of its trials both ways",
    "simsweep search search=llama3_405b_8192_h100": "200 Llama 3 405B plans; tests/search/study/"
                                                    "test_study_driver.py searches 48 trials of "
                                                    "its space",
    "simsweep search search=bandwidth_cost_70b": "64 trials on 4,096 GPUs (~10 s idle, more "
                                                 "under load); the study tests run its space",
    "simsweep search search=scaleup_vs_scaleout": "a 200-trial example study",
    "simsweep search search=bandwidth_cost_70b search.resume=true": "resumes the one above",
    "simsweep ui": "a server: tests/search/tracking/test_ui_browser.py loads it in Chromium",
}


def readme_commands(text: str) -> list[str]:
    """The ``simsweep`` command lines of the README's code blocks (comments dropped)."""
    out = []
    for block in re.findall(r"```[a-z]*\n(.*?)```", text, flags=re.S):
        current: str | None = None
        for line in block.split("\n"):
            stripped = line.strip()
            if current is not None:
                current += " " + stripped
            elif stripped.startswith("simsweep "):
                current = stripped
            else:
                continue
            code = re.split(r"\s#\s|\s\s#", current)[0].rstrip()
            if code.endswith("\\"):
                current = code[:-1].rstrip()
                continue
            out.append(code)
            current = None
    return out


def test_every_readme_command_is_classified():
    commands = readme_commands(README.read_text())
    assert len(commands) > 20
    unknown = [c for c in commands if c not in RUN and c not in SKIP]
    assert not unknown, f"README commands neither run nor skipped here: {unknown}"
    stale = [c for c in [*RUN, *SKIP] if c not in commands]
    assert not stale, f"no longer in the README: {stale}"
    assert "simsweep sweep" in RUN and any(c.startswith("simsweep search") for c in RUN)


_RUNNER = r'''
import contextlib, io, json, os, shlex, sys, time
import ray
from search.run.workers import init_ray
init_ray(None, 2, None, None, {})  # as a sweep starts it (loopback, private temp dir)
from search.cli import main
report = []
default_sweep = ""
for cmd in json.load(open(sys.argv[1])):
    cmd = cmd.replace("{default_sweep}", default_sweep)
    out, err = io.StringIO(), io.StringIO()
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(shlex.split(cmd)[1:])
        except SystemExit as ex:
            code = ex.code
    text = out.getvalue()
    if cmd == "simsweep sweep":
        default_sweep = next(l.split(": ", 1)[1] for l in text.splitlines()
                             if l.startswith("results: ")).rsplit("/", 1)[0]
    report.append({"cmd": cmd, "code": code, "out": text, "err": err.getvalue()[-3000:],
                   "s": time.perf_counter() - t0})
    json.dump(report, open(sys.argv[2], "w"))
ray.shutdown()
'''


def _fresh_clone(dest: Path) -> Path:
    """A clone of this repository with its tracked files as they are in the working tree."""
    clone = dest / "simsweep"
    subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(ROOT), str(clone)],
                   check=True, capture_output=True, timeout=120)
    files = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], check=True,
                           capture_output=True, timeout=60).stdout.decode().split("\0")
    for name in filter(None, files):
        src = ROOT / name
        if src.is_file():
            (clone / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, clone / name)
    return clone


def _distinct_feasible(table: Path, objective: str) -> int:
    import polars as pl

    frame = pl.read_parquet(table)
    if objective not in frame.columns:  # no feasible point: the table has no metric columns
        return 0
    if "feasible" in frame.columns:
        frame = frame.filter(pl.col("feasible"))
    return frame[objective].drop_nulls().round(12).n_unique()


def _check(cmd: str, out: str, clone: Path) -> None:
    verb = cmd.split()[1]
    if verb in ("sweep", "search"):
        table = clone / next(line.split(": ", 1)[1] for line in out.splitlines()
                             if line.startswith("results: "))  # absolute, or relative to cwd
        assert _distinct_feasible(table, "iteration_time_s") > 1, f"degenerate: {cmd}\n{out}"
    elif verb == "simulate":
        if "--json" in cmd:
            assert json.loads(out[out.index("{"):])["iteration_time_s"] > 0
        else:
            times = re.findall(r"iteration[^\n]*?([0-9.]+) (?:ms|s)\b", out)
            assert times and float(times[0]) > 0, out
    elif verb == "validate":
        rows = (clone / "pred.csv").read_text().strip().splitlines()
        assert len(rows) > 1 and "ok" in out + rows[1], out
    elif verb == "astra":
        assert re.search(r"sys\[0\] finished, [1-9]\d* cycles", out), out
    elif verb == "sync":
        assert "child" in out or "logged" in out or "points" in out, out
    elif verb == "chakra" and "--out" in cmd:
        prefix = cmd.split("--out ", 1)[1].split()[0]
        assert list((clone / prefix).parent.glob(Path(prefix).name + "*")), cmd
    else:
        assert out.strip(), cmd


@pytest.mark.slow
@pytest.mark.ray
@pytest.mark.mlflow
def test_readme_commands_run_on_a_fresh_clone():
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    commands = readme_commands(README.read_text())
    order = sorted(RUN, key=lambda c: (c.startswith(("simsweep astra", "simsweep chakra show")),
                                       "{default_sweep}" in RUN[c]))
    chosen = [RUN[c] or c for c in order if c in commands]
    with tempfile.TemporaryDirectory(prefix="readme_") as tmp:
        clone = _fresh_clone(Path(tmp))
        assert not (clone.parent / "shared").exists()
        (Path(tmp) / "cmds.json").write_text(json.dumps(chosen))
        (Path(tmp) / "runner.py").write_text(_RUNNER)
        env = {**os.environ, "PYTHONPATH": str(clone), "RAY_USAGE_STATS_ENABLED": "0",
               "SIMSWEEP_CACHE_DIR": str(Path(tmp) / "cache"), "MLFLOW_DISABLE_TELEMETRY": "true"}
        done = subprocess.run([sys.executable, str(Path(tmp) / "runner.py"),
                               str(Path(tmp) / "cmds.json"), str(Path(tmp) / "report.json")],
                              cwd=clone, env=env, capture_output=True, text=True, timeout=900)
        report_path = Path(tmp) / "report.json"
        assert report_path.exists(), done.stderr[-3000:]
        report = json.loads(report_path.read_text())
        assert len(report) == len(chosen), done.stderr[-3000:]
        print("seconds per command:", [(r["cmd"][:50], round(r["s"], 1)) for r in report])
        for item in report:
            assert item["code"] == 0, f"{item['cmd']} exited {item['code']}\n{item['out']}\n{item['err']}"
            try:
                _check(item["cmd"], item["out"], clone)
            except Exception as err:
                raise AssertionError(f"{item['cmd']}: {err}\n{item['out'][-2000:]}") from err
            # no warnings (third-party deprecation notices included) on a command's stderr
            assert not re.search(r"\w*Warning: ", item["err"]), (item["cmd"], item["err"])
