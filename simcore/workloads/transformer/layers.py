"""The ops of one transformer block, embedding and output layer on one representative GPU.

Shapes per GPU for a micro-batch of ``b`` samples, ``s = seq_len / cp`` local tokens per
sample, ``T = b s`` tokens, tensor-parallel degree ``t`` (Megatron-LM: Shoeybi et al. 2019;
sequence parallelism: Korthikanti et al. 2022, Sec. 4.2.2):

- attention: layer norm, QKV GEMM ``T x h -> (h + 2 kv d) / t``, attention core over
  ``b a / t`` heads (``cp`` chunks of ``s`` keys each, KV blocks passed around the CP ring),
  output GEMM ``T x h/t -> h``, dropout + residual; with multi-head latent attention the QKV
  GEMM becomes the query and key/value down projections (replicated over TP), their latents'
  RMS norms and the per-head up projections (split over TP), the core is costed at the mean of
  the query/key and value head widths and the output GEMM reads ``a d_v / t``;
- MLP: layer norm, up GEMM ``T x h -> ffn / t`` (x2 for SwiGLU's gate), activation, down GEMM,
  dropout + residual; MoE: router GEMM (and the shared experts' MLP on all ``T`` tokens),
  all-to-all dispatch over ``ep``, the experts' GEMMs on ``T top_k`` tokens, all-to-all combine;
- TP collectives on the activation ``T h`` (2 bytes/element, 4 in fp32 / tf32, as every
  activation here: :data:`~simcore.hardware.compute.ACTIVATION_BYTES`): all-reduce after each
  block (forward) and before it (backward); with sequence parallelism each all-reduce becomes a
  reduce-scatter plus an all-gather of the same buffer (layer norms/dropouts then run on T/t).

Backward = 2x the forward GEMMs (data and weight gradients) and memory-bound passes, 2.5x a
fused flash-attention core (FlashAttention-2 backward); ``parallel.flash_attention = false``
emits Megatron's unfused core (batched GEMMs, softmax and dropout over ``b a/t s^2`` scores). A layer is a list of *steps*: ``("c", tmpl)`` compute,
``("tp", tmpl)`` / ``("ep", tmpl)`` a collective, ``("attn", chunk_tmpl, kv_tmpl, n)`` the
attention core in ``n`` CP chunks, ``("moe", a2a_tmpl, experts_tmpl, a2a_tmpl, n)`` the
dispatch, experts and combine of one of ``n`` token chunks pipelined across the compute and ep
streams (``parallel.ep_overlap_chunks``; the residual pass after the combine is its own step).
"""

from __future__ import annotations

from dataclasses import dataclass

from simcore.hardware.compute import ACTIVATION_BYTES
from simcore.ir.graph import CommType
from simcore.ir.ops import COMPUTE, OpTable
from simcore.ir.streams import CommKind
from simcore.specs.parallel import ParallelSpec
from simcore.workloads.layout import GroupSpan
from simcore.workloads.transformer.spec import ModelSpec

__all__ = ["LayerOps", "Step", "attention_core", "build_layer_ops"]

_BWD_GEMM = 2.0
_BWD_ATTN = 2.5
_KIND = {k.name.lower(): int(k) for k in CommKind}  # group name -> template kind

Step = tuple  # ("c", t) | ("tp", t) | ("ep", t) | ("attn", t_chunk, t_kv, n) | ("moe", ...)


@dataclass(frozen=True)
class LayerOps:
    """Step lists of one block and the templates of the ends of the model."""

    fwd: tuple[Step, ...]
    bwd: tuple[Step, ...]
    recompute: tuple[Step, ...]
    embed_fwd: int
    embed_bwd: int
    head_fwd: tuple[Step, ...]
    head_bwd: tuple[Step, ...]


def attention_core(ops: OpTable, heads: float, s_q: float, s_kv: float, head_dim: float,
                   flash: bool, fwd: bool, act_bytes: float, dropout: bool = True
                   ) -> list[tuple[int, float]]:
    """Kernels (and weights) of an attention core of ``heads`` (micro-batch x heads) query
    sequences of ``s_q`` against ``s_kv`` keys: one fused kernel (backward 2.5x), or unfused
    (batched QK^T and AV GEMMs, fused scale-mask-softmax and, with ``dropout``, dropout over
    the scores of ``act_bytes`` each with a 1-byte mask; backward 2x)."""
    if flash:
        return [(ops.kernel("attn", heads, s_q, s_kv, head_dim), 1.0 if fwd else _BWD_ATTN)]
    qk = ops.kernel("gemm", heads * s_q, s_kv, head_dim)
    av = ops.kernel("gemm", heads * s_q, head_dim, s_kv)
    scores = heads * s_q * s_kv
    dropout_bytes = 2 * act_bytes + 1 if dropout else 0.0  # read, write, mask
    softmax_dropout = ops.kernel("mem", scores * (2 * act_bytes + dropout_bytes))
    w = 1.0 if fwd else _BWD_GEMM
    return [(qk, w), (av, w), (softmax_dropout, w)]


