"""Import of a real ExecutionTraceObserver trace: a DDP (gloo) training step of a small MLP on
the CPU, recorded in the test, converted to Chakra, read by the official reader, run by
``simsweep astra`` and used by the traced family."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from chakra_testdata import read_official

from search.cli import main as cli
from simcore.errors import InputError
from simcore.traces.chakra.et import read_trace
from simcore.traces.pytorch.et_import import et_to_chakra, et_to_step, read_pytorch_et

PARAMS = 16 * 32 + 32 + 32 * 4 + 4  # Linear(16, 32) and Linear(32, 4) with biases
BATCH = 8


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SIMSWEEP_CACHE_DIR", str(tmp_path / "et-cache"))


@pytest.fixture(scope="module")
def et_json(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Record one real training step (DDP over gloo, world size 1) with ExecutionTraceObserver.

    The bucket all-reduce waits on its ``Work``, not on the future DDP waits on by default:
    gloo opens the ``gloo:all_reduce`` record function on this thread and closes it on its
    worker after completing the future, so with the default the step could go on before it
    closed; the observer then filed ``copy_bucket_to_grad`` and ``Optimizer.step`` as its
    children (a node it wrote late or not at all) and they were no top-level op (~0.5% of
    recordings under load). ``Work.wait()`` returns after the record function closed, so every
    op here is filed under its caller (the importer's handling of the late close is tested in
    test_et_import_async.py)."""
    import torch
    import torch.distributed as dist
    from torch.profiler import ExecutionTraceObserver

    def allreduce_and_wait(_: object, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
        buffer = bucket.buffer()  # world size 1: the sum is the mean, nothing to divide
        dist.all_reduce(buffer)  # synchronous: Work.wait()
        done: torch.futures.Future[torch.Tensor] = torch.futures.Future()
        done.set_result(buffer)
        return done

    # DDP checks the hook's annotations against the types; this module's are strings
    allreduce_and_wait.__annotations__.update(bucket=dist.GradBucket,
                                              **{"return": torch.futures.Future[torch.Tensor]})
    folder = tmp_path_factory.mktemp("et")
    dist.init_process_group("gloo", init_method=f"file://{folder / 'store'}", rank=0, world_size=1)
    try:
        torch.manual_seed(0)
        model = torch.nn.parallel.DistributedDataParallel(torch.nn.Sequential(
            torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)))
        model.register_comm_hook(None, allreduce_and_wait)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        x = torch.randn(BATCH, 16)
        model(x).pow(2).mean().backward()  # warm-up step outside the trace
        opt.step()
        path = folder / "step.json"
        obs = ExecutionTraceObserver()
        obs.register_callback(str(path))
        obs.start()
        model(x).pow(2).mean().backward()
        opt.step()
        opt.zero_grad()
        obs.stop()
        obs.unregister_callback()
    finally:
        dist.destroy_process_group()
    return path


def test_conversion_has_host_ops_data_deps_and_the_ddp_allreduce(et_json: Path) -> None:
    trace = et_to_chakra(read_pytorch_et(et_json))
    colls = [i for i in range(trace.num_nodes) if trace.types[i] == 7]
    allreduce = [i for i in colls if trace.int_attr("comm_type")[0][i] == 0]
    assert len(allreduce) == 1  # one DDP bucket holds all 676 gradients (< 1 MiB)
    assert trace.int_attr("comm_size")[0][allreduce[0]] == PARAMS * 4
    assert (trace.types == 1).sum() == 1  # the process-group metadata node
    comp = trace.types == 4
    assert comp.sum() > 10 and (trace.int_attr("is_cpu_op")[0][comp] == 1).all()
    # GEMM FLOPs of the kernels land on the top-level host op running them: the DDP module's
    # forward (both linear layers), the backward ops (dW1, dW2, dX2), nothing elsewhere
    num_ops = trace.int_attr("num_ops")[0]
    names = [trace.name(i) for i in range(trace.num_nodes)]
    assert num_ops[names.index("DistributedDataParallel.forward")] == 2 * BATCH * (16 * 32 + 32 * 4)
    assert num_ops[comp].sum() == 2 * BATCH * (16 * 32 + 32 * 4) + 2 * BATCH * (16 * 32 + 2 * 32 * 4)
    # data dependencies through tensor storages: the loss reads the module's output, the
    # all-reduce waits for the last gradient, the optimizer for the gradients copied back
    deps = trace.data_dep_index()

    def parents(name: str) -> set[str]:
        i = names.index(name)
        return {names[int(d)] for d in deps[trace.data_ptr[i]:trace.data_ptr[i + 1]]}

    assert "DistributedDataParallel.forward" in parents("aten::pow")
    assert parents("c10d::allreduce_") == {"autograd::engine::evaluate_function: "
                                           "torch::autograd::AccumulateGrad"}
    assert "torch.distributed.ddp.reducer::copy_bucket_to_grad" in parents("Optimizer.step#SGD.step")


