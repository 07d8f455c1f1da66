"""Validation case rows (shared/validation/CASES.md) as config sections.

A case row names a published training run: the model shape, the parallelization, the
accelerator (``gpu``), GPU count, GPUs per node and scale-out line rate (Gb/s per GPU). The
cluster is the ``conf/system`` preset whose accelerator is the case's ``gpu``, with the row's
sizes and line rate; the attention implementation follows the row or the software era
(:func:`attention_impl`). :func:`build_case` builds the specs through
:mod:`search.config.build`, the one translation from config to simcore specs.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from search.config.build import build_sections
from search.config.compose import default_config_dir
from simcore.errors import InputError

__all__ = ["ATTENTION_IMPLS", "COARSE_EXPERTS", "FINE_GRAINED_EXPERTS", "FLASH_ERA_GPUS",
           "MODEL_KEYS", "NEUTRAL_COLUMNS", "PLAN_KEYS", "assumed_expert_columns",
           "attention_impl", "build_case", "case_sections", "cluster_for", "complete_row"]

_INT = ("gpus_per_node", "num_gpus", "num_layers", "hidden_size", "num_heads", "num_kv_heads",
        "ffn_hidden_size", "seq_len", "vocab_size", "global_batch", "micro_batch", "tp", "pp",
        "dp", "vp", "cp", "ep", "zero_stage", "first_stage_layers", "last_stage_layers",
        "microbatch_group", "num_experts", "top_k", "shared_ffn_hidden_size",
        "ep_overlap_chunks", "kv_lora_rank", "q_lora_rank", "qk_nope_head_dim",
        "qk_rope_head_dim", "v_head_dim")
_BOOL = ("sequence_parallel", "dp_overlap", "tp_comm_overlap")
_FLOAT = ("dropout", "scaleout_gbps_per_gpu")
_NAMES = ("gpu", "precision", "recompute", "attention", "stack", "mlp")
MODEL_KEYS = ("num_layers", "hidden_size", "num_heads", "num_kv_heads", "ffn_hidden_size",
               "seq_len", "vocab_size")
#: optional columns of a multi-head latent attention model (DeepSeek-V2/V3)
_LATENT_ATTENTION = ("kv_lora_rank", "q_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim",
                     "v_head_dim")
PLAN_KEYS = ("tp", "pp", "dp", "cp", "ep", "vp", "micro_batch", "global_batch",
              "sequence_parallel", "recompute", "zero_stage", "dp_overlap", "tp_comm_overlap",
              "precision")


def _field(row: dict[str, str], key: str) -> Any:
    raw = (row.get(key) or "").strip()
    if raw == "":
        raise InputError(key, raw, "required column is empty or missing")
    if key in _INT:
        try:
            return int(raw)
        except ValueError:
            pass
        try:  # "64.0": an integer column with gaps, as pandas writes it
            number = float(raw)
        except ValueError:
            number = math.nan
        if number.is_integer():
            return int(number)
        raise InputError(key, raw, "must be an integer")
    if key in _FLOAT:
        if not _is_number(raw):
            raise InputError(key, raw, "must be a number")
        return float(raw)
    if key in _BOOL:
        if raw.lower() not in ("true", "false", "1", "0"):
            raise InputError(key, raw, "must be true or false")
        return raw.lower() in ("true", "1")
    return raw


def _load_yaml(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text())
    return data if isinstance(data, dict) else {}


def cluster_for(gpu: str) -> dict[str, Any]:
    """The resolved ``system`` dict of the conf/system cluster preset whose accelerator is ``gpu``."""
    for path in sorted((default_config_dir() / "system").glob("*.yaml")):
        data = _load_yaml(path)
        groups: dict[str, str] = {}
        for item in data.pop("defaults", []):
            if isinstance(item, dict):
                groups.update(item)
        if groups.get("accelerator") != gpu:
            continue
        for group, name in groups.items():
            data[group] = _load_yaml(default_config_dir() / "system" / group / f"{name}.yaml")
        return data
    known = sorted(p.stem for p in (default_config_dir() / "system" / "accelerator").glob("*.yaml"))
    raise InputError("gpu", gpu, f"no conf/system cluster preset uses it (accelerators: {known})")


#: attention implementations -> parallel.flash_attention ("auto" is resolved per case)
ATTENTION_IMPLS = {"flash": True, "unfused": False}
#: accelerators whose published training stacks all run a fused (flash) attention core
#: (FlashAttention / cuDNN fused attention appeared in 2022-23, with the H100 generation)
FLASH_ERA_GPUS = frozenset({"h100_80g", "h800_80g", "h200_141g", "b200", "gb200", "gb300",
                            "mi300x"})


def attention_impl(row: dict[str, str], attention: str) -> str:
    """The attention implementation of a case: the row's ``attention`` column, else
    ``attention``; ``auto`` = ``flash`` on H100-generation accelerators, with GQA, fp8 or a
    gated MLP (all post-FlashAttention stacks: FlashAttention appeared in 2022, gated MLPs in
    public GPU training runs with LLaMA in 2023, whose stack already fused attention), else
    Megatron-LM's ``unfused`` core (2021-22 runs)."""
    impl = (row.get("attention") or "").strip() or attention
    if impl == "auto":
        heads, kv = _field(row, "num_heads"), (row.get("num_kv_heads") or "").strip()
        mlp = (row.get("mlp") or "").strip().lower()
        modern = (_field(row, "gpu") in FLASH_ERA_GPUS or _field(row, "precision") in ("fp8", "fp4")
                  or (kv != "" and _field(row, "num_kv_heads") < heads)
                  or mlp == "swiglu" or (mlp == "" and gated_mlp(row)))
        impl = "flash" if modern else "unfused"
    if impl not in ATTENTION_IMPLS:
        raise InputError("attention", impl, f"must be auto or one of {', '.join(ATTENTION_IMPLS)}")
    return impl


