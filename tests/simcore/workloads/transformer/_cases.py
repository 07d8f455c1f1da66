"""A small validation-case row (the columns of ``shared/validation/CASES.md``) for tests of
what a software stack sets on the plan."""

from __future__ import annotations


def case_row(stack: str) -> dict[str, str]:
    """A 16-GPU A100 case of a 4-layer model, TP 2 x PP 2 x DP 4, bf16, ZeRO-1, on ``stack``."""
    return {"case_id": "c", "gpu": "a100_80g", "gpus_per_node": "8", "num_gpus": "16",
            "scaleout_gbps_per_gpu": "200", "num_layers": "4", "hidden_size": "1024",
            "num_heads": "16", "num_kv_heads": "16", "ffn_hidden_size": "4096",
            "seq_len": "1024", "vocab_size": "50257", "global_batch": "16", "micro_batch": "1",
            "tp": "2", "pp": "2", "dp": "4", "vp": "1", "cp": "1", "ep": "1",
            "sequence_parallel": "false", "recompute": "full", "precision": "bf16",
            "zero_stage": "1", "dp_overlap": "false", "tp_comm_overlap": "false",
            "stack": stack}
