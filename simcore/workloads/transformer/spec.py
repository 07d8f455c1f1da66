"""Transformer model shape: :class:`ModelSpec` (the ``workload`` config group).

A GPT-style decoder: ``num_layers`` blocks of attention (MHA, GQA when ``num_kv_heads <
num_heads``, or multi-head latent attention when ``kv_lora_rank > 0``) and an MLP (GELU with
two GEMMs, or SwiGLU with a gated first GEMM), a word embedding and an output layer over ``vocab_size``. With ``num_experts > 1`` every MLP is a
mixture of experts with top-``top_k`` routing (Mixtral-style), optionally beside shared experts
that every token passes (``shared_ffn_hidden_size``: DeepSeekMoE, Dai et al. 2024; Qwen-MoE;
Megatron-Core's ``moe_shared_expert_intermediate_size``), which are data- and tensor-parallel
like a dense MLP, not expert-parallel. Parameter and FLOP counts follow
Narayanan et al. 2021 / Korthikanti et al. 2022 (reference/peers-hardware-measurements.md,
Part B, "FLOP conventions"): per layer and token, forward GEMM FLOPs are 2 x parameters, plus
``4 s h`` for the attention scores and values (full, non-causal count, as Megatron reports;
``2 s a (d_qk + d_v)`` with latent attention's head widths).

Multi-head latent attention (MLA; DeepSeek-V2, DeepSeek-AI 2024, and DeepSeek-V3 [R]): keys and
values are projected down to a latent of ``kv_lora_rank`` (plus a shared ``qk_rope_head_dim``
rotary key) and up again per head, queries optionally through a latent of ``q_lora_rank``; a
head's query and key are ``qk_nope_head_dim + qk_rope_head_dim`` wide, its value
``v_head_dim``. The down projections are replicated over tensor parallelism and the up and
output projections split as Megatron's column / row parallel layers (Megatron-Core's MLA [R]).

Field names are the YAML keys of ``conf/workload/``.
"""

from __future__ import annotations

from dataclasses import dataclass

from simcore.errors import require
from simcore.limits import limit

__all__ = ["MLP_KINDS", "ModelSpec"]

MLP_KINDS = ("gelu", "swiglu")


def _positive_int(value: object, key: str) -> None:
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= 1
    require(ok, key, value, "must be an integer >= 1")


