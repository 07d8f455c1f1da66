"""Memory footprint against Korthikanti et al. 2022 (reference/peers-hardware-measurements.md B.3).

Golden numbers: Fig. 1 (GiB per GPU: params+optimizer; activations without recompute and with
sequence parallelism + selective recompute) and Fig. 7 (activation % of the no-recompute
baseline), as quoted in the reference. Configs: Table 3 / Calculon's validation (DP = 1).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest

from simcore.workloads.transformer.memory import footprint_bytes, layers_in_stage

GIB = 2**30


@dataclass(frozen=True)
class Model:
    """The ModelLike attributes (a GPT block: MHA, GELU MLP of 4h)."""

    num_layers: int
    hidden_size: int
    num_heads: int
    seq_len: int = 2048
    vocab_size: int = 51200
    mlp: str = "gelu"
    num_experts: int = 1
    top_k: int = 1
    shared_ffn_hidden_size: int = 0
    dropout: float = 0.1  # Megatron-LM's default, as in the measured runs
    kv_lora_rank: int = 0  # standard attention, not latent
    q_lora_rank: int = 0
    qk_rope_head_dim: int = 64

    @property
    def kv_heads(self) -> int:
        return self.num_heads

    @property
    def is_mla(self) -> bool:
        return False

    @property
    def qk_head_dim(self) -> int:
        return self.hidden_size // self.num_heads

    @property
    def value_head_dim(self) -> int:
        return self.hidden_size // self.num_heads

    @property
    def ffn(self) -> int:
        return 4 * self.hidden_size

    @property
    def attention_params(self) -> int:
        return 4 * self.hidden_size**2

    @property
    def expert_params(self) -> int:
        return 8 * self.hidden_size**2

    @property
    def dense_params(self) -> int:
        return self.attention_params + self.expert_params


@dataclass(frozen=True)
class Plan:
    """The ParallelLike attributes."""

    tp: int
    pp: int
    micro_batch: int
    global_batch: int
    vp: int = 1
    cp: int = 1
    ep: int = 1
    sequence_parallel: bool = False
    flash_attention: bool = False  # Korthikanti et al. measured Megatron's unfused core
    recompute: str = "none"
    zero_stage: int = 0
    precision: str = "fp16"
    dp_size: int = 1


# name: (model, plan, params+opt GiB, activations GiB none, activations GiB SP+selective)
CASES = {
    "22b": (Model(48, 6144, 64), Plan(8, 1, 4, 4), 45.5625, 59.25, 9.5625),
    "175b": (Model(96, 12288, 96), Plan(8, 8, 1, 64, vp=3), 45.5625, 66.84375, 12.3515625),
    "530b": (Model(105, 20480, 128), Plan(8, 35, 1, 280, vp=3), 31.640625, 114.0234375,
             23.076171875),
    "1t": (Model(128, 25600, 160), Plan(8, 64, 1, 512), 32.958984375, 131.25, 26.5625),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_params_and_optimizer_within_5pct(name: str) -> None:
    model, plan, golden, _, _ = CASES[name]
    stage = 0 if plan.pp == 1 else 1  # the figure counts transformer layers (no embedding)
    fp = footprint_bytes(model, plan, stage)
    got = (fp["weights"] + fp["gradients"] + fp["optimizer"]) / GIB
    assert got == pytest.approx(golden, rel=0.05)


@pytest.mark.parametrize("name", sorted(CASES))
def test_activations_without_and_with_sp_selective_within_5pct(name: str) -> None:
    model, plan, _, none_gib, sel_gib = CASES[name]
    base = footprint_bytes(model, plan, 0)["activations"] / GIB
    sp_sel = replace(plan, sequence_parallel=True, recompute="selective")
    sel = footprint_bytes(model, sp_sel, 0)["activations"] / GIB
    assert base == pytest.approx(none_gib, rel=0.05)
    assert sel == pytest.approx(sel_gib, rel=0.05)


@pytest.mark.parametrize(
    ("name", "fig7"),
    [("22b", (100, 66.84, 49.42, 16.18, 7.64)), ("175b", (100, 62.04, 56.53, 18.49, 8.71))],
)
def test_activation_fractions_fig7(name: str, fig7: tuple[float, ...]) -> None:
    model, plan, _, _, _ = CASES[name]
    modes = [(False, "none"), (True, "none"), (False, "selective"), (True, "selective"),
             (False, "full")]
    acts = [footprint_bytes(model, replace(plan, sequence_parallel=sp, recompute=rc), 0)
            ["activations"] for sp, rc in modes]
    for got, want in zip(acts, fig7, strict=True):
        assert 100 * got / acts[0] == pytest.approx(want, rel=0.05)


@pytest.mark.parametrize("sp", [False, True])
def test_a_model_without_dropout_keeps_no_masks(sp: bool) -> None:
    """Korthikanti et al.'s per-layer terms hold three 1-byte dropout masks (``sbh`` after
    attention and after the MLP, ``a s^2 b`` over the scores) and the 2-byte dropout output of
    the scores (``2 a s^2 b``); at dropout 0 PyTorch's dropout returns its input, so a layer
    keeps ``sbh (2 + 3as/h)`` bytes less (``/ t`` where sharded: the scores always, the
    block-output masks with sequence parallelism)."""
    model, plan, _, _, _ = CASES["22b"]
    plan = replace(plan, sequence_parallel=sp)
    without = replace(model, dropout=0.0)
    per_layer_mb = layers_in_stage(model.num_layers, plan.pp, 0) * plan.micro_batch
    sbh = model.seq_len * model.hidden_size  # elements per sample (Korthikanti's sbh / b)
    t, a, s, h = plan.tp, model.num_heads, model.seq_len, model.hidden_size
    masks = sbh * (2.0 / (t if sp else 1) + 3.0 * a * s / (h * t))
    drop = footprint_bytes(model, plan, 0)["activations"] - footprint_bytes(
        without, plan, 0)["activations"]
    assert drop == pytest.approx(per_layer_mb * masks, rel=1e-9)
    # a fused flash core keeps no scores at all: only the two block-output masks go
    flash = replace(plan, flash_attention=True)
    drop_flash = footprint_bytes(model, flash, 0)["activations"] - footprint_bytes(
        without, flash, 0)["activations"]
    assert drop_flash == pytest.approx(per_layer_mb * sbh * 2.0 / (t if sp else 1), rel=1e-9)


def test_1f1b_stages_hold_fewer_microbatches_downstream_and_zero_shards() -> None:
    model, plan, _, _, _ = CASES["1t"]
    acts = [footprint_bytes(model, plan, i)["activations"] for i in (1, 10, 40)]
    assert acts[0] > acts[1] > acts[2]
    dp8 = replace(plan, dp_size=8, global_batch=4096)
    z0, z1, z3 = (footprint_bytes(model, replace(dp8, zero_stage=z), 1) for z in (0, 1, 3))
    assert z1["optimizer"] == pytest.approx(z0["optimizer"] / 8, rel=1e-6)
    assert z1["gradients"] == z0["gradients"]
    assert z3["weights"] == pytest.approx(z0["weights"] / 8, rel=1e-6)
    assert z0["total"] == sum(v for k, v in z0.items() if k != "total")


def test_full_recompute_has_workspace_and_uneven_layers() -> None:
    model, plan, _, _, _ = CASES["22b"]
    fp = footprint_bytes(model, replace(plan, recompute="full"), 0)
    assert fp["recompute_workspace"] > 0
    assert [layers_in_stage(10, 4, i) for i in range(4)] == [3, 3, 2, 2]


def test_check_memory_masks_systems_that_do_not_fit() -> None:
    from simcore.hardware.batch import SystemBatch
    from simcore.memory import check_memory
    from simcore.specs.system import AcceleratorSpec, SystemSpec

    model, plan, _, _, _ = CASES["175b"]  # ~112 GiB without recompute: fits neither
    small = SystemSpec(accelerator=AcceleratorSpec(name="a100_40g", hbm_capacity_gib=40.0))
    big = SystemSpec(accelerator=AcceleratorSpec(name="big", hbm_capacity_gib=192.0))
    fits, peak, reasons = check_memory(model, plan, SystemBatch.from_specs([small, big]))
    assert fits.tolist() == [False, True]
    assert peak[0] == peak[1] > 100
    assert reasons[0].startswith("out of memory: stage 0") and reasons[1] == ""


def test_flash_attention_stores_no_attention_scores() -> None:
    model, plan, _, _, _ = CASES["22b"]
    flash = footprint_bytes(model, replace(plan, flash_attention=True), 0)["activations"]
    selective = footprint_bytes(model, replace(plan, recompute="selective"), 0)["activations"]
    assert flash == selective
