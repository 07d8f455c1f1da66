"""The transformer's graph-size estimate (``simcore.workloads.transformer.size``) and the
``graph_nodes`` bound it feeds: checked before any build, in seconds, with a one-line reason.

Node counts of built graphs are the reference (``Condensed.chains.num_nodes`` is the exact node
count of the equivalent node graph, proven equal to it in ``tests/simcore/ir/``).
"""

from __future__ import annotations

import time
from dataclasses import replace

import pytest

from simcore.api import check_structure
from simcore.errors import InputError
from simcore.specs.parallel import ParallelSpec
from simcore.specs.system import AcceleratorSpec, SystemSpec
from simcore.workloads.transformer.generator import build_transformer
from simcore.workloads.transformer.size import transformer_graph_nodes
from simcore.workloads.transformer.spec import ModelSpec

TINY = ModelSpec(name="tiny", num_layers=4, hidden_size=256, num_heads=4, seq_len=512,
                 vocab_size=1024)
MOE = replace(TINY, num_experts=4, top_k=2)
BASE = ParallelSpec(tp=2, pp=2, global_batch=8)
PLANS = [BASE, replace(BASE, global_batch=64), replace(BASE, zero_stage=1),
         replace(BASE, zero_stage=2), replace(BASE, zero_stage=3),
         replace(BASE, zero_stage=2, dp_overlap=False), replace(BASE, vp=2),
         replace(BASE, tp_comm_overlap=True), replace(BASE, tp=1, cp=2),
         replace(BASE, recompute="full"), replace(BASE, recompute="selective")]


def _system(num_gpus: int = 8) -> SystemSpec:
    acc = AcceleratorSpec(peak_tflops_bf16=312.0, peak_tflops_fp16=312.0)
    return SystemSpec(num_gpus=num_gpus, gpus_per_node=4, accelerator=acc)


@pytest.mark.parametrize("model", [TINY, MOE], ids=["dense", "moe"])
@pytest.mark.parametrize("plan", PLANS, ids=lambda p: f"z{p.zero_stage}v{p.vp}o{int(p.tp_comm_overlap)}c{p.cp}{p.recompute}{p.global_batch}")
def test_node_estimate_bounds_the_built_graph_tightly(model: ModelSpec, plan: ParallelSpec) -> None:
    plan = replace(plan, ep=2) if model.is_moe else plan
    par, reason = check_structure(model, plan, _system())
    assert par is not None, reason
    nodes = build_transformer(model, par, 4).condensed.chains.num_nodes  # type: ignore[union-attr]
    est = transformer_graph_nodes(model, par, 4, condensed=False)
    assert nodes <= est <= 1.3 * nodes + 32, (nodes, est)
    assert transformer_graph_nodes(model, par, 4) <= est  # runs never count more than nodes


@pytest.mark.parametrize("plan", [replace(BASE, ep=2, ep_overlap_chunks=2),
                                  replace(BASE, ep=2, ep_overlap_chunks=5, zero_stage=3),
                                  replace(BASE, ep=2, ep_overlap_chunks=3, tp_comm_overlap=True)],
                         ids=["chunks2", "chunks5-zero3", "chunks3-tp-overlap"])
def test_node_estimate_counts_the_chunks_of_a_pipelined_all_to_all(plan: ParallelSpec) -> None:
    par, reason = check_structure(MOE, plan, _system())
    assert par is not None, reason
    nodes = build_transformer(MOE, par, 4).condensed.chains.num_nodes  # type: ignore[union-attr]
    est = transformer_graph_nodes(MOE, par, 4, condensed=False)
    assert nodes <= est <= 1.3 * nodes + 32, (nodes, est)
    blocking = build_transformer(MOE, replace(par, ep_overlap_chunks=1), 4)
    # all-to-all, experts, all-to-all become 3 x chunks pieces and the residual step, per MoE
    # layer and pass (with TP overlap: experts and residual both cut into 4 pieces)
    per_layer_pass = 3 * plan.ep_overlap_chunks + 1 - 3
    passes = 2 + (1 if par.recompute == "full" else 0)
    extra = MOE.num_layers * par.num_micro_batches * passes * per_layer_pass
    assert nodes - blocking.condensed.chains.num_nodes == extra  # type: ignore[union-attr]


def test_condensed_layers_pass_where_node_by_node_emission_is_refused() -> None:
    """10^4 micro-batches x 2000 layers: plain layers are one run per pass (cheap, allowed);
    under ZeRO-3 every layer's gathers are nodes of their own (about 10^8: refused)."""
    model = replace(TINY, num_layers=2000)
    system = _system(16)
    plain = ParallelSpec(tp=2, pp=4, global_batch=20000)
    t0 = time.monotonic()
    par, reason = check_structure(model, plain, system)
    assert par is not None, reason
    assert transformer_graph_nodes(model, par, 4, condensed=False) > 1e8  # as nodes: huge
    par3, reason3 = check_structure(model, replace(plain, zero_stage=3), system)
    assert time.monotonic() - t0 < 5
    assert par3 is None
    assert "parallel.global_batch=20000" in reason3 and "limit graph_nodes" in reason3, reason3
    assert "\n" not in reason3


def test_the_bound_is_a_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    par, _ = check_structure(TINY, BASE, _system())
    assert par is not None
    monkeypatch.setenv("SIMSWEEP_MAX_GRAPH_NODES", "50")
    par, reason = check_structure(TINY, BASE, _system())
    assert par is None and "graph_nodes" in reason and "SIMSWEEP_MAX_GRAPH_NODES" in reason


def test_building_every_node_is_bounded_on_the_exact_count(monkeypatch: pytest.MonkeyPatch) -> None:
    """A condensed graph expands into nodes (timeline, Chakra export) only within the bound."""
    par, _ = check_structure(TINY, BASE, _system())
    assert par is not None
    w = build_transformer(TINY, par, 4)
    nodes = w.condensed.chains.num_nodes  # type: ignore[union-attr]
    monkeypatch.setenv("SIMSWEEP_MAX_GRAPH_NODES", str(nodes - 1))
    with pytest.raises(InputError, match="limit graph_nodes"):
        _ = w.graph.num_nodes
    monkeypatch.setenv("SIMSWEEP_MAX_GRAPH_NODES", str(nodes))
    assert build_transformer(TINY, par, 4).graph.num_nodes == nodes
