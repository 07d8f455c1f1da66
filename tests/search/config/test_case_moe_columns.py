"""Mixture-of-experts case rows: the optional num_experts / top_k columns (search/config/cases.py)."""

from __future__ import annotations

from search.commands.validate import predict
from search.config.cases import build_case

ROW = dict(case_id="moe", gpu="h800_80g", gpus_per_node="8", num_gpus="256",
           scaleout_gbps_per_gpu="400", num_layers="32", hidden_size="4096", num_heads="32",
           num_kv_heads="8", ffn_hidden_size="14336", seq_len="4096", vocab_size="32000",
           global_batch="512", micro_batch="1", tp="2", pp="4", dp="32", vp="1", cp="1",
           ep="8", sequence_parallel="true", recompute="none", precision="bf16",
           zero_stage="1", dp_overlap="true", tp_comm_overlap="false")


def test_expert_columns_reach_the_model_and_cost_what_top_k_experts_cost():
    model, parallel, _ = build_case({**ROW, "num_experts": "8", "top_k": "2"})
    assert (model.num_experts, model.top_k, parallel.ep) == (8, 2, 8)
    moe = predict({**ROW, "num_experts": "8", "top_k": "2"})
    dense = predict({**ROW, "ep": "1"})  # the same row as a dense model (no expert columns)
    assert moe["status"] == dense["status"] == "ok", (moe["error"], dense["error"])
    # two experts per token: about twice the MLP work of the dense model, plus the all-to-alls
    assert float(moe["iter_time_s"]) > 1.3 * float(dense["iter_time_s"])


def test_expert_parallelism_without_an_expert_count_names_the_missing_column():
    out = predict(ROW)
    assert out["status"] == "error"
    assert out["error"].startswith("num_experts=") and "ep=8" in out["error"]


def test_expert_columns_that_are_not_valid_counts_name_the_column():
    for value, key in (("eight", "num_experts"), ("0", "workload.num_experts")):
        out = predict({**ROW, "num_experts": value, "top_k": "2"})
        assert out["status"] == "error" and out["error"].startswith(key + "="), out["error"]
    out = predict({**ROW, "num_experts": "8", "top_k": "9"})  # more experts per token than exist
    assert out["status"] == "error" and out["error"].startswith("workload.top_k="), out["error"]