class _Builder:
    def __init__(self, model: ModelSpec, par: ParallelSpec, spans: dict[str, GroupSpan],
                 ops: OpTable) -> None:
        self.m, self.p, self.spans, self.ops = model, par, spans, ops
        self.tokens = par.micro_batch * model.seq_len // par.cp
        self.sp = par.sequence_parallel and par.tp > 1
        self.norm_tokens = self.tokens / par.tp if self.sp else self.tokens
        self.act_bytes = ACTIVATION_BYTES[par.precision]

    def gemm(self, n: float, k: float, m: float | None = None) -> int:
        return self.ops.kernel("gemm", self.tokens if m is None else m, n, k)

    def mem(self, elems_per_token: float, tokens: float | None = None) -> int:
        t = self.norm_tokens if tokens is None else tokens
        return self.ops.kernel("mem", elems_per_token * t * self.act_bytes)

    def coll(self, name: str, ctype: CommType, nbytes: float, group: str) -> int:
        span = self.spans[group]
        k = self.ops.kernel("coll", int(ctype), nbytes, span.size, span.ranks_per_node)
        return self.ops.template(name, [(k, 1.0)], _KIND["ep" if group == "ep" else group])

    def tp_pair(self, fwd: bool) -> tuple[list[Step], list[Step]]:
        """(before-block, after-block) TP collectives of one block."""
        if self.p.tp == 1:
            return [], []
        size = self.tokens * self.m.hidden_size * self.act_bytes
        if not self.sp:
            ar = self.coll("tp_allreduce", CommType.ALL_REDUCE, size, "tp")
            return [], [("tp", ar)]
        ag = self.coll("tp_allgather", CommType.ALL_GATHER, size, "tp")
        rs = self.coll("tp_reducescatter", CommType.REDUCE_SCATTER, size, "tp")
        return ([("tp", ag)], [("tp", rs)])

    def core(self, fwd: bool) -> list[tuple[int, float]]:
        """Kernels of the attention core of all local queries against all keys (the CP
        chunks split it). Flash: one fused kernel (backward 2.5x). Unfused (Megatron-LM before
        flash attention): batched QK^T and AV GEMMs, fused scale-mask-softmax (read + write
        ``b a/t s^2`` scores) and dropout (read, write, 1-byte mask; none for a model
        without dropout); backward 2x."""
        m, p = self.m, self.p
        heads = p.micro_batch * m.num_heads / p.tp
        return attention_core(self.ops, heads, m.seq_len // p.cp, m.seq_len, m.core_head_dim,
                              p.flash_attention, fwd, self.act_bytes, m.dropout > 0)

    def projections(self) -> tuple[list[tuple[int, float]], list[tuple[int, float]]]:
        """Kernels before the attention core (norm, QKV or MLA projections) and after it
        (output projection, dropout + residual)."""
        m, t = self.m, self.p.tp
        h = m.hidden_size
        pre = [(self.mem(2 * h), 1.0)]
        if not m.is_mla:
            pre.append((self.gemm(m.qkv_out / t, h), 1.0))
            return pre, [(self.gemm(h, h / t), 1.0), (self.mem(3 * h), 1.0)]
        # MLA: down projections replicated over TP on every token, each latent RMS-normed
        # (read + write), then the per-head up projections split over TP
        a, q_rank, kv_rank = m.num_heads, m.q_lora_rank, m.kv_lora_rank
        if q_rank:
            pre += [(self.gemm(q_rank, h), 1.0), (self.mem(2 * q_rank, self.tokens), 1.0),
                    (self.gemm(a * m.qk_head_dim / t, q_rank), 1.0)]
        else:
            pre.append((self.gemm(a * m.qk_head_dim / t, h), 1.0))
        pre += [(self.gemm(kv_rank + m.qk_rope_head_dim, h), 1.0),
                (self.mem(2 * kv_rank, self.tokens), 1.0),
                (self.gemm(a * (m.qk_nope_head_dim + m.v_head_dim) / t, kv_rank), 1.0)]
        return pre, [(self.gemm(h, a * m.v_head_dim / t), 1.0), (self.mem(3 * h), 1.0)]

    def attention(self, scale: float, fwd: bool, tag: str) -> list[Step]:
        m, p = self.m, self.p
        t = p.tp
        pre, post = self.projections()
        t_pre = self.ops.template(f"attn_pre_{tag}", [(k, w * scale) for k, w in pre])
        t_post = self.ops.template(f"attn_post_{tag}", [(k, w * scale) for k, w in post])
        t_core = self.ops.template(f"attn_core_{tag}", self.core(fwd))
        kv_bytes = self.tokens * m.kv_width / t * self.act_bytes  # MLA: after the up projection
        kv_bytes *= 2.0 if tag == "bwd" else 1.0  # KV and their gradients
        span = self.spans["cp"]
        kv = self.ops.kernel("p2p", kv_bytes, float(span.cross_node))
        t_kv = self.ops.template("cp_kv_exchange", [(kv, 1.0)], _KIND["cp"])
        return [("c", t_pre), ("attn", t_core, t_kv, p.cp), ("c", t_post)]

    def mlp(self, scale: float, tag: str) -> list[Step]:
        m, p = self.m, self.p
        h, t, f = m.hidden_size, p.tp, m.ffn
        up = (2 if m.mlp == "swiglu" else 1) * f / t
        act_elems = (3 if m.mlp == "swiglu" else 2) * f / t
        if not m.is_moe:
            parts = [(self.mem(2 * h), 1.0), (self.gemm(up, h), 1.0),
                     (self.mem(act_elems, self.tokens), 1.0), (self.gemm(h, f / t), 1.0),
                     (self.mem(3 * h), 1.0)]
            return [("c", self.ops.template(f"mlp_{tag}", [(k, w * scale) for k, w in parts]))]
        routed = self.tokens * m.top_k
        router = [(self.mem(2 * h), 1.0), (self.gemm(m.num_experts, h), 1.0)]
        shared = m.shared_ffn_hidden_size
        if shared:  # shared experts: a dense MLP of their width on every token, beside the router
            gate = 2 if m.mlp == "swiglu" else 1
            router += [(self.gemm(gate * shared / t, h), 1.0),
                       (self.mem((gate + 1) * shared / t, self.tokens), 1.0),
                       (self.gemm(h, shared / t), 1.0)]
        steps: list[Step] = [("c", self.ops.template(
            f"moe_router_{tag}", [(k, w * scale) for k, w in router]))]
        size = routed * h * self.act_bytes / (t if self.sp else 1)  # the tokens sent to experts
        n = p.ep_overlap_chunks
        if p.ep > 1 and n > 1:  # one chunk's all-to-all and experts, pipelined n times
            chunk_a2a = self.coll(f"ep_alltoall/{n}", CommType.ALL_TO_ALL, size / n, "ep")
            chunk = [(self.gemm(up, h, routed / n), 1.0), (self.mem(act_elems, routed / n), 1.0),
                     (self.gemm(h, f / t, routed / n), 1.0)]
            steps.append(("moe", chunk_a2a, self.ops.template(
                f"moe_experts_{tag}/{n}", [(k, w * scale) for k, w in chunk]), chunk_a2a, n))
            steps.append(("c", self.ops.template(f"moe_residual_{tag}",
                                                 [(self.mem(3 * h), scale)])))
            return steps
        experts = [(self.gemm(up, h, routed), 1.0), (self.mem(act_elems, routed), 1.0),
                   (self.gemm(h, f / t, routed), 1.0), (self.mem(3 * h), 1.0)]
        a2a = self.coll("ep_alltoall", CommType.ALL_TO_ALL, size, "ep") if p.ep > 1 else None
        if a2a is not None:
            steps.append(("ep", a2a))
        steps.append(("c", self.ops.template(
            f"moe_experts_{tag}", [(k, w * scale) for k, w in experts])))
        if a2a is not None:
            steps.append(("ep", a2a))
        return steps

    def block(self, fwd: bool, tag: str) -> list[Step]:
        scale = 1.0 if fwd else _BWD_GEMM
        before, after = self.tp_pair(fwd)
        attn = before + self.attention(scale, fwd, tag) + after
        mlp = before + self.mlp(scale, tag) + after
        return attn + mlp if fwd else mlp + attn


