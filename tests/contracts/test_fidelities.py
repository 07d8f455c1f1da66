"""Contract suite run over every registered fidelity (:data:`simcore.fidelity.REGISTRY`).

On a graph without communication every fidelity must give the same compute time (up to the 1 us
resolution a fidelity replaying Chakra ETs rounds each kernel to, ``duration_micros``), with no
exposed communication and no bubble, and a fidelity that does not model a feature says why.
"""

from __future__ import annotations

import numpy as np
import pytest

from simcore.engine.evaluate import compile_workload, evaluate_times
from simcore.fidelity import FEATURES, REGISTRY, Fidelity
from simcore.hardware.batch import SystemBatch
from simcore.ir.graph import GraphBuilder, NodeKind
from simcore.ir.ops import OpTable
from simcore.ir.streams import Stream
from simcore.specs.parallel import ParallelSpec
from simcore.specs.system import AcceleratorSpec, SystemSpec
from simcore.workloads import Workload

US = 1e-6


def _compute_only() -> tuple[Workload, int]:
    """One stage: a chain of 12 GEMMs and memory-bound passes on its compute stream."""
    ops = OpTable()
    gemm = ops.template("gemm", [(ops.kernel("gemm", 4096, 4096, 4096), 1.0)])
    mem = ops.template("mem", [(ops.kernel("mem", 2.0**28), 1.0)])
    b = GraphBuilder("compute-only")
    comp = Stream.compute(0)
    last = None
    for k in range(12):
        deps = [last] if last is not None else []
        last = b.add(NodeKind.COMPUTE, resources=[comp], deps=deps, rank=0, name=f"n{k}",
                     template=gemm if k % 3 else mem, stage=0)
    w = Workload(graph=b.build(), ops=ops, num_stages=1, in_flight=(1,))
    return w, 12


SYSTEMS = [SystemSpec(num_gpus=1, gpus_per_node=1,
                      accelerator=AcceleratorSpec(peak_tflops_bf16=t, hbm_bandwidth_GBps=m))
           for t, m in [(312.0, 2039.0), (989.0, 3350.0)]]


@pytest.fixture(params=sorted(REGISTRY))
def fidelity(request: pytest.FixtureRequest) -> Fidelity:
    return REGISTRY[request.param]


def _compute_s(fid: Fidelity) -> tuple[np.ndarray, np.ndarray]:
    w, _ = _compute_only()
    par = ParallelSpec(global_batch=1).resolve(1)
    cw = compile_workload(fid.prepare(w))
    sb = SystemBatch.from_specs(SYSTEMS)
    bd = evaluate_times(cw, fid.durations(cw, sb, SYSTEMS, par), fid.overlap_slowdown(sb))
    exposed = sum(bd.exposed_by_kind.values())
    np.testing.assert_array_equal(exposed, 0.0)
    np.testing.assert_allclose(bd.bubble_s, 0.0, atol=1e-15)
    np.testing.assert_allclose(bd.iteration_time_s, bd.compute_s, rtol=1e-12)
    return bd.compute_s, bd.iteration_time_s


def test_no_communication_gives_the_same_compute_time(fidelity: Fidelity) -> None:
    assert isinstance(fidelity, Fidelity)
    _, nodes = _compute_only()
    compute, _ = _compute_s(fidelity)
    reference, _ = _compute_s(REGISTRY["calibrated"])
    assert (reference > 100 * US * nodes / 12).all()  # kernels far above the 1 us resolution
    np.testing.assert_allclose(compute, reference, rtol=0, atol=0.5 * US * nodes)


def test_supports_answers_every_feature(fidelity: Fidelity) -> None:
    for feature in FEATURES:
        why = fidelity.supports(feature)
        assert why is None or (isinstance(why, str) and fidelity.name in why)
