"""One rank layout for every consumer: over every rank order (the 24 permutations of tp, cp, dp, pp),
the layout, the Chakra exporter (``pg_name`` groups, send peers) and the ``astra`` fidelity (the rings
and pairs it charges hops for) agree with Megatron-Core's numbering on the members of every group.

The reference groups are built here from the definition (Megatron-Core ``RankGenerator``: rank =
sum of coordinate x product of the sizes of the dimensions before it in the order; expert groups
carved out of dp as d = e + ep k), by enumerating every coordinate tuple.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from dataclasses import replace

import numpy as np
import pytest

from simcore.fidelity.astra.groups import comm_endpoints
from simcore.specs.parallel import ParallelSpec
from simcore.traces.chakra.encode import encode_trace
from simcore.traces.chakra.schema import NodeType
from simcore.workloads.layout import GROUP_KINDS, RankLayout
from simcore.workloads.transformer.export import transformer_to_files, transformer_to_traces
from simcore.workloads.transformer.generator import TransformerWorkload, build_transformer
from simcore.workloads.transformer.spec import ModelSpec

ORDERS = ["-".join(p) for p in itertools.permutations(("tp", "cp", "dp", "pp"))]
TINY = ModelSpec(name="gpt_tiny", num_layers=4, hidden_size=256, num_heads=4, seq_len=512,
                 vocab_size=1024)
TINY_MOE = ModelSpec(name="moe_tiny", num_layers=4, hidden_size=256, num_heads=4, seq_len=512,
                     vocab_size=1024, mlp="swiglu", num_experts=4, top_k=2)
DENSE = ParallelSpec(tp=2, cp=2, pp=2, dp=2, global_batch=4)  # 16 GPUs
MOE = ParallelSpec(tp=1, cp=2, pp=2, dp=4, ep=2, global_batch=8)  # 16 GPUs, edp groups of 2

Group = tuple[int, ...]


def _reference(par: ParallelSpec) -> tuple[dict[tuple[int, int, int, int], int], dict[str, set[Group]]]:
    """(coordinates (t, c, d, s) -> rank, kind -> set of groups) from the definition."""
    sizes = {"tp": par.tp, "cp": par.cp, "dp": par.dp_size, "pp": par.pp}
    stride, acc = {}, 1
    for dim in par.rank_order.split("-"):
        stride[dim], acc = acc, acc * sizes[dim]
    rank = {(t, c, d, s): t * stride["tp"] + c * stride["cp"] + d * stride["dp"] + s * stride["pp"]
            for t, c, d, s in itertools.product(*(range(sizes[k]) for k in ("tp", "cp", "dp", "pp")))}
    ep = par.ep
    keys = {  # what stays fixed inside a group of each kind
        "tp": lambda t, c, d, s: (c, d, s), "cp": lambda t, c, d, s: (t, d, s),
        "dp": lambda t, c, d, s: (t, s), "ep": lambda t, c, d, s: (t, c, d // ep, s),
        "edp": lambda t, c, d, s: (t, c, d % ep, s), "pp": lambda t, c, d, s: (t, c, d),
    }
    groups: dict[str, set[Group]] = {}
    for kind, key in keys.items():
        by: dict[tuple[int, ...], list[int]] = defaultdict(list)
        for coords, r in rank.items():
            by[key(*coords)].append(r)
        groups[kind] = {tuple(sorted(m)) for m in by.values()}
    last = par.pp - 1  # Megatron's tied embedding: first and last stage of one (t, c, d)
    groups["embedding"] = {(rank[(t, c, d, 0)], rank[(t, c, d, last)])
                           for t, c, d, _ in rank if last > 0}
    return rank, groups


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("par", [DENSE, MOE], ids=["dense", "moe"])
def test_layout_groups_match_megatron_numbering(order: str, par: ParallelSpec) -> None:
    par = replace(par, rank_order=order)
    rank, ref = _reference(par)
    lay = RankLayout.of(par, gpus_per_node=4)
    for (t, c, d, s), r in rank.items():
        assert lay.rank(t, c, d, s) == r and lay.coords(r) == (t, c, d, s) and lay.stage_of(r) == s
    for kind in GROUP_KINDS:
        assert {tuple(g) for g in lay.table(kind).tolist()} == ref[kind], kind
        for r in range(lay.num_ranks):
            m = lay.members(kind, r)
            assert r in m and m in ref[kind]
            assert tuple(lay.table(kind)[lay.group_index(kind)[r]]) == m
    tab, row = lay.across_stages((0, par.pp - 1))
    assert {tuple(g) for g in tab.tolist()} == ref["embedding"]
    assert all(r in tab[row[r]] for r in range(lay.num_ranks))
    # span: size and most members per node of rank 0's group (pp: rank 0 and its next stage)
    for kind in ("tp", "cp", "dp", "ep", "edp"):
        g0 = next(g for g in ref[kind] if 0 in g)
        per_node = int(np.bincount(np.asarray(g0) // 4).max())
        assert lay.span(kind) == ((len(g0), per_node) if len(g0) > 1 else (1, 1)), kind
    nxt = rank[(0, 0, 0, 1)]
    assert lay.span("pp") == (2, 2 if nxt // 4 == 0 else 1)


def _exported(w: TransformerWorkload, lay: RankLayout
              ) -> tuple[dict[int, set[Group]], dict[int, set[tuple[int, int]]], dict[int, Group]]:
    """Per template, the groups its ET nodes name (``pg_name``) and its (src, dst) send pairs."""
    traces, groups = transformer_to_traces(w, lay, np.zeros(len(w.ops.templates)))
    tmpl = w.graph.attr("template").astype(np.int64)
    n = w.graph.num_nodes
    rings: dict[int, set[Group]] = defaultdict(set)
    pairs: dict[int, set[tuple[int, int]]] = defaultdict(set)
    for r, tr in traces.items():
        dst, _ = tr.int_attr("comm_dst")
        pg = tr.str_attr("pg_name")
        for k in range(tr.num_nodes):
            node = int(tr.ids[k])
            t = int(tmpl[node % n])  # extra RECVs have id N + index
            if tr.types[k] == NodeType.COMM_COLL_NODE:
                members = groups[int(pg.value(k) or -1)]
                assert r in members
                rings[t].add(tuple(members))
            elif tr.types[k] == NodeType.COMM_SEND_NODE:
                pairs[t].add((r, int(dst[k])))
    return rings, pairs, groups


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize(("model", "par", "gpus_per_node"),
                         [(TINY, DENSE, 4), (TINY, DENSE, 8), (TINY_MOE, MOE, 4)],
                         ids=["dense-4", "dense-8", "moe-4"])
def test_exporter_and_astra_fidelity_use_the_layouts_groups(
    order: str, model: ModelSpec, par: ParallelSpec, gpus_per_node: int
) -> None:
    par = replace(par, rank_order=order)
    rank, ref = _reference(par)
    lay = RankLayout.of(par, gpus_per_node)
    w = build_transformer(model, par, gpus_per_node)
    rings, pairs, groups = _exported(w, lay)
    ends = comm_endpoints(w, par, gpus_per_node)
    names = w.ops.template_names
    for t in set(rings) | set(ends.rings):
        kind = names[t].split("_")[0]  # tp_allreduce, dp_grad_reduce, edp_..., embedding_tied_...
        assert rings[t] == ref[kind], names[t]
        assert {tuple(g) for g in ends.rings[t].tolist()} == ref[kind], names[t]
    used = {"dp", "embedding"} | ({"tp"} if par.tp > 1 else set()) | ({"ep", "edp"} if par.ep > 1 else set())
    assert {names[t].split("_")[0] for t in rings} == used  # cp exchanges KV by send/recv
    # comm_groups.json: every group of more than one rank of every kind but pp, and the
    # tied-embedding pairs, once
    listed = set().union(*(ref[k] for k in ("tp", "cp", "dp", "ep", "edp", "embedding")))
    assert set(groups.values()) == {g for g in listed if len(g) > 1}
    assert len(groups) == len(set(groups.values()))
    coords = {r: c for c, r in rank.items()}
    for t in set(pairs) | set(ends.pairs):
        assert pairs[t] == {tuple(p) for p in ends.pairs[t].tolist()}, names[t]
        for src, dst in pairs[t]:
            (a, b, c, s), (a2, b2, c2, s2) = coords[src], coords[dst]
            if names[t] == "pp_send":  # same (t, c, d), a neighbouring stage
                assert (a, b, c) == (a2, b2, c2) and abs(s - s2) == 1
            else:  # cp ring step: the next cp rank
                assert (a, c, s) == (a2, c2, s2) and b2 == (b + 1) % par.cp
    # every hop is charged to the first topology dimension where its ends differ
    for t, p in ends.pairs.items():
        dims = {0 if s % gpus_per_node != d % gpus_per_node else 1 for s, d in p.tolist()}
        assert ends.p2p_dims(t) == dims


def test_topology_dimensions_a_group_crosses() -> None:
    par = ParallelSpec(tp=8, dp=2, global_batch=8)  # 16 GPUs, 8 per node
    default = RankLayout.of(par, 8)
    assert default.crosses("tp") == (0,) and default.crosses("dp") == (1,)  # DP: local index equal
    flipped = RankLayout.of(replace(par, rank_order="dp-tp-cp-pp"), 8)
    assert flipped.crosses("tp") == (0, 1) and flipped.crosses("dp") == (0,)
    assert flipped.span("tp") == (8, 4) and flipped.span("dp") == (2, 2)
    # ASTRA-sim charges a hop to the first differing dimension: rank 6 -> 8 (other node, other
    # local index) stays on dimension 0; 0 -> 8 (same local index) goes to dimension 1
    assert flipped.hop_dim(np.array([6, 0]), np.array([8, 8])).tolist() == [0, 1]
    assert default.device_of(15) == 0


def test_astra_fidelity_follows_the_rank_order() -> None:
    """16 GPUs: ``fidelity=astra`` charges each hop by the ranks the order puts at its ends.

    tp=8 on 8-GPU nodes, ``dp-tp-cp-pp``: the DP pairs (0, 1), ... now sit in one node, so the
    gradient all-reduce leaves the NICs; the TP ring 0, 2, ..., 14 spans both nodes, but every
    hop joins different local indices, which ASTRA-sim charges to the scale-up dimension (first
    differing dimension), so its cost is unchanged. tp=4 on 4-GPU nodes, the same order: the TP
    ring 0, 4, 8, 12 has one local index, every hop crosses the scale-out network: far slower.
    """
    from simcore.api import simulate_batch
    from simcore.specs.system import SystemSpec

    model = ModelSpec(name="t", num_layers=4, hidden_size=1024, num_heads=8, seq_len=1024,
                      vocab_size=1024)
    runs = {}
    for tp, per_node in ((8, 8), (4, 4)):
        par = ParallelSpec(tp=tp, global_batch=8)
        system = [SystemSpec(num_gpus=16, gpus_per_node=per_node)]
        for order in ("tp-cp-dp-pp", "dp-tp-cp-pp"):
            runs[(tp, order)] = simulate_batch(model, replace(par, rank_order=order), system,
                                               fidelity="astra")

    def exposed(tp: int, order: str, kind: str) -> float:
        return float(runs[(tp, order)].exposed_comm_by_kind[kind][0])

    def iteration(tp: int, order: str) -> float:
        return float(runs[(tp, order)].iteration_time_s[0])

    assert iteration(8, "dp-tp-cp-pp") < iteration(8, "tp-cp-dp-pp")
    assert exposed(8, "dp-tp-cp-pp", "dp") < 0.1 * exposed(8, "tp-cp-dp-pp", "dp")
    assert exposed(8, "dp-tp-cp-pp", "tp") == exposed(8, "tp-cp-dp-pp", "tp")
    assert iteration(4, "dp-tp-cp-pp") > 1.5 * iteration(4, "tp-cp-dp-pp")
    assert exposed(4, "dp-tp-cp-pp", "tp") > 5 * exposed(4, "tp-cp-dp-pp", "tp")


@pytest.mark.parametrize("order", ["tp-cp-dp-pp", "pp-dp-cp-tp", "cp-pp-tp-dp"])
@pytest.mark.parametrize(("model", "par", "gpus_per_node"),
                         [(TINY, DENSE, 4), (TINY, replace(DENSE, cp=1, dp=4), 8), (TINY_MOE, MOE, 4),
                          (TINY, ParallelSpec(tp=2, pp=4, dp=2, global_batch=8), 8),
                          (TINY, ParallelSpec(tp=4, pp=1, dp=1, global_batch=2), 4),
                          (TINY, ParallelSpec(tp=2, pp=2, dp=2, global_batch=8, sequence_parallel=True), 4)],
                         ids=["dense-cp", "dense-dp", "moe", "pp4", "one-stage", "sp"])
def test_files_are_the_traces_encoded(order: str, model: ModelSpec, par: ParallelSpec,
                                      gpus_per_node: int) -> None:
    """The exporter's byte path (each stage laid out once) writes ``encode_trace`` of its traces."""
    par = replace(par, rank_order=order)
    lay = RankLayout.of(par, gpus_per_node)
    w = build_transformer(model, par, gpus_per_node)
    us = np.arange(len(w.ops.templates), dtype=np.float64) * 1.7  # distinct compute durations
    traces, groups = transformer_to_traces(w, lay, us)
    files, nodes, groups2 = transformer_to_files(w, lay, us)
    got = dict(files)
    assert groups2 == groups
    assert nodes == sum(t.num_nodes for t in traces.values())
    assert sorted(got) == sorted(traces)
    for r, tr in traces.items():
        assert got[r] == encode_trace(tr), r
