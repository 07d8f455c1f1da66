"""Stand-in memory footprint per GPU, until calib's simcore.memory lands (same signature).

Model (Rajbhandari et al. 2020, ZeRO Sec. 3; Korthikanti et al. 2022, Sec. 4 and Table 2):
- model states per parameter: 2 bytes weights, 2 bytes gradients, 12 bytes optimizer (fp32
  master, Adam m, v); ZeRO-1 shards the 12 over dp x cp, ZeRO-2 also the gradients, ZeRO-3
  also the weights;
- activations per layer and micro-batch, bytes: ``s b h (34 + 5 a s / h)`` without TP;
  TP: ``s b h (10 + 24/t + 5 a s/(h t))``; TP+SP: ``s b h / t (34 + 5 a s / h)``; the attention
  term ``5 a s/h`` vanishes with selective recompute (and flash attention); full recompute keeps
  only the layer input ``2 s b h / (t if SP)``; ``s`` here is the local sequence ``seq/cp``;
- stage 0 of 1F1B holds ``min(pp, m)`` micro-batches in flight (interleaved: x (1 + (pp-1)/
  (pp vp)), Narayanan et al. 2021 Sec. 2.2.2).
"""

from __future__ import annotations

from simcore.specs.model import ModelSpec
from simcore.specs.parallel import ParallelSpec

__all__ = ["footprint_bytes"]


def _activation_bytes_per_layer(model: ModelSpec, par: ParallelSpec) -> float:
    s = model.seq_len / par.cp
    b, h, a, t = par.micro_batch, model.hidden_size, model.num_heads, par.tp
    sbh = s * b * h
    attn = 0.0 if par.recompute == "selective" else 5.0 * a * s / h
    if par.recompute == "full":
        return 2.0 * sbh / (t if par.sequence_parallel else 1)
    if par.sequence_parallel or t == 1:
        return sbh / t * (34.0 + attn)
    return sbh * (10.0 + 24.0 / t + attn / t)


def footprint_bytes(model: ModelSpec, parallel: ParallelSpec, stage: int) -> dict[str, float]:
    """Bytes per GPU of pipeline ``stage`` (``parallel.dp`` resolved): weights, gradients,
    optimizer, activations, total."""
    p = parallel
    layers = model.num_layers / p.pp
    dense = model.attention_params + (0 if model.is_moe else model.expert_params)
    expert = (model.num_experts // p.ep) * model.expert_params if model.is_moe else 0
    params = layers * (dense + expert) / p.tp
    if stage in (0, p.pp - 1):
        params += model.vocab_size * model.hidden_size / p.tp * (2 if p.pp == 1 else 1)
    shard = p.dp_size * p.cp
    weights = 2.0 * params / (shard if p.zero_stage >= 3 else 1)
    grads = 2.0 * params / (shard if p.zero_stage >= 2 else 1)
    optimizer = 12.0 * params / (shard if p.zero_stage >= 1 else 1)
    in_flight = float(min(p.pp - stage, p.num_micro_batches))
    if p.vp > 1:
        in_flight *= 1.0 + (p.pp - 1) / (p.pp * p.vp)
    acts = _activation_bytes_per_layer(model, p) * layers * in_flight
    total = weights + grads + optimizer + acts
    return {"weights": weights, "gradients": grads, "optimizer": optimizer,
            "activations": acts, "total": total}