def stack_section(row: dict[str, str]) -> dict[str, Any]:
    """The ``stack`` config section of a case: its optional ``stack`` column
    (``conf/stack/<name>.yaml``), default ``megatron_lm``."""
    name = (row.get("stack") or "").strip() or "megatron_lm"
    known = sorted(p.stem for p in (default_config_dir() / "stack").glob("*.yaml"))
    if name not in known:
        raise InputError("stack", name, f"must be one of {', '.join(known)}")
    return _load_yaml(default_config_dir() / "stack" / f"{name}.yaml")


def case_sections(row: dict[str, str], attention: str = "auto") -> dict[str, Any]:
    """The ``workload``, ``parallel`` and ``system`` config sections of one case row.

    ``attention`` (``auto`` / ``unfused`` / ``flash``) is the attention implementation of the
    software stack (see :func:`attention_impl`); the row's ``stack`` column (default
    ``megatron_lm``) scales the calibration (:func:`simcore.specs.stack.apply_stack`).
    """
    row = complete_row(row)[0]
    system = cluster_for(_field(row, "gpu"))
    system.update(num_gpus=_field(row, "num_gpus"), gpus_per_node=_field(row, "gpus_per_node"))
    gbps = _field(row, "scaleout_gbps_per_gpu")
    if (row.get("dp") or "").strip() == "":  # complete_row could not derive it
        model_parallel = _field(row, "tp") * _field(row, "pp") * _field(row, "cp")
        raise InputError("dp", "", f"empty, and num_gpus={_field(row, 'num_gpus')} is not a "
                         f"positive multiple of tp*pp*cp={model_parallel} to derive it from")
    system["scaleout"] = {**system.get("scaleout", {}), "bandwidth_GBps": gbps / 8.0, "size": 0}
    impl = attention_impl(row, attention)
    workload: dict[str, Any] = {"name": _field(row, "case_id"),
                                **{k: _field(row, k) for k in MODEL_KEYS}}
    if (row.get("mlp") or "").strip():
        workload["mlp"] = row["mlp"].strip()
    workload.update({k: _field(row, k) for k in ("num_experts", "top_k",
                                                 "shared_ffn_hidden_size", "dropout",
                                                 *_LATENT_ATTENTION)
                     if (row.get(k) or "").strip()})
    optional = {k: _field(row, k) for k in ("first_stage_layers", "last_stage_layers",
                                            "microbatch_group", "ep_overlap_chunks")
                if (row.get(k) or "").strip()}  # uneven split, interleaving group, a2a chunks
    parallel = {**{k: _field(row, k) for k in PLAN_KEYS}, **optional,
                "flash_attention": ATTENTION_IMPLS[impl]}
    return {"workload": workload, "parallel": parallel, "system": system,
            "stack": stack_section(row)}


