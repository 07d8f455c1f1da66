"""Mixture-of-experts case rows: the optional num_experts / top_k columns (search/config/cases.py)."""

from __future__ import annotations

import csv

from search.commands.validate import main, predict
from search.config.cases import assumed_expert_columns, build_case

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


def test_expert_parallelism_without_expert_columns_assumes_the_regimes_experts():
    # coarse experts (ffn_hidden_size >= hidden_size, Mixtral-shaped): 2 of 8
    assert assumed_expert_columns(ROW) == {"num_experts": 8, "top_k": 2}
    out, given = predict(ROW), predict({**ROW, "num_experts": "8", "top_k": "2"})
    assert out["status"] == "ok", out["error"]
    assert out["iter_time_s"] == given["iter_time_s"]
    # fine-grained experts (narrower than the model, DeepSeekMoE / Qwen3-MoE-shaped): 8 of 128,
    # the count raised to a multiple of ep
    fine = {**ROW, "ffn_hidden_size": "1536"}
    assert assumed_expert_columns(fine) == {"num_experts": 128, "top_k": 8}
    assert assumed_expert_columns({**fine, "ep": "32", "dp": "32"})["num_experts"] == 128
    wide = {**fine, "ep": "256", "dp": "256", "num_gpus": "2048"}
    assert assumed_expert_columns(wide) == {"num_experts": 256, "top_k": 8}
    assert assumed_expert_columns({**ROW, "ep": "16", "dp": "32"})["num_experts"] == 16
    # only the missing column is assumed, capped by the experts there are
    assert assumed_expert_columns({**ROW, "num_experts": "16"}) == {"top_k": 2}
    assert assumed_expert_columns({**fine, "num_experts": "4"}) == {"top_k": 4}
    assert assumed_expert_columns({**ROW, "num_experts": "16", "top_k": "1"}) == {}


def test_dense_rows_assume_nothing():
    for row in ({**ROW, "ep": "1"}, {**ROW, "ep": ""}, {**ROW, "ep": "1", "num_experts": "1"}):
        assert assumed_expert_columns(row) == {}
    model, _, _ = build_case({**ROW, "ep": "1"})
    assert (model.num_experts, model.top_k) == (1, 1)


def test_validate_names_every_assumed_expert_column(tmp_path, capsys):
    rows = [ROW, {**ROW, "case_id": "dense", "ep": "1"},
            {**ROW, "case_id": "k", "num_experts": "16"}]
    cases = tmp_path / "cases.csv"
    with cases.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(ROW) + ["num_experts"])
        writer.writeheader()
        writer.writerows(rows)
    assert main(["--cases", str(cases), "--out", str(tmp_path / "pred.csv")]) == 0
    notes = [line for line in capsys.readouterr().out.splitlines() if line.startswith("note:")]
    # Mixtral-shaped (ffn 3.5h): a gated MLP, trained without dropout, for the dense row too
    assert notes == ["note: case 'moe' leaves out num_experts, top_k, mlp, dropout: assumed "
                     "num_experts=8, top_k=2, mlp=swiglu, dropout=0.0",
                     "note: case 'dense' leaves out mlp, dropout: assumed mlp=swiglu, "
                     "dropout=0.0",
                     "note: case 'k' leaves out top_k, mlp, dropout: assumed top_k=2, "
                     "mlp=swiglu, dropout=0.0"]
    with (tmp_path / "pred.csv").open() as fh:
        assert [r["status"] for r in csv.DictReader(fh)] == ["ok", "ok", "ok"]


def test_expert_columns_that_are_not_valid_counts_name_the_column():
    for value, key in (("eight", "num_experts"), ("0", "workload.num_experts")):
        out = predict({**ROW, "num_experts": value, "top_k": "2"})
        assert out["status"] == "error" and out["error"].startswith(key + "="), out["error"]
    out = predict({**ROW, "num_experts": "8", "top_k": "9"})  # more experts per token than exist
    assert out["status"] == "error" and out["error"].startswith("workload.top_k="), out["error"]


def test_a_shared_expert_column_reaches_the_model_and_adds_its_work():
    """The optional ``shared_ffn_hidden_size`` column (DeepSeekMoE / Qwen-MoE shared experts)."""
    row = {**ROW, "num_experts": "8", "top_k": "2"}
    model, _, _ = build_case({**row, "shared_ffn_hidden_size": "14336"})
    assert model.shared_ffn_hidden_size == 14336
    routed = predict(row)
    shared = predict({**row, "shared_ffn_hidden_size": "14336"})
    assert routed["status"] == shared["status"] == "ok", (routed["error"], shared["error"])
    assert float(shared["iter_time_s"]) > float(routed["iter_time_s"])
    assert float(shared["peak_memory_gib"]) > float(routed["peak_memory_gib"])
    bad = predict({**row, "shared_ffn_hidden_size": "wide"})
    assert bad["status"] == "error" and "shared_ffn_hidden_size" in bad["error"]


def test_an_ep_overlap_chunks_column_pipelines_the_all_to_all():
    row = {**ROW, "num_experts": "8", "top_k": "2", "scaleout_gbps_per_gpu": "100"}
    _, parallel, _ = build_case({**row, "ep_overlap_chunks": "4"})
    assert parallel.ep_overlap_chunks == 4
    blocking, chunked = predict(row), predict({**row, "ep_overlap_chunks": "4"})
    assert blocking["status"] == chunked["status"] == "ok", (blocking["error"], chunked["error"])
    assert float(chunked["iter_time_s"]) < float(blocking["iter_time_s"])
    bad = predict({**row, "ep": "1", "dp": "32", "ep_overlap_chunks": "4"})
    assert bad["status"] != "ok" and "ep_overlap_chunks" in bad["error"]


def test_latent_attention_columns_reach_the_model():
    row = {**ROW, "num_heads": "32", "num_kv_heads": "32", "num_experts": "8", "top_k": "2",
           "kv_lora_rank": "512", "q_lora_rank": "1536", "qk_nope_head_dim": "128",
           "qk_rope_head_dim": "64", "v_head_dim": "128"}
    model, _, _ = build_case(row)
    assert (model.is_mla, model.kv_lora_rank, model.q_lora_rank, model.qk_head_dim,
            model.value_head_dim) == (True, 512, 1536, 192, 128)
    mla, gqa = predict(row), predict({**ROW, "num_experts": "8", "top_k": "2"})
    assert mla["status"] == gqa["status"] == "ok", (mla["error"], gqa["error"])
    # 32 heads of 192 / 128 against 8 kv heads of 128: more attention work and activations
    assert float(mla["peak_memory_gib"]) > float(gqa["peak_memory_gib"])
