"""Parallelization plan: :class:`ParallelSpec` (the ``parallel`` config group).

Megatron-LM style 3D/4D parallelism (Narayanan et al. 2021; Korthikanti et al. 2022): tensor
(``tp``, optionally with sequence parallelism), pipeline (``pp`` stages, 1F1B, or the
interleaved schedule with ``vp`` virtual stages per GPU), context (``cp``), data (``dp``, with
ZeRO stage 0-3) and expert parallelism (``ep``, carved out of the data-parallel ranks as in
Megatron-Core). ``num_gpus = tp * pp * cp * dp``. The rank order is Megatron's
``tp-cp-dp-pp`` (tensor innermost) unless ``rank_order`` says otherwise, so TP groups sit
inside a node when ``tp <= gpus_per_node``.

Field names are the YAML keys of ``conf/parallel/``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from simcore.errors import InputError, require
from simcore.limits import limit
from simcore.specs.layer_split import check_layer_split, chunk_layers

__all__ = ["PRECISIONS", "RECOMPUTE_MODES", "WORK_SPLITS", "ParallelSpec"]

RECOMPUTE_MODES = ("none", "selective", "full")
WORK_SPLITS = ("even", "proportional", "balanced", "explicit")
PRECISIONS = ("fp32", "tf32", "fp16", "bf16", "fp8", "fp4")


def _positive_int(value: object, key: str) -> None:
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= 1
    require(ok, key, value, "must be an integer >= 1")


@dataclass(frozen=True)
class ParallelSpec:
    """How one model is spread over the GPUs and batched.

    Attributes:
        tp, pp, cp, ep: tensor, pipeline, context and expert parallel degrees.
        dp: data-parallel degree; ``None`` = derived from ``system.num_gpus`` by
            :meth:`resolve`.
        vp: virtual pipeline stages (model chunks) per GPU; 1 = plain 1F1B.
        microbatch_group: with ``vp > 1``, micro-batches a model chunk runs in a row before the
            next chunk (Megatron-Core's ``microbatch_group_size_per_vp_stage``); 0 = ``pp``,
            Megatron-LM's interleaved schedule. At least ``pp`` and at most the micro-batches
            per replica; the last group holds what is left, 0 or at least ``pp`` of them. It
            runs interleaved pipelines whose micro-batch count ``pp`` does not divide, with more
            forwards in flight.
        micro_batch: samples per micro-batch (per data-parallel replica).
        global_batch: samples per iteration; micro-batches per replica =
            ``global_batch / (dp * micro_batch)`` (gradient accumulation).
        sequence_parallel: Megatron sequence parallelism (TP all-reduce -> reduce-scatter +
            all-gather, layer-norm/dropout activations sharded over TP).
        recompute: ``none``, ``selective`` (attention core only) or ``full`` (whole layer).
        zero_stage: 0 (gradient all-reduce), 1 (optimizer states sharded; gradient
            reduce-scatter + parameter all-gather once per iteration), 2 (also gradients:
            reduce-scatter every micro-batch), 3 (also parameters: all-gather before each
            layer's forward and backward, every micro-batch).
        dp_overlap: overlap gradient reduction (and ZeRO-3 gathers) with compute.
        tp_comm_overlap: overlap TP collectives with the neighbouring GEMMs (chunked).
        ep_overlap_chunks: with ``ep > 1``, the token chunks a MoE layer's all-to-all is
            pipelined in with the experts' GEMMs (FasterMoE's and Tutel's pipelining degree):
            chunk j's experts run while chunk j + 1 is dispatched and chunk j - 1 combined, on
            the stage's ep stream; each chunk is a collective and a GEMM of its own size (their
            latency and efficiency per chunk), so more chunks hide more but cost more. 1 = the
            all-to-all blocks the compute stream (Megatron-LM's alltoall dispatcher).
        overlap_blocks: model each group of pieces pipelined across two streams, every run
            of TP-overlapped steps (with ``tp_comm_overlap``), every context-parallel ring
            (``cp`` > 1) and every chunked all-to-all (``ep_overlap_chunks`` > 1), as one
            block whose duration is the pieces' makespan in closed form
            (:mod:`simcore.ir.blocks`) instead of a graph of pieces: the same iteration times
            up to rounding, a graph up to ~200x smaller (GPT-3 175B: hardware sweeps 40-1,000x
            and new plans 17-160x faster); no Chakra export of the pieces, calibrated fidelity
            on one device type.
        precision: compute precision of the GEMMs (``fp16``, ``bf16``, ``fp8``, ...).
        flash_attention: fused (flash) attention core; false = Megatron-LM's unfused core
            (as in Narayanan et al. 2021 and Korthikanti et al. 2022).
        grad_accumulation_fusion: the weight-gradient GEMM accumulates into the gradient
            buffer (Megatron-Core / Transformer Engine); gradients are reduced in 16-bit.
            False: every micro-batch's gradient is added to the buffer by a separate
            memory-bound kernel per layer (autograd's / the framework's accumulation, as in
            the DeepSpeed pipeline engine), reading the 16-bit gradient and reading and writing
            the buffer; the buffer (and the data-parallel reduction) is fp32 in a bf16 / fp8 /
            fp4 run (bf16 needs fp32 accumulation) and 16-bit in an fp16 run. Set by the
            software stack (``conf/stack``).
        bf16_optimizer: DeepSpeed's ``BF16_Optimizer`` gradient path (unfused accumulation of
            a bf16 / fp8 / fp4 run at ZeRO stage 0 or 1; DeepSpeed 0.6.5
            ``runtime/bf16_optimizer.py`` and ``runtime/pipe/engine.py``): every micro-batch's
            16-bit gradient is cast into an fp32 temporary and added to the fp32 gradient
            (``hp_grad.add_(lp.grad.to(fp32))``: 18 bytes per parameter instead of 10); the
            fp32 gradients are all-reduced in the 16-bit communication dtype (the engine's
            ``communication_data_type`` default; cast down and back, 12 bytes per parameter
            per iteration), and the updated 16-bit weights of each rank's optimizer shard are
            all-gathered after the step. Set by the software stack (``conf/stack``).
        rank_order: how ranks are numbered, innermost dimension first (consecutive ranks
            share a node): ``tp-cp-dp-pp`` keeps TP inside the scale-up domain.
        first_stage_layers, last_stage_layers: explicit layer counts of the first / last
            pipeline stage (Megatron-Core's ``decoder_first/last_pipeline_num_layers``);
            ``None`` = layers split as evenly as possible (:mod:`simcore.specs.layer_split`).
        layer_split: ``even`` (as even as possible, or the explicit first / last counts) or
            ``balanced`` (whole layers per model chunk so that the largest chunk, the output
            layer's work counted on the last, is the least; Llama 3's one layer fewer on the
            first and last stage: :mod:`simcore.specs.layer_split`).
        work_split: how the work of a pipeline stage (its data-parallel batch share and tensor
            shard) is split between devices of different pools (HAP, Zhang et al. EuroSys 2024):
            ``even`` (DP-EV), ``proportional`` to peak FLOP/s (DP-CP), ``balanced`` (equal
            compute time per device under the per-device cost model: the optimum of HAP's LP
            for a stage whose communication does not depend on the ratios) or ``explicit``
            (``work_shares``). Only matters on clusters of mixed device pools.
        work_shares: with ``work_split = explicit``, the relative work of one device of each
            pool (rank order of ``system.pools``); normalized per stage.
    """

    tp: int = 1
    pp: int = 1
    dp: int | None = None
    cp: int = 1
    ep: int = 1
    vp: int = 1
    microbatch_group: int = 0
    micro_batch: int = 1
    global_batch: int = 8
    sequence_parallel: bool = False
    recompute: str = "none"
    zero_stage: int = 0
    dp_overlap: bool = True
    tp_comm_overlap: bool = False
    ep_overlap_chunks: int = 1
    overlap_blocks: bool = False
    precision: str = "bf16"
    flash_attention: bool = True
    grad_accumulation_fusion: bool = True
    bf16_optimizer: bool = False
    rank_order: str = "tp-cp-dp-pp"
    first_stage_layers: int | None = None
    last_stage_layers: int | None = None
    layer_split: str = "even"
    work_split: str = "even"
    work_shares: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        p = "parallel."
        for key in ("tp", "pp", "cp", "ep", "vp", "micro_batch", "global_batch",
                    "ep_overlap_chunks"):
            _positive_int(getattr(self, key), p + key)
        for key in ("dp", "first_stage_layers", "last_stage_layers"):
            if getattr(self, key) is not None:
                _positive_int(getattr(self, key), p + key)
        for key in ("sequence_parallel", "dp_overlap", "tp_comm_overlap", "overlap_blocks",
                    "flash_attention",
                    "grad_accumulation_fusion", "bf16_optimizer"):
            require(isinstance(getattr(self, key), bool), p + key, getattr(self, key),
                    "must be true or false")
        require(self.recompute in RECOMPUTE_MODES, p + "recompute", self.recompute,
                f"must be one of {', '.join(RECOMPUTE_MODES)}")
        require(self.zero_stage in (0, 1, 2, 3) and not isinstance(self.zero_stage, bool),
                p + "zero_stage", self.zero_stage, "must be 0, 1, 2 or 3")
        require(self.precision in PRECISIONS, p + "precision", self.precision,
                f"must be one of {', '.join(PRECISIONS)}")
        require(isinstance(self.rank_order, str)
                and sorted(self.rank_order.split("-")) == ["cp", "dp", "pp", "tp"],
                p + "rank_order", self.rank_order,
                "must order the four dimensions tp, cp, dp, pp joined by '-' (innermost first)")
        require(self.vp == 1 or self.pp > 1, p + "vp", self.vp,
                "virtual pipeline stages need pp > 1")
        group = self.microbatch_group
        require(isinstance(group, int) and not isinstance(group, bool)
                and (group == 0 or group >= self.pp), p + "microbatch_group", group,
                f"must be 0 (= pp) or an integer >= pp={self.pp}")
        require(group == 0 or self.vp > 1, p + "microbatch_group", group,
                "groups micro-batches of an interleaved schedule: needs vp > 1")
        require(self.ep_overlap_chunks == 1 or self.ep > 1, p + "ep_overlap_chunks",
                self.ep_overlap_chunks, "pipelines the expert-parallel all-to-all: needs ep > 1")
        check_layer_split(self.layer_split, self.first_stage_layers, self.last_stage_layers)
        require(self.work_split in WORK_SPLITS, p + "work_split", self.work_split,
                f"must be one of {', '.join(WORK_SPLITS)}")
        if self.work_shares is not None:
            shares = self.work_shares
            require(isinstance(shares, tuple | list) and len(shares) >= 1
                    and all(isinstance(x, int | float) and not isinstance(x, bool) and x > 0
                            for x in shares), p + "work_shares", shares,
                    "must be a list of positive numbers, one per device pool")
            object.__setattr__(self, "work_shares", tuple(float(x) for x in shares))
        require((self.work_split == "explicit") == (self.work_shares is not None),
                p + "work_split", self.work_split,
                "explicit needs parallel.work_shares, and work_shares needs explicit")

    def chunk_layers(self, num_layers: int, output_layers: float = 0.0) -> tuple[int, ...]:
        """Layers of each model chunk ``v = c * pp + s`` (:func:`layer_split.chunk_layers`);
        ``output_layers``: the output layer's work in layers, which the balanced split weighs.

        Raises:
            InputError: a chunk would get no layer, or the override does not add up.
        """
        return chunk_layers(num_layers, self.pp, self.vp, self.first_stage_layers,
                            self.last_stage_layers, self.layer_split, output_layers)

    @property
    def vp_group(self) -> int:
        """Micro-batches a model chunk runs in a row (``microbatch_group``, 0 = ``pp``)."""
        return self.microbatch_group or self.pp

    @property
    def pipelined_pieces(self) -> bool:
        """Whether the plan pipelines pieces across two streams (TP communication overlap, a
        context-parallel ring, a chunked all-to-all): a graph of pieces, or closed-form blocks
        with ``overlap_blocks``."""
        return self.tp_comm_overlap or self.cp > 1 or self.ep_overlap_chunks > 1

    @property
    def model_parallel(self) -> int:
        """GPUs holding one model replica: tp * pp * cp."""
        return self.tp * self.pp * self.cp

    @property
    def dp_size(self) -> int:
        """The resolved data-parallel degree (call :meth:`resolve` first)."""
        if self.dp is None:
            raise InputError("parallel.dp", None, "unresolved: call ParallelSpec.resolve(num_gpus)")
        return self.dp

    @property
    def num_gpus(self) -> int:
        """tp * pp * cp * dp."""
        return self.model_parallel * self.dp_size

    @property
    def num_micro_batches(self) -> int:
        """Micro-batches per replica per iteration (gradient-accumulation steps)."""
        return self.global_batch // (self.dp_size * self.micro_batch)

    def resolve(self, num_gpus: int) -> ParallelSpec:
        """Fill in ``dp`` from ``num_gpus`` and check the divisibility rules.

        Raises:
            InputError: the GPUs do not factor into tp * pp * cp * dp, or the global batch
                does not split into whole micro-batches per replica.
        """
        p = "parallel."
        mp = self.model_parallel
        if self.dp is None:
            require(num_gpus % mp == 0, "system.num_gpus", num_gpus,
                    f"must be divisible by tp*pp*cp={mp}")
            spec = replace(self, dp=num_gpus // mp)
        else:
            require(self.dp * mp == num_gpus, p + "dp", self.dp,
                    f"tp*pp*cp*dp={self.dp * mp} must equal system.num_gpus={num_gpus}")
            spec = self
        dp = spec.dp_size
        require(spec.global_batch % (dp * spec.micro_batch) == 0, p + "global_batch",
                spec.global_batch, f"must be divisible by dp*micro_batch={dp * spec.micro_batch}")
        require(spec.num_micro_batches <= limit("micro_batches"), p + "global_batch", spec.global_batch,
                f"gives {spec.num_micro_batches} micro-batches per replica, more than "
                f"{int(limit('micro_batches'))} (limit micro_batches, SIMSWEEP_MAX_MICRO_BATCHES)")
        require(dp % spec.ep == 0, p + "ep", spec.ep, f"must divide dp={dp}")
        if spec.vp > 1:
            m, g = spec.num_micro_batches, spec.vp_group
            if spec.microbatch_group:  # Megatron-Core: the last group is the remainder
                require(g <= m and (m % g == 0 or m % g >= spec.pp), p + "microbatch_group", g,
                        f"must be at most the micro-batches per replica ({m}) and leave a "
                        f"last group of 0 or at least pp={spec.pp} ({m} mod {g} = {m % g})")
            else:
                require(m % g == 0, p + "global_batch", spec.global_batch,
                        f"interleaving needs micro-batches per replica ({m}) divisible by "
                        f"pp={g} (or a parallel.microbatch_group, Megatron-Core's)")
        return spec
