"""Contract suite run over every registered workload family (:data:`simcore.workloads.REGISTRY`).

Every family must: build a valid DAG on its tiny spec (acyclic, templates and stages in range,
every stream typed), give in a batch of B systems exactly the B single-point results, and have
a per-stage memory footprint that does not shrink when the micro-batch grows, and estimate the
nodes its builder materialises (``graph_nodes``, the bound checked before a build) as an upper
bound within twice the built count.
"""

from __future__ import annotations

import inspect
from dataclasses import replace

import numpy as np
import pytest

from simcore.api import check_structure, simulate_batch
from simcore.engine._chains import predecessors
from simcore.engine.result import METRICS
from simcore.ir.dag import levelize
from simcore.ir.streams import StreamKind
from simcore.specs.parallel import ParallelSpec
from simcore.specs.system import AcceleratorSpec, SystemSpec, TopologyDimSpec
from simcore.workloads import REGISTRY, WorkloadFamily, family_of

FAMILIES = sorted(REGISTRY)
PLAN = ParallelSpec(tp=2, pp=2, global_batch=8)


def _system(out_GBps: float = 25.0, tflops: float = 312.0) -> SystemSpec:
    acc = AcceleratorSpec(peak_tflops_bf16=tflops, peak_tflops_fp16=tflops)
    return SystemSpec(num_gpus=8, gpus_per_node=4, accelerator=acc,
                      scaleout=TopologyDimSpec(bandwidth_GBps=out_GBps, latency_ns=5000.0))


def _plan(family: WorkloadFamily) -> ParallelSpec:
    """The family's own tiny plan (data-parallel families), else tp = pp = 2."""
    tiny = getattr(family, "tiny_plan", None)
    return tiny() if tiny is not None else PLAN


@pytest.fixture(params=FAMILIES)
def family(request: pytest.FixtureRequest) -> WorkloadFamily:
    return REGISTRY[request.param]


def test_registry_entries_satisfy_the_protocol(family: WorkloadFamily) -> None:
    assert isinstance(family, WorkloadFamily)
    spec = family.tiny_spec()
    assert isinstance(spec, family.spec_type)
    assert family_of(spec) is family
    assert REGISTRY[family.name] is family


def test_tiny_spec_builds_a_valid_dag(family: WorkloadFamily) -> None:
    spec, system = family.tiny_spec(), _system()
    par, reason = check_structure(spec, _plan(family), system)
    assert par is not None, reason
    w = family.build(spec, par, system.gpus_per_node)
    g = w.graph
    assert g.num_nodes > 0
    ptr, idx = predecessors(g)
    levels = levelize(ptr, idx, g.num_nodes)
    assert levels is not None, "the graph (dependencies + stream order) has a cycle"
    assert sum(lv.size for lv in levels) == g.num_nodes
    tmpl = g.attr("template", -1.0)
    assert ((tmpl >= 0) & (tmpl < len(w.ops.templates))).all()
    stage = g.attr("stage", -1.0)
    assert ((stage >= 0) & (stage < w.num_stages)).all()
    assert len(w.in_flight) == w.num_stages
    assert (g.stream_kind != StreamKind.OTHER).all(), "every stream of a family graph is typed"
    assert ((g.stream_stage >= 0) & (g.stream_stage < w.num_stages)).all()
    assert family.flops_per_iter(spec, par) > 0
    assert family.tokens_per_iter(spec, par) >= family.samples_per_iter(spec, par) > 0


def test_a_batch_equals_single_point_runs(family: WorkloadFamily) -> None:
    spec = family.tiny_spec()
    systems = [_system(bw, tf) for bw, tf in [(12.5, 312.0), (25.0, 500.0), (100.0, 989.0)]]
    plan = _plan(family)
    batch = simulate_batch(spec, plan, systems)
    assert batch.feasible.all(), batch.reason
    assert len(set(batch.iteration_time_s.tolist())) == 3
    for j, s in enumerate(systems):
        single = simulate_batch(spec, plan, [s])
        for name in METRICS:
            np.testing.assert_allclose(getattr(batch, name)[j], getattr(single, name)[0],
                                       rtol=1e-12, atol=1e-15, err_msg=name)


def test_footprint_is_monotone_in_the_micro_batch(family: WorkloadFamily) -> None:
    system = _system()
    previous: list[int] | None = None
    for mb in (1, 2, 4):
        # a family whose micro-batch is fixed by the spec (a traced model) makes one per size
        sized = "micro_batch" in inspect.signature(family.tiny_spec).parameters
        spec = family.tiny_spec(micro_batch=mb) if sized else family.tiny_spec()  # type: ignore[call-arg]
        par, reason = check_structure(spec, replace(_plan(family), micro_batch=mb, global_batch=32), system)
        assert par is not None, reason
        totals = [family.footprint(spec, par, s)["total"] for s in range(par.pp)]
        assert family.peak_footprint(spec, par)[1]["total"] == max(totals)
        if previous is not None:
            assert all(b >= a for a, b in zip(previous, totals, strict=True))
            assert sum(totals) > sum(previous)
        previous = totals


def _size_plans(family: WorkloadFamily) -> list[ParallelSpec]:
    base = _plan(family)
    plans = [base, replace(base, global_batch=base.global_batch * 4)]
    if family.name == "transformer":  # every way its builder emits layers
        plans += [replace(PLAN, zero_stage=1), replace(PLAN, zero_stage=2),
                  replace(PLAN, zero_stage=3), replace(PLAN, zero_stage=2, dp_overlap=False),
                  replace(PLAN, vp=2), replace(PLAN, tp_comm_overlap=True),
                  replace(PLAN, tp=1, cp=2), replace(PLAN, recompute="full")]
    return plans


def test_graph_nodes_bounds_what_build_makes(family: WorkloadFamily) -> None:
    """The size estimate checked before a build is an upper bound, and not a loose one."""
    spec, system = family.tiny_spec(), _system()
    for plan in _size_plans(family):
        par, reason = check_structure(spec, plan, system)
        assert par is not None, (plan, reason)
        w = family.build(spec, par, system.gpus_per_node)
        est = family.graph_nodes(spec, par, system.gpus_per_node)
        condensed = getattr(w, "condensed", None)
        if condensed is None:  # every node built one by one
            built = w.graph.num_nodes
            assert built <= est <= 2 * built + 64, (plan, built, est)
        else:  # runs count once: at least one per chain, at most one per node
            chains, nodes = condensed.chains.num_chains, condensed.chains.num_nodes
            assert chains <= est <= 2 * nodes + 64, (plan, chains, nodes, est)
