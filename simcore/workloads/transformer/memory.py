"""Per-GPU memory footprint of Megatron-style LLM training (weights, grads, optimizer, activations).

Model and sources:

* **Model state** (mixed-precision Adam, Megatron / Korthikanti et al. 2022, as Calculon's
  validation reproduces: 18 bytes per parameter; reference/peers-hardware-measurements.md B.3
  "params+optimizer"): 2 B half-precision weights, 4 B fp32 gradient accumulation buffer,
  12 B optimizer (fp32 master copy, momentum, variance). fp32 training: 4 + 4 + 8. ZeRO
  (Rajbhandari et al. 2020): stage >= 1 shards the optimizer over the data-parallel ranks
  (``dp * cp``, as Megatron's distributed optimizer), stage >= 2 also the gradients, stage 3
  also the weights. A stage holds its layers' weights (``/ tp``; experts ``/ ep``), the first
  stage the word embedding and the last the output layer (tied with the embedding when
  ``pp == 1``, Megatron's default).
* **Activations per layer and micro-batch** (Korthikanti et al. 2022 §4, 2-byte activations,
  ``sbh = (s/cp) * b * h``): ``sbh (10 + 24/t + 5as/(ht))`` with tensor parallelism,
  ``sbh (34/t + 5as/(ht))`` with sequence parallelism; selective recompute drops the attention
  core ``5as/(ht)``, and so does a fused flash-attention core (``parallel.flash_attention``:
  it keeps only its output and the softmax statistics); full recompute keeps only the layer input ``2 sbh`` (``/ t`` with sequence
  parallelism) plus, transiently, one layer's activations while it is recomputed
  (``recompute_workspace``). The 24 generalizes to ``4 + 4 kv/a + 2 mlp_outputs ffn/h``
  (GQA, ``ffn != 4h``, SwiGLU); MoE layers keep ``top_k`` copies of the MLP activations, plus
  those of the shared experts (``ffn`` -> their width). Multi-head latent attention keeps
  ``4 a (d_qk + d_v) / h`` instead of ``4 + 4 kv/a`` (per-head queries, keys, values and the
  output projection's input) and, replicated over TP, its latents (each norm's and up
  projection's input, ``2 (2 q_lora + 2 kv_lora + d_rope) / h``) [derived, as Korthikanti's
  terms].
  The 10 holds two 1-byte dropout masks (``sbh`` each: attention and MLP outputs) and the
  core's 5 a 1-byte mask and the 2-byte dropout output over the scores; a model trained
  without dropout (``model.dropout = 0``: PyTorch's ``dropout`` returns its input at ``p = 0``
  and keeps no mask) stores ``8`` and ``2`` instead.
* **In-flight micro-batches** (Narayanan et al. 2021 / Korthikanti et al. 2022 §4.2.3):
  1F1B stage ``i`` of ``p`` keeps ``min(p - i, m)`` micro-batches; the interleaved schedule
  keeps ``min(2 (p - i - 1) + (v - 1) g + 1, m v)`` model chunks of ``L / (p v)`` layers, i.e.
  ``(1 + (p - 1)/(p v))`` times 1F1B on the first stage for micro-batch groups of ``g = p``
  (larger groups, ``parallel.microbatch_group``, hold more). Uneven layer splits
  (:mod:`simcore.specs.layer_split`): a stage holds its own layer count (weights and 1F1B
  activations); interleaved in-flight chunks are counted at the stage's mean chunk size.
* The last stage also holds the fp32 logits of the cross-entropy, ``4 s b V / t``.

Model and parallel specs are read through the attributes named in :class:`ModelLike` and
:class:`ParallelLike` (``simcore.workloads.transformer.spec.ModelSpec``, ``simcore.specs.parallel.ParallelSpec``).
"""

from __future__ import annotations

from typing import Protocol

from simcore.hardware.compute import ACTIVATION_BYTES
from simcore.specs.layer_split import chunk_layers, stage_layers

__all__ = ["ModelLike", "ParallelLike", "footprint_bytes", "in_flight_layers", "layers_in_stage",
           "plan_stage_layers"]