def build_layer_ops(model: ModelSpec, parallel: ParallelSpec, spans: dict[str, GroupSpan],
                    ops: OpTable) -> LayerOps:
    """Step lists for one block (forward, backward, recompute) and the model's ends."""
    b = _Builder(model, parallel, spans, ops)
    fwd = tuple(b.block(True, "fwd"))
    bwd = tuple(b.block(False, "bwd"))
    if parallel.recompute == "full":
        recompute = tuple(b.block(True, "recompute"))
    elif parallel.recompute == "selective":
        recompute = (("c", ops.template("attn_core_recompute", b.core(True))),)
    else:
        recompute = ()
    h, v, t = model.hidden_size, model.vocab_size, parallel.tp
    embed_fwd = ops.template("embedding_fwd", [(b.mem(2 * h, b.tokens), 1.0)])
    embed_bwd = ops.template("embedding_bwd", [(b.mem(4 * h, b.tokens), 1.0)])
    logits = [(b.mem(2 * h), 1.0), (b.gemm(v / t, h), 1.0), (b.mem(4 * v / t, b.tokens), 1.0)]
    before, _ = b.tp_pair(True)
    head_fwd = tuple(before) + (("c", ops.template("output_fwd", logits)),)
    head_bwd: tuple[Step, ...] = (("c", ops.template("output_bwd", [(k, 2.0 * w) for k, w in logits])),)
    if b.sp:
        head_bwd = head_bwd + (("tp", b.coll("tp_reducescatter", CommType.REDUCE_SCATTER,
                                            b.tokens * h * b.act_bytes, "tp")),)
    return LayerOps(fwd, bwd, recompute, embed_fwd, embed_bwd, head_fwd, head_bwd)


__all__ += ["COMPUTE"]