def test_official_reader_round_trip_and_simsweep_astra(et_json: Path, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "real"
    assert cli(["trace", "--import-et", str(et_json), "--ranks", "2", "--out", str(out)]) == 0
    ours = read_trace(f"{out}.0.et")
    _, nodes = read_official(f"{out}.0.et")
    assert [n.id for n in nodes] == [int(x) for x in ours.ids]
    assert [n.type for n in nodes] == [int(x) for x in ours.types]
    dep = ours.data_dep_index()
    for i, n in enumerate(nodes):
        assert list(n.data_deps) == [int(ours.ids[d]) for d in dep[ours.data_ptr[i]:ours.data_ptr[i + 1]]]
    system = tmp_path / "system.json"
    system.write_text(json.dumps({
        "scheduling-policy": "LIFO", "endpoint-delay": 10, "active-chunks-per-dimension": 1,
        "preferred-dataset-splits": 4, "all-reduce-implementation": ["ring"],
        "all-gather-implementation": ["ring"], "reduce-scatter-implementation": ["ring"],
        "all-to-all-implementation": ["ring"], "collective-optimization": "localBWAware",
        "local-mem-bw": 1600}))
    network = tmp_path / "net.yml"
    network.write_text("topology: [ Switch ]\nnpus_count: [ 2 ]\nbandwidth: [ 50.0 ]\n"
                       "latency: [ 500.0 ]\n")
    capsys.readouterr()
    assert cli(["astra", "--workload", str(out), "--system", str(system),
                "--network", str(network)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and all(" finished, " in line for line in lines)


def test_imported_step_feeds_the_traced_family(et_json: Path, tmp_path: Path) -> None:
    from simcore.specs.parallel import ParallelSpec
    from simcore.specs.system import SystemSpec
    from simcore.traces.pytorch.api import import_execution_trace
    from simcore.workloads.traced.family import TracedFamily
    from simcore.workloads.traced.spec import TracedSpec

    step = et_to_step(read_pytorch_et(et_json))
    assert step.batch_size == BATCH and step.num_params == PARAMS
    assert step.flops("forward") == 2 * BATCH * (16 * 32 + 32 * 4)
    # no input gradient for the first layer: dW1, dW2 and dX2
    assert step.flops("backward") == 2 * BATCH * (16 * 32 + 2 * 32 * 4)
    _, step_path = import_execution_trace(et_json, tmp_path / "imp")
    fam, spec = TracedFamily(), TracedSpec(trace=step_path)
    par = ParallelSpec(micro_batch=BATCH, global_batch=4 * BATCH).resolve(4)
    assert fam.check(spec, par, SystemSpec(num_gpus=4, gpus_per_node=4)) is None
    w = fam.build(spec, par, 4)
    assert (w.graph.kind == 7).sum() == 1  # one DDP bucket all-reduce


def test_bad_execution_traces_are_one_clear_line(et_json: Path, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    data = json.loads(et_json.read_text())
    for n in data["nodes"]:
        if n["name"] == "c10d::allreduce_":
            n["name"] = "c10d::frobnicate_"
    with pytest.raises(InputError, match="c10d::frobnicate_.*unknown collective"):
        et_to_chakra(data)
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert cli(["trace", "--import-et", str(bad), "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is not JSON" in err
    bad.write_text('{"nodes": [{"id": 1}]}')
    assert cli(["trace", "--import-et", str(bad), "--out", str(tmp_path / "x")]) == 2
    assert "lacks name, ctrl_deps" in capsys.readouterr().err


def test_each_recorded_top_level_op_is_one_node(et_json: Path) -> None:
    """The all-reduce closes before the step goes on, so the observer filed every op under its
    caller: the conversion has one node per op directly under the thread root (the backend's
    own record aside) and one per c10d collective, as recorded."""
    data = read_pytorch_et(et_json)
    threads = {n["id"] for n in data["nodes"] if n["name"] == "[pytorch|profiler|execution_trace|thread]"}
    top = {n["id"] for n in data["nodes"] if n["ctrl_deps"] in threads and not n["name"].startswith("gloo:")}
    collectives = {n["id"] for n in data["nodes"] if n["name"].startswith("c10d::")}
    assert {int(i) for i in et_to_chakra(data).ids} == top | collectives