class ModelLike(Protocol):
    """The model attributes the footprint reads (ModelSpec provides them)."""

    num_layers: int
    hidden_size: int
    num_heads: int
    seq_len: int
    vocab_size: int
    mlp: str
    num_experts: int
    top_k: int
    shared_ffn_hidden_size: int
    dropout: float

    @property
    def kv_heads(self) -> int: ...  # noqa: D102

    @property
    def is_mla(self) -> bool: ...  # noqa: D102

    @property
    def qk_head_dim(self) -> int: ...  # noqa: D102

    @property
    def value_head_dim(self) -> int: ...  # noqa: D102

    q_lora_rank: int
    kv_lora_rank: int
    qk_rope_head_dim: int

    @property
    def ffn(self) -> int: ...  # noqa: D102

    @property
    def attention_params(self) -> int: ...  # noqa: D102

    @property
    def expert_params(self) -> int: ...  # noqa: D102

    @property
    def dense_params(self) -> int: ...  # noqa: D102

    def output_layer_equivalents(self) -> float: ...  # noqa: D102


class ParallelLike(Protocol):
    """The parallel-plan attributes the footprint reads (ParallelSpec provides them)."""

    tp: int
    pp: int
    cp: int
    ep: int
    vp: int
    micro_batch: int
    global_batch: int
    sequence_parallel: bool
    flash_attention: bool
    recompute: str
    zero_stage: int
    precision: str

    @property
    def dp_size(self) -> int: ...  # noqa: D102


def layers_in_stage(num_layers: int, pp: int, stage: int, vp: int = 1,
                    first_stage_layers: int | None = None,
                    last_stage_layers: int | None = None) -> int:
    """Transformer layers on pipeline stage ``stage``: the sum over its ``vp`` model chunks of
    :func:`simcore.specs.layer_split.chunk_layers` (as even as possible, the first
    ``L % (pp vp)`` chunks get one more, unless the first/last stage counts are given)."""
    split = chunk_layers(num_layers, pp, vp, first_stage_layers, last_stage_layers)
    return stage_layers(split, pp, stage)


def plan_stage_layers(model: ModelLike, par: ParallelLike, stage: int) -> int:
    """Transformer layers on pipeline ``stage`` under the plan's split: as even as possible,
    the explicit first / last stage counts, or ``parallel.layer_split = balanced``
    (:mod:`simcore.specs.layer_split`)."""
    policy = getattr(par, "layer_split", "even")
    output = model.output_layer_equivalents() if policy == "balanced" else 0.0
    split = chunk_layers(model.num_layers, par.pp, par.vp,
                         getattr(par, "first_stage_layers", None),
                         getattr(par, "last_stage_layers", None), policy, output)
    return stage_layers(split, par.pp, stage)


def _stage_params(model: ModelLike, par: ParallelLike, stage: int) -> float:
    t = par.tp
    layer = model.dense_params / t  # attention and the dense MLP or the shared experts
    if model.num_experts > 1:
        layer += (model.num_experts / par.ep) * model.expert_params / t
        layer += model.hidden_size * model.num_experts
    params = plan_stage_layers(model, par, stage) * layer
    embedding = model.vocab_size * model.hidden_size / t
    if stage == 0:
        params += embedding
    if stage == par.pp - 1 and par.pp > 1:
        params += embedding
    return params