#: (num_experts, top_k) assumed for a row with ep > 1 that does not give them (CASES.md's
#: schema has no expert columns): fine-grained experts, narrower than the model
#: (ffn_hidden_size < hidden_size; DeepSeekMoE, Dai et al. 2024; Qwen3-MoE), route each token to
#: 8 of 128; coarse experts (Mixtral 8x7B / 8x22B, Jiang et al. 2024; GShard's top-2) to 2 of 8
FINE_GRAINED_EXPERTS = (128, 8)
COARSE_EXPERTS = (8, 2)


def assumed_expert_columns(row: dict[str, str]) -> dict[str, int]:
    """The expert columns a mixture-of-experts row leaves out, as assumed: nothing for a dense
    row (``ep`` <= 1 and no ``num_experts``, or ``num_experts`` 1); else ``num_experts`` when
    missing (the regime's count rounded up to a multiple of ``ep``, which must divide it) and
    ``top_k`` when missing (the regime's, at most ``num_experts``). See
    :data:`FINE_GRAINED_EXPERTS`."""
    given = {k for k in ("num_experts", "top_k") if (row.get(k) or "").strip()}
    ep = _field(row, "ep") if (row.get("ep") or "").strip() else 1
    if "num_experts" in given:
        if "top_k" in given or _field(row, "num_experts") <= 1:
            return {}
    elif ep <= 1:
        return {}
    fine = _field(row, "ffn_hidden_size") < _field(row, "hidden_size")
    experts, top_k = FINE_GRAINED_EXPERTS if fine else COARSE_EXPERTS
    out: dict[str, int] = {}
    if "num_experts" not in given:
        out["num_experts"] = -(-experts // max(ep, 1)) * max(ep, 1)
    if "top_k" not in given:
        out["top_k"] = min(top_k, out.get("num_experts") or _field(row, "num_experts"))
    return out


def gated_mlp(row: dict[str, str]) -> bool:
    """Whether a row's MLP is gated (SwiGLU / GeGLU: gate and up projections, then down; three
    h x ffn matrices), judged by its width when the row does not say: the two-matrix GELU MLPs
    of GPT-3, Megatron-LM's GPT runs, BLOOM, OPT, MT-NLG, Falcon and Nemotron are exactly 4h
    wide; gated MLPs are not, sized to keep the parameter count of a 4h one (about 8h/3:
    LLaMA 11,008 for h 4,096, Llama 3 14,336 / 28,672 / 53,248 for h 4,096 / 8,192 /
    16,384; Touvron et al. 2023, Dubey et al. 2024; Shazeer 2020 for the gated variants), and
    so are the narrow experts of fine-grained MoE models. An empty ``ffn_hidden_size`` is 4h."""
    if not (row.get("ffn_hidden_size") or "").strip():
        return False
    return bool(_field(row, "ffn_hidden_size") != 4 * _field(row, "hidden_size"))


#: columns a row may leave empty and the value then taken: Megatron-LM's defaults (no
#: interleaving, context or expert parallelism, ZeRO, sequence parallelism, overlap or
#: recompute) and micro-batch 1, the value the validation rows assume where it was not published
NEUTRAL_COLUMNS = {"vp": "1", "cp": "1", "ep": "1", "zero_stage": "0",
                   "sequence_parallel": "false", "dp_overlap": "false",
                   "tp_comm_overlap": "false", "recompute": "none", "micro_batch": "1"}


def complete_row(row: dict[str, str]) -> tuple[dict[str, str], dict[str, Any]]:
    """The row with what it leaves out filled in, and what was filled (column -> value).

    - :data:`NEUTRAL_COLUMNS` when empty;
    - names (``gpu``, ``precision``, ``recompute``, ...) in lower case;
    - ``num_kv_heads`` empty: ``num_heads`` (multi-head attention, no GQA);
    - ``ffn_hidden_size`` empty: ``4 x hidden_size`` (Megatron-LM's default, a GELU MLP);
    - ``dp`` empty: ``num_gpus / (tp * pp * cp)`` (CASES.md: ``num_gpus`` is always their
      product);
    - ``scaleout_gbps_per_gpu`` empty or 0 on one node (``num_gpus <= gpus_per_node``: no
      traffic leaves it): the cluster preset's line rate;
    - the expert columns of a mixture-of-experts row (:func:`assumed_expert_columns`);
    - ``mlp`` (not in CASES.md's schema) empty and ``ffn_hidden_size`` other than 4 x
      ``hidden_size``: ``swiglu``, a gated MLP of three weight matrices (:func:`gated_mlp`);
      a 4h-wide MLP stays ``gelu`` (two matrices), the default;
    - ``dropout`` (not in CASES.md's schema) empty on a gated-MLP row: 0, as the LLaMA-family
      recipes train (Touvron et al. 2023; Dubey et al. 2024; PaLM, Chowdhery et al. 2022, also
      without); other rows keep Megatron-LM's 0.1. It changes only what backward keeps (the
      masks) and the unfused attention core's dropout pass.

    Columns too bad to complete from are left as they are: building the case names them.
    """
    out, assumed = dict(row), {}

    def fill(key: str, value: Any) -> None:
        out[key] = str(value)
        assumed[key] = value

    def empty(key: str) -> bool:
        return not (out.get(key) or "").strip()

    for key, value in NEUTRAL_COLUMNS.items():
        if empty(key):
            fill(key, value)
    for key in _NAMES:  # names are lower case ("H100_80G", "BF16" name the same thing)
        if not empty(key):
            out[key] = out[key].strip().lower()
    try:
        _derive_shape(out, fill, empty)
        if empty("dp"):
            model_parallel = _field(out, "tp") * _field(out, "pp") * _field(out, "cp")
            if model_parallel > 0 and _field(out, "num_gpus") % model_parallel == 0:
                fill("dp", _field(out, "num_gpus") // model_parallel)
        rate = (out.get("scaleout_gbps_per_gpu") or "").strip()
        if (rate == "" or (_is_number(rate) and float(rate) == 0.0)) and \
                _field(out, "num_gpus") <= _field(out, "gpus_per_node"):
            preset = cluster_for(_field(out, "gpu"))["scaleout"]["bandwidth_GBps"]
            fill("scaleout_gbps_per_gpu", float(preset) * 8.0)
        for key, count in assumed_expert_columns(out).items():
            fill(key, count)
        if empty("mlp") and gated_mlp(out):
            fill("mlp", "swiglu")
        if empty("dropout") and out.get("mlp", "").strip().lower() == "swiglu":
            fill("dropout", 0.0)
    except InputError:
        pass
    return out, assumed


def _derive_shape(out: dict[str, str], fill: Callable[[str, Any], None],
                  empty: Callable[[str], bool]) -> None:
    """:func:`complete_row`'s model-shape columns: kv heads and the MLP width."""
    if empty("num_kv_heads") and not empty("num_heads"):
        fill("num_kv_heads", _field(out, "num_heads"))
    if empty("ffn_hidden_size") and not empty("hidden_size"):
        fill("ffn_hidden_size", 4 * _field(out, "hidden_size"))


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def build_case(row: dict[str, str], attention: str = "auto") -> tuple[Any, Any, Any]:
    """(ModelSpec, ParallelSpec, SystemSpec) of one case row, built by
    :func:`search.config.build.build_sections` like any composed config."""
    return build_sections(case_sections(row, attention))
