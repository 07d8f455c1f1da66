"""GNMT as a :class:`~simcore.workloads._base.WorkloadFamily` (registry name ``gnmt``).

Architecture (Wu et al., "Google's Neural Machine Translation System", arXiv 1609.08144, 2016;
the reference implementation is MLPerf's / NVIDIA DeepLearningExamples' PyTorch GNMT v2,
``seq2seq/models/{encoder,decoder,attention}.py``): hidden size ``h``, a shared source/target
embedding of ``vocab x h``; an encoder of ``L`` LSTM layers, the first bidirectional (output 2h),
the second ``2h -> h``, the rest ``h -> h`` with residual connections; a decoder whose first LSTM
(``h -> h``) feeds normalized Bahdanau attention (query and key projections ``h x h`` without
bias, a scoring vector, a normalization scalar and bias of ``h``), then ``L - 1`` LSTM layers
over ``[output, context]`` (``2h -> h``), and a classifier ``h -> vocab`` with bias. A PyTorch LSTM
layer has ``4h (in + h) + 8h`` parameters (two bias vectors). With h = 1024, L = 4 and the
32,320-token BPE vocabulary this is 160,671,297 parameters.

Graph (cuDNN's LSTM algorithm, Appleyard et al. 2016, "Optimizing performance of recurrent neural
networks on GPUs"): per layer and direction the input projection of all time steps is one GEMM
``(b T) x 4h x in``; the recurrence is a *dependency chain* of ``T`` steps, each a GEMM
``b x 4h x h`` and a pointwise gate pass, each waiting for the step before; backward mirrors it
(``T`` chained steps, then the input-gradient and weight-gradient GEMMs over all steps).
Attention (teacher forcing: queries of all target steps at once) is batched GEMMs for the key and
query projections, scores and context, and a softmax pass; the classifier is three GEMMs and a
softmax/cross-entropy pass over ``b T vocab``. Data parallel (:mod:`simcore.workloads.dataparallel`),
Adam (per parameter: read w, g, m, v, write w, m, v: 28 bytes fp32). FLOPs: 2 per
multiply-accumulate of every GEMM, backward twice the forward.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from simcore.errors import require
from simcore.hardware.compute import ELEMENT_BYTES
from simcore.ir.ops import OpTable
from simcore.specs.parallel import ParallelSpec
from simcore.specs.system import SystemSpec
from simcore.workloads._base import Workload
from simcore.workloads.dataparallel import (
    Layer,
    build_dp,
    dp_only_reason,
    dp_traces,
    model_state_bytes,
)
from simcore.workloads.layout import RankLayout

__all__ = ["GNMTFamily", "GNMTSpec"]

_ADAM_BYTES = 28.0
_ADAM_STATE = 8.0
CELLS = ("lstm",)


@dataclass(frozen=True)
class GNMTSpec:
    """GNMT shapes.

    Attributes:
        name: label.
        hidden_size: LSTM width h.
        num_layers: encoder and decoder layers L (>= 2).
        vocab_size: shared BPE vocabulary.
        src_len, tgt_len: source and target sequence lengths (padded), tokens.
        cell: recurrent cell kind (``lstm``).
        bucket_mb: DDP gradient bucket size, MB.
        grad_bytes: bytes per gradient element on the wire.
    """

    name: str = "gnmt"
    hidden_size: int = 1024
    num_layers: int = 4
    vocab_size: int = 32320
    src_len: int = 50
    tgt_len: int = 50
    cell: str = "lstm"
    bucket_mb: float = 25.0
    grad_bytes: int = 4

    def __post_init__(self) -> None:
        p = "workload."
        for key in ("hidden_size", "vocab_size", "src_len", "tgt_len"):
            value = getattr(self, key)
            require(isinstance(value, int) and value >= 1, p + key, value, "must be an integer >= 1")
        require(isinstance(self.num_layers, int) and self.num_layers >= 2, p + "num_layers",
                self.num_layers, "must be an integer >= 2 (a bidirectional and a unidirectional layer)")
        require(self.cell in CELLS, p + "cell", self.cell,
                f"unknown layer kind; must be one of {', '.join(CELLS)}")
        require(self.bucket_mb > 0, p + "bucket_mb", self.bucket_mb, "must be > 0")
        require(self.grad_bytes in (2, 4), p + "grad_bytes", self.grad_bytes, "must be 2 or 4")

    def lstm_inputs(self) -> tuple[list[tuple[int, int]], list[int]]:
        """(encoder layers as (input width, directions), decoder LSTM input widths)."""
        h, n = self.hidden_size, self.num_layers
        enc = [(h, 2), (2 * h, 1)] + [(h, 1)] * (n - 2)
        dec = [h] + [2 * h] * (n - 1)
        return enc, dec

    def num_params(self) -> int:
        """Trainable parameters of the reference model."""
        h, v = self.hidden_size, self.vocab_size
        enc, dec = self.lstm_inputs()
        lstm = sum(d * (4 * h * (i + h) + 8 * h) for i, d in enc)
        lstm += sum(4 * h * (i + h) + 8 * h for i in dec)
        attention = 2 * h * h + 2 * h + 1
        return v * h + lstm + attention + (h + 1) * v

    def macs_per_sample(self) -> int:
        """Forward multiply-accumulates of one sentence pair (embeddings are lookups)."""
        h, v, s, t = self.hidden_size, self.vocab_size, self.src_len, self.tgt_len
        enc, dec = self.lstm_inputs()
        m = sum(d * s * 4 * h * (i + h) for i, d in enc) + sum(t * 4 * h * (i + h) for i in dec)
        m += s * h * h + t * h * h + 2 * t * s * h  # key/query projections, scores, context
        return m + t * h * v


class GNMTFamily:
    """GNMT-style LSTM encoder-decoder with attention, data parallel."""

    name = "gnmt"
    spec_type: type = GNMTSpec

    def tiny_spec(self) -> GNMTSpec:
        """h = 128, 2 layers, vocabulary 1000, 8 source / target tokens."""
        return GNMTSpec(name="gnmt_tiny", hidden_size=128, num_layers=2, vocab_size=1000,
                        src_len=8, tgt_len=8)

    def tiny_plan(self) -> ParallelSpec:
        """Data parallel on 8 GPUs."""
        return ParallelSpec(global_batch=16)

    def check(self, spec: GNMTSpec, parallel: ParallelSpec, cluster: SystemSpec) -> str | None:
        """Data parallel only."""
        return dp_only_reason(parallel)

    def build(self, spec: GNMTSpec, parallel: ParallelSpec, gpus_per_node: int) -> Workload:
        """The recurrent chains, attention and classifier of one iteration."""
        ops = OpTable()
        layers = _layers(spec, parallel.micro_batch, ops, parallel.precision)
        return build_dp(spec.name, layers, ops, parallel, gpus_per_node,
                        grad_bytes=float(spec.grad_bytes), bucket_mb=spec.bucket_mb,
                        optimizer_bytes_per_param=_ADAM_BYTES)

    def graph_nodes(self, spec: GNMTSpec, parallel: ParallelSpec, gpus_per_node: int) -> int:
        """:func:`dp_graph_nodes` of :func:`_layers`, counted without building them (a layer
        list holds one op per time step): per micro-batch the embedding, attention and
        classifier (two ops each), ``n + 1`` encoder LSTMs over the source and ``n`` decoder
        LSTMs over the target (``steps + 1`` ops forward and backward each); up to two gradient
        buckets per layer of the ``2n + 3``; the optimizer step."""
        n, s, t = spec.num_layers, spec.src_len, spec.tgt_len
        per_micro_batch = 6 + (n + 1) * (2 * s + 2) + n * (2 * t + 2)
        return parallel.num_micro_batches * per_micro_batch + 2 * (2 * n + 3) + 1

    def footprint(self, spec: GNMTSpec, parallel: ParallelSpec, stage: int) -> dict[str, int]:
        """Model state (Adam) and the activations kept for backward."""
        h, s, t, b = spec.hidden_size, spec.src_len, spec.tgt_len, parallel.micro_batch
        e = ELEMENT_BYTES[parallel.precision]
        out = model_state_bytes(spec.num_params(), parallel.precision, _ADAM_STATE)
        # per LSTM step: 4 gates + cell + output (6h); embeddings; attention scores; fp32 logits
        enc, dec = spec.lstm_inputs()
        act = sum(d * s * 6 * h for _, d in enc) + len(dec) * t * 6 * h + (s + t) * h
        act_bytes = act * e + t * s * e + t * spec.vocab_size * 4.0
        out["activations"] = int(act_bytes * b)
        out["total"] = sum(out.values())
        return out

    def peak_footprint(self, spec: GNMTSpec, parallel: ParallelSpec) -> tuple[int, dict[str, int]]:
        """One stage."""
        return 0, self.footprint(spec, parallel, 0)

    def flops_per_iter(self, spec: GNMTSpec, parallel: ParallelSpec) -> float:
        """3 x forward x global batch (2 FLOPs per multiply-accumulate)."""
        return 6.0 * spec.macs_per_sample() * parallel.global_batch

    def samples_per_iter(self, spec: GNMTSpec, parallel: ParallelSpec) -> int:
        """Sentence pairs per iteration."""
        return int(parallel.global_batch)

    def tokens_per_iter(self, spec: GNMTSpec, parallel: ParallelSpec) -> int:
        """Target tokens per iteration."""
        return int(parallel.global_batch) * spec.tgt_len

    def export_traces(self, workload: Workload, layout: RankLayout,
                      template_us: NDArray[np.float64]) -> tuple[dict[int, Any], dict[int, tuple[int, ...]]]:
        """Every rank runs the representative's program (:func:`dp_traces`)."""
        return dp_traces(workload, layout, template_us)


