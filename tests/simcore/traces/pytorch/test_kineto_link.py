"""Linking a real ExecutionTraceObserver ET with the torch.profiler (Kineto) trace of the same
CPU training step: the converted compute nodes carry the durations Kineto measured."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simcore.errors import InputError
from simcore.traces.chakra.et import read_trace
from simcore.traces.pytorch.et_import import et_to_chakra, read_pytorch_et
from simcore.traces.pytorch.kineto_link import link_kineto, read_kineto


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(ET JSON, Kineto JSON) of one real CPU step of a small MLP, recorded together."""
    torch = pytest.importorskip("torch")
    from torch.profiler import ExecutionTraceObserver, ProfilerActivity, profile

    folder = tmp_path_factory.mktemp("kineto")
    et_path, kineto_path = folder / "et.json", folder / "kineto.json"
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 8))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(32, 64)
    observer = ExecutionTraceObserver().register_callback(str(et_path))
    with profile(activities=[ProfilerActivity.CPU], execution_trace_observer=observer) as prof:
        model(x).square().mean().backward()
        opt.step()
    prof.export_chrome_trace(str(kineto_path))
    return et_path, kineto_path


def _top_level(et: dict) -> list[dict]:
    thread = {n["id"] for n in et["nodes"] if n["name"] == "[pytorch|profiler|execution_trace|thread]"}
    return [n for n in et["nodes"] if n["ctrl_deps"] in thread]


def test_linked_nodes_carry_the_kineto_durations(traces: tuple[Path, Path], tmp_path: Path) -> None:
    et_path, kineto_path = traces
    et, kineto = read_pytorch_et(et_path), read_kineto(kineto_path)
    cpu = {e["args"]["Record function id"]: e for e in kineto["traceEvents"]
           if e.get("cat") in ("cpu_op", "user_annotation")}
    linked = link_kineto(et, kineto)
    measured = {}
    for n in _top_level(linked):
        attrs = {a["name"]: a["value"] for a in n["attrs"]}
        event = cpu[attrs["rf_id"]]  # every top-level op was profiled
        assert event["name"] == n["name"]
        assert attrs["inclusive_dur"] == event["dur"] and attrs["ts"] == event["ts"]
        assert 0.0 <= attrs["exclusive_dur"] <= attrs["inclusive_dur"]
        assert "gpu_dur" not in attrs  # a CPU run launches no device kernels
        measured[n["id"]] = event["dur"]
    names = {n["name"] for n in _top_level(linked)}
    assert {"aten::linear", "aten::relu", "Optimizer.step#SGD.step"} <= names
    trace = et_to_chakra(linked)
    got = {int(trace.ids[i]): int(trace.duration_micros[i]) for i in range(trace.num_nodes)
           if int(trace.ids[i]) in measured}
    assert got == {i: round(d) for i, d in measured.items()}
    assert sum(got.values()) > 0
    # unlinked: the same conversion has no times
    plain = et_to_chakra(et)
    assert not plain.duration_micros.any()
    # the CLI path: --import-et with --kineto writes the durations, readable back
    from search.cli import main as cli

    assert cli(["trace", "--import-et", str(et_path), "--kineto", str(kineto_path),
                "--ranks", "2", "--out", str(tmp_path / "real")]) == 0
    back = read_trace(tmp_path / "real.0.et")
    assert sorted(int(d) for d in back.duration_micros if d) == sorted(v for v in got.values() if v)
    # replayed by simsweep astra's engine: each of 2 replicas runs the host ops one after
    # another on its CPU (no collective in this step)
    from simcore.emulator.inputs import read_network, read_system
    from simcore.emulator.load import read_programs
    from simcore.emulator.run import simulate_astra

    (tmp_path / "s.json").write_text(json.dumps({
        "scheduling-policy": "LIFO", "endpoint-delay": 10, "active-chunks-per-dimension": 1,
        "preferred-dataset-splits": 1, "all-reduce-implementation": ["ring"],
        "all-gather-implementation": ["ring"], "reduce-scatter-implementation": ["ring"],
        "all-to-all-implementation": ["ring"], "collective-optimization": "localBWAware",
        "local-mem-bw": 1600}))
    (tmp_path / "n.yml").write_text("topology: [ Switch ]\nnpus_count: [ 2 ]\nbandwidth: [ 50.0 ]\n"
                                    "latency: [ 500.0 ]\n")
    network = read_network(tmp_path / "n.yml")
    ran = simulate_astra(read_programs(str(tmp_path / "real")), read_system(tmp_path / "s.json"),
                         network, "unaware", None)
    unlinked = sum(1 for n in _top_level(linked) if round(measured.get(n["id"], 0)) == 0)
    assert max(r.finish_ns for r in ran) >= 1000 * sum(got.values())
    assert max(r.finish_ns for r in ran) <= 1000 * sum(got.values()) + unlinked + 1000