@dataclass(frozen=True)
class ModelSpec:
    """A GPT-style transformer.

    Attributes:
        name: label (e.g. ``gpt3_175b``).
        num_layers: transformer blocks.
        hidden_size: model width h.
        num_heads: attention (query) heads a; ``hidden_size`` must be divisible by it.
        num_kv_heads: key/value heads (GQA); ``None`` means ``num_heads`` (MHA).
        ffn_hidden_size: MLP inner width; ``None`` means 4h.
        seq_len: tokens per sample s.
        vocab_size: vocabulary V.
        mlp: ``gelu`` (2 GEMMs) or ``swiglu`` (gate + up, then down: 3 weight matrices).
        num_experts: experts per MoE layer (1 = dense MLP).
        top_k: experts each token is routed to.
        shared_ffn_hidden_size: inner width of the shared experts of a MoE layer together (an
            MLP of this width, the same kind as the experts', on every token; 0 = none).
        dropout: dropout probability of the attention scores and of both blocks' outputs
            (Megatron-LM's default 0.1; LLaMA-family recipes train without dropout, 0). At 0
            no dropout mask is kept for backward and the unfused attention core has no
            dropout pass: PyTorch's ``dropout`` with ``p = 0`` returns its input.
        kv_lora_rank: multi-head latent attention's key/value latent width; 0 = standard
            attention (the MLA fields below are then unused).
        q_lora_rank: MLA's query latent width; 0 = a full-rank query projection.
        qk_nope_head_dim, qk_rope_head_dim, v_head_dim: MLA's per-head widths of the query and
            key without and with rotary embedding, and of the value (DeepSeek-V2/V3: 128, 64,
            128).
    """

    name: str = "gpt_1b"
    num_layers: int = 24
    hidden_size: int = 2048
    num_heads: int = 16
    num_kv_heads: int | None = None
    ffn_hidden_size: int | None = None
    seq_len: int = 2048
    vocab_size: int = 51200
    mlp: str = "gelu"
    num_experts: int = 1
    top_k: int = 1
    shared_ffn_hidden_size: int = 0
    dropout: float = 0.1
    kv_lora_rank: int = 0
    q_lora_rank: int = 0
    qk_nope_head_dim: int = 128
    qk_rope_head_dim: int = 64
    v_head_dim: int = 128

    def __post_init__(self) -> None:
        p = "workload."
        require(isinstance(self.name, str) and bool(self.name), p + "name", self.name,
                "must be a non-empty string")
        for key in ("num_layers", "hidden_size", "num_heads", "seq_len", "vocab_size",
                    "num_experts", "top_k"):
            _positive_int(getattr(self, key), p + key)
        require(self.num_layers <= limit("graph_layers"), p + "num_layers", self.num_layers,
                f"must be <= {int(limit('graph_layers'))} (limit graph_layers, SIMSWEEP_MAX_GRAPH_LAYERS)")
        if self.num_kv_heads is not None:
            _positive_int(self.num_kv_heads, p + "num_kv_heads")
            require(self.num_heads % self.num_kv_heads == 0, p + "num_kv_heads",
                    self.num_kv_heads, f"must divide num_heads={self.num_heads}")
        if self.ffn_hidden_size is not None:
            _positive_int(self.ffn_hidden_size, p + "ffn_hidden_size")
        require(self.hidden_size % self.num_heads == 0, p + "hidden_size", self.hidden_size,
                f"must be divisible by num_heads={self.num_heads}")
        require(self.mlp in MLP_KINDS, p + "mlp", self.mlp, f"must be one of {', '.join(MLP_KINDS)}")
        require(self.top_k <= self.num_experts, p + "top_k", self.top_k,
                f"must be <= num_experts={self.num_experts}")
        shared = self.shared_ffn_hidden_size
        require(isinstance(shared, int) and not isinstance(shared, bool) and shared >= 0,
                p + "shared_ffn_hidden_size", shared, "must be an integer >= 0 (0 = none)")
        require(shared == 0 or self.num_experts > 1, p + "shared_ffn_hidden_size", shared,
                "shared experts belong to a mixture of experts (num_experts > 1); a dense "
                "model's MLP width is ffn_hidden_size")
        require(isinstance(self.dropout, int | float) and not isinstance(self.dropout, bool)
                and 0 <= self.dropout < 1, p + "dropout", self.dropout,
                "must be a probability in [0, 1)")
        for key in ("kv_lora_rank", "q_lora_rank"):
            rank = getattr(self, key)
            require(isinstance(rank, int) and not isinstance(rank, bool) and rank >= 0,
                    p + key, rank, "must be an integer >= 0 (0 = no latent)")
        for key in ("qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"):
            _positive_int(getattr(self, key), p + key)
        require(self.q_lora_rank == 0 or self.is_mla, p + "q_lora_rank", self.q_lora_rank,
                "a query latent belongs to multi-head latent attention: set kv_lora_rank > 0")
        require(not self.is_mla or self.kv_heads == self.num_heads, p + "num_kv_heads",
                self.num_kv_heads, "latent attention compresses keys and values through "
                "kv_lora_rank: leave num_kv_heads null (every head has its own key and value)")

    @property
    def kv_heads(self) -> int:
        """Key/value heads (``num_heads`` when MHA)."""
        return self.num_heads if self.num_kv_heads is None else self.num_kv_heads

    @property
    def ffn(self) -> int:
        """MLP inner width (4h by default)."""
        return 4 * self.hidden_size if self.ffn_hidden_size is None else self.ffn_hidden_size

    @property
    def head_dim(self) -> int:
        """Width of one attention head, h / a."""
        return self.hidden_size // self.num_heads

    @property
    def is_mla(self) -> bool:
        """True with multi-head latent attention (``kv_lora_rank > 0``)."""
        return self.kv_lora_rank > 0

    @property
    def qk_head_dim(self) -> int:
        """Width of one head's query and key: ``head_dim``, or MLA's nope + rope widths."""
        return self.qk_nope_head_dim + self.qk_rope_head_dim if self.is_mla else self.head_dim

    @property
    def value_head_dim(self) -> int:
        """Width of one head's value: ``head_dim``, or MLA's ``v_head_dim``."""
        return self.v_head_dim if self.is_mla else self.head_dim

    @property
    def core_head_dim(self) -> float:
        """The head width the attention core is costed at: ``head_dim``, or with MLA the mean
        of the query/key and value widths (exact in the core's FLOPs, ``2 s^2 (d_qk + d_v)``
        per head, and in a fused kernel's bytes, Q, K, V and O read or written once)."""
        if not self.is_mla:
            return self.head_dim
        return (self.qk_head_dim + self.value_head_dim) / 2

    @property
    def kv_width(self) -> int:
        """Key plus value elements per token of one layer (what a CP ring passes around):
        ``2 kv_heads head_dim``, or MLA's up-projected ``a (d_qk + d_v)``."""
        if self.is_mla:
            return self.num_heads * (self.qk_head_dim + self.value_head_dim)
        return 2 * self.kv_heads * self.head_dim

    @property
    def is_moe(self) -> bool:
        """True when the MLPs are mixtures of experts."""
        return self.num_experts > 1

    @property
    def qkv_out(self) -> int:
        """Output width of the fused QKV projection: h + 2 x kv_heads x head_dim."""
        return self.hidden_size + 2 * self.kv_heads * self.head_dim

    @property
    def mlp_matrices(self) -> int:
        """Weight matrices of size h x ffn per MLP (2 for GELU, 3 for SwiGLU)."""
        return 3 if self.mlp == "swiglu" else 2

    @property
    def attention_params(self) -> int:
        """Weights of one attention block (QKV and output projection; biases and norms
        ignored); with MLA the down, up and output projections."""
        h = self.hidden_size
        if not self.is_mla:
            return h * self.qkv_out + h * h
        heads_qk = self.num_heads * self.qk_head_dim
        q = (h * self.q_lora_rank + self.q_lora_rank * heads_qk if self.q_lora_rank
             else h * heads_qk)
        kv = (h * (self.kv_lora_rank + self.qk_rope_head_dim)
              + self.kv_lora_rank * self.num_heads * (self.qk_nope_head_dim + self.v_head_dim))
        return q + kv + self.num_heads * self.v_head_dim * h

    @property
    def expert_params(self) -> int:
        """Weights of one expert's (or the dense) MLP."""
        return self.mlp_matrices * self.hidden_size * self.ffn

    @property
    def shared_expert_params(self) -> int:
        """Weights of a MoE layer's shared experts (0 without)."""
        return self.mlp_matrices * self.hidden_size * self.shared_ffn_hidden_size

    @property
    def dense_params(self) -> int:
        """Weights of one block that every token uses and that are not expert-parallel:
        attention and the dense MLP, or attention and the shared experts of a MoE layer."""
        mlp = self.shared_expert_params if self.is_moe else self.expert_params
        return self.attention_params + mlp

    def layer_params(self) -> int:
        """Weights of one transformer block (all experts counted; router included)."""
        if not self.is_moe:
            return self.dense_params
        return self.dense_params + self.num_experts * self.expert_params + self._router_params()

    def num_params(self) -> int:
        """Total weights: blocks, word embedding and an untied output layer."""
        return self.num_layers * self.layer_params() + 2 * self.vocab_size * self.hidden_size

    def active_params(self) -> int:
        """Weights one token passes through: :meth:`num_params` with only ``top_k`` routed
        experts per layer (what MoE model cards call "activated parameters")."""
        embeddings = 2 * self.vocab_size * self.hidden_size
        return self.num_layers * self._active_layer_params() + embeddings

    def _active_layer_params(self) -> int:
        """Weights of one block a token passes through: dense part, ``top_k`` experts, router."""
        routed = self.top_k * self.expert_params if self.is_moe else 0
        return self.dense_params + routed + self._router_params()

    def _router_params(self) -> int:
        return self.hidden_size * self.num_experts if self.is_moe else 0

    def model_flops_per_sample(self) -> float:
        """Forward + backward FLOPs of one sample without recompute ("model FLOPs", for MFU).

        Per layer and token the forward GEMMs take 2 x (attention + top_k experts' weights)
        FLOPs, attention scores and values ``4 s h``; the output layer ``2 h V``; backward is
        twice the forward. For GPT shapes this equals 72 s l h^2 (1 + s/6h + V/12lh)
        (Narayanan et al. 2021, reference/peers-hardware-measurements.md, Part B).
        """
        forward = self.num_layers * self._layer_forward_flops() + self._output_forward_flops()
        return 3.0 * forward

    def output_layer_equivalents(self) -> float:
        """The output layer's forward FLOPs (the ``2 s h V`` logits GEMM) in transformer layers
        (the same FLOP convention): what ``parallel.layer_split = balanced`` weighs the last
        model chunk with. GPT-3 175B 0.34, Llama 3 405B 0.61."""
        return self._output_forward_flops() / self._layer_forward_flops()

    def _layer_forward_flops(self) -> float:
        """Forward FLOPs of one transformer layer for one sample (module docstring)."""
        s = self.seq_len
        core = 2.0 * s * s * self.num_heads * (self.qk_head_dim + self.value_head_dim)  # 4 s^2 h
        return 2.0 * self._active_layer_params() * s + core

    def _output_forward_flops(self) -> float:
        return 2.0 * self.seq_len * self.hidden_size * self.vocab_size