def _lstm(ops: OpTable, tag: str, b: int, steps: int, d_in: int, h: int, e: float,
          params: float) -> Layer:
    """One LSTM layer (one direction): input GEMM, ``steps`` chained steps; backward mirrored."""
    gates = b * 4 * h * e
    step_f = ops.template(f"{tag}_step_fwd", [(ops.kernel("gemm", b, 4 * h, h), 1.0),
                                               (ops.kernel("mem", 3.0 * gates), 1.0)])
    step_b = ops.template(f"{tag}_step_bwd", [(ops.kernel("gemm", b, h, 4 * h), 1.0),
                                               (ops.kernel("mem", 4.0 * gates), 1.0)])
    x_f = ops.template(f"{tag}_input_fwd", [(ops.kernel("gemm", b * steps, 4 * h, d_in), 1.0)])
    x_b = ops.template(f"{tag}_grads", [(ops.kernel("gemm", b * steps, d_in, 4 * h), 1.0),
                                        (ops.kernel("gemm", 4 * h, d_in + h, b * steps), 1.0)])
    return Layer(tag, (x_f, *[step_f] * steps), (*[step_b] * steps, x_b), params)


def _layers(spec: GNMTSpec, b: int, ops: OpTable, precision: str) -> list[Layer]:
    h, v, s, t = spec.hidden_size, spec.vocab_size, spec.src_len, spec.tgt_len
    e = ELEMENT_BYTES[precision]
    enc, dec = spec.lstm_inputs()
    emb_f = ops.template("embedding_fwd", [(ops.kernel("mem", 2.0 * b * (s + t) * h * e), 1.0)])
    emb_b = ops.template("embedding_bwd", [(ops.kernel("mem", 3.0 * b * (s + t) * h * 4.0), 1.0)])
    out = [Layer("embedding", (emb_f,), (emb_b,), float(v * h))]
    for i, (d_in, dirs) in enumerate(enc):
        for d in range(dirs):
            out.append(_lstm(ops, f"enc{i}" + ("rl"[d] if dirs > 1 else ""), b, s, d_in, h, e,
                             4.0 * h * (d_in + h) + 8 * h))
    out.append(_lstm(ops, "dec_att_rnn", b, t, dec[0], h, e, 4.0 * h * (dec[0] + h) + 8 * h))
    att_f = [(ops.kernel("gemm", b * s, h, h), 1.0), (ops.kernel("gemm", b * t, h, h), 1.0),
             (ops.kernel("gemm", b * t, s, h), 1.0), (ops.kernel("mem", 3.0 * b * t * s * e), 1.0),
             (ops.kernel("gemm", b * t, h, s), 1.0)]
    att_b = [(k, 2.0 * w) for k, w in att_f]  # input and weight gradients of every product
    out.append(Layer("attention", (ops.template("attention_fwd", att_f),),
                     (ops.template("attention_bwd", att_b),), float(2 * h * h + 2 * h + 1)))
    for i, d_in in enumerate(dec[1:]):
        out.append(_lstm(ops, f"dec{i + 1}", b, t, d_in, h, e, 4.0 * h * (d_in + h) + 8 * h))
    cls_f = [(ops.kernel("gemm", b * t, v, h), 1.0), (ops.kernel("mem", 3.0 * b * t * v * 4.0), 1.0)]
    cls_b = [(ops.kernel("gemm", b * t, h, v), 1.0), (ops.kernel("gemm", v, h, b * t), 1.0)]
    out.append(Layer("classifier", (ops.template("classifier_fwd", cls_f),),
                     (ops.template("classifier_bwd", cls_b),), float((h + 1) * v)))
    return out