def test_traces_of_different_runs_do_not_link(traces: tuple[Path, Path], tmp_path: Path) -> None:
    et_path, kineto_path = traces
    kineto = read_kineto(kineto_path)
    for e in kineto["traceEvents"]:
        if "Record function id" in e.get("args", {}):
            e["args"]["Record function id"] += 10**6
    with pytest.raises(InputError, match="match no node of the execution trace"):
        link_kineto(read_pytorch_et(et_path), kineto)
    renamed = read_kineto(kineto_path)  # same ids, other ops: not the same run
    for e in renamed["traceEvents"]:
        e["name"] = "other::" + str(e.get("name"))
    with pytest.raises(InputError, match="match no node of the execution trace"):
        link_kineto(read_pytorch_et(et_path), renamed)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"events": []}))
    with pytest.raises(InputError, match="traceEvents"):
        read_kineto(bad)


def test_device_kernels_link_by_correlation_to_the_launching_op(traces: tuple[Path, Path]) -> None:
    """A GPU run's Kineto trace has, per kernel, a runtime launch (``cudaLaunchKernel``) on the
    host thread and the kernel on a stream, sharing a ``correlation`` id. This CPU machine
    cannot record one, so two launches and their kernels are added to the real CPU trace
    inside the first ``aten::addmm`` (under the first ``aten::linear``): the linear's node then
    carries the kernels' summed time, and its Chakra node that time."""
    et_path, kineto_path = traces
    et, kineto = read_pytorch_et(et_path), read_kineto(kineto_path)
    events = kineto["traceEvents"]
    addmm = next(e for e in events if e.get("cat") == "cpu_op" and e["name"] == "aten::addmm")
    t0, tid = float(addmm["ts"]), addmm["tid"]
    for c, (dur, gap) in enumerate([(12.5, 0.1), (30.25, 0.2)]):
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "tid": tid,
                       "pid": addmm["pid"], "ts": t0 + gap * float(addmm["dur"]), "dur": 0.01,
                       "args": {"correlation": 900 + c}})
        events.append({"ph": "X", "cat": "kernel", "name": f"gemm_{c}", "tid": 7, "pid": 0,
                       "ts": t0 + 1000.0 * (c + 1), "dur": dur, "args": {"correlation": 900 + c}})
    linked = link_kineto(et, kineto)
    rf = addmm["args"]["Record function id"]
    by_rf = {next(a["value"] for a in n["attrs"] if a["name"] == "rf_id"): n for n in linked["nodes"]
             if any(a["name"] == "rf_id" for a in n.get("attrs", []))}
    gpu = {n["name"]: next((a["value"] for a in n["attrs"] if a["name"] == "gpu_dur"), None)
           for n in linked["nodes"] if n.get("attrs")}
    node = by_rf[rf]
    assert next(a["value"] for a in node["attrs"] if a["name"] == "gpu_dur") == 42.75
    linear = next(n for n in _top_level(linked) if n["name"] == "aten::linear")
    assert next(a["value"] for a in linear["attrs"] if a["name"] == "gpu_dur") == 42.75
    assert gpu["aten::relu"] is None
    trace = et_to_chakra(linked)
    row = [i for i in range(trace.num_nodes) if int(trace.ids[i]) == linear["id"]]
    assert int(trace.duration_micros[row[0]]) == 43  # round(42.75)