def _layer_activation_bytes(model: ModelLike, par: ParallelLike) -> tuple[float, float]:
    """(stored per layer and micro-batch, full per-layer working set) in bytes."""
    h, a, t = model.hidden_size, model.num_heads, par.tp
    s = model.seq_len / par.cp
    sbh = s * par.micro_batch * h * ACTIVATION_BYTES[par.precision] / 2
    mlp_outputs = 3.0 if model.mlp == "swiglu" else 2.0
    mlp_copies = float(model.top_k) if model.num_experts > 1 else 1.0
    mlp_width = mlp_copies * model.ffn + model.shared_ffn_hidden_size  # routed and shared
    if model.is_mla:  # Q and K (a d_qk wide), V and the output projection's input (a d_v)
        attention = 4.0 * a * (model.qk_head_dim + model.value_head_dim) / h
        # the latents' norm inputs and up projections' inputs, and the shared rotary key
        latent = 2.0 * (2 * model.q_lora_rank + 2 * model.kv_lora_rank
                        + model.qk_rope_head_dim) / h
    else:  # Q and the output projection's input, K and V (kv heads)
        attention, latent = 4.0 + 4.0 * model.kv_heads / a, 0.0
    sharded = attention + 2.0 * mlp_outputs * mlp_width / h
    masks = model.dropout > 0  # 1-byte dropout masks of both blocks' outputs and the scores
    replicated = (10.0 if masks else 8.0) + latent
    core = (5.0 if masks else 2.0) * a * s / h
    if par.sequence_parallel:
        full = sbh * (replicated + sharded + core) / t
    else:
        full = sbh * (replicated + (sharded + core) / t)
    if par.recompute == "full":
        return 2.0 * sbh / (t if par.sequence_parallel else 1), full
    if par.recompute == "selective" or par.flash_attention:
        return full - sbh * core / t, full
    return full, full


def in_flight_layers(model: ModelLike, par: ParallelLike, stage: int) -> float:
    """Layer-micro-batches whose activations stage ``stage`` holds at its peak."""
    p, v = par.pp, par.vp
    m = max(1, par.global_batch // (par.dp_size * par.micro_batch))
    if p == 1:
        return float(model.num_layers)
    if v == 1:
        return float(min(p - stage, m) * plan_stage_layers(model, par, stage))
    g = getattr(par, "vp_group", p)  # micro-batches a chunk runs in a row (Megatron-Core)
    chunks = min(2 * (p - stage - 1) + (v - 1) * g + 1, m * v)
    return chunks * plan_stage_layers(model, par, stage) / v  # uneven: the stage's mean chunk


def footprint_bytes(model: ModelLike, parallel: ParallelLike, stage: int) -> dict[str, int]:
    """Per-GPU memory of pipeline stage ``stage`` at its activation peak, bytes.

    Args:
        model: the transformer (ModelSpec).
        parallel: the plan with ``dp`` resolved (ParallelSpec.resolve).
        stage: pipeline stage index, 0 .. pp-1.

    Returns:
        ``weights``, ``gradients``, ``optimizer``, ``activations`` (stored for backward),
        ``recompute_workspace`` (one layer's activations during full recompute), ``total``.
    """
    params = _stage_params(model, parallel, stage)
    fp32 = parallel.precision in ("fp32", "tf32")
    w_b, g_b, o_b = (4.0, 4.0, 8.0) if fp32 else (2.0, 4.0, 12.0)
    shards = parallel.dp_size * parallel.cp
    zero = parallel.zero_stage
    weights = params * w_b / (shards if zero >= 3 else 1)
    grads = params * g_b / (shards if zero >= 2 else 1)
    optimizer = params * o_b / (shards if zero >= 1 else 1)
    stored, working = _layer_activation_bytes(model, parallel)
    activations = stored * in_flight_layers(model, parallel, stage)
    if stage == parallel.pp - 1:
        s = model.seq_len / parallel.cp
        activations += 4.0 * s * parallel.micro_batch * model.vocab_size / parallel.tp
    workspace = working if parallel.recompute == "full" else 0.0
    parts = {"weights": weights, "gradients": grads, "optimizer": optimizer,
             "activations": activations, "recompute_workspace": workspace}
    out = {k: int(round(v)) for k, v in parts.items()}
    out["total"] = sum(out.values())
    return out


def peak_footprint(model: ModelLike, parallel: ParallelLike) -> tuple[int, dict[str, int]]:
    """(stage, footprint) of the pipeline stage with the largest total (the first stages hold
    the most in-flight micro-batches, the last the logits: stages 0..3 and pp-1 are compared)."""
    stages = sorted({0, parallel.pp - 1} | set(range(min(parallel.pp, 4))))
    best = max(((s, footprint_bytes(model, parallel, s)) for s in stages),
               key=lambda item: item[1]["total"])
    return best
