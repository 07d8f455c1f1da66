"""Interleaved pipelines with micro-batch groups other than pp (Megatron-Core's
``microbatch_group_size_per_vp_stage``, ``parallel.microbatch_group``)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from simcore.api import simulate_batch
from simcore.errors import InputError
from simcore.specs.parallel import ParallelSpec
from simcore.specs.system import SystemSpec
from simcore.workloads.pipeline import stage_program, stage_program_arrays
from simcore.workloads.transformer.memory import footprint_bytes
from simcore.workloads.transformer.spec import ModelSpec

MODEL = ModelSpec(name="g", num_layers=16, hidden_size=2048, num_heads=16, seq_len=2048,
                  vocab_size=32000)
SYSTEM = [SystemSpec(num_gpus=4)]


@pytest.mark.parametrize(("pp", "vp", "m", "group"), [(4, 2, 6, 6), (4, 2, 8, 8), (4, 3, 12, 6),
                                                      (2, 2, 3, 3), (4, 2, 8, 4), (4, 2, 10, 6),
                                                      (4, 3, 13, 9)])
def test_every_stage_runs_each_pass_once_backward_after_forward(pp: int, vp: int, m: int,
                                                                group: int) -> None:
    """A chunk runs ``group`` micro-batches in a row (the last group: what is left, as
    Megatron-Core's schedule table); each (micro-batch, chunk) is run forward and backward
    exactly once per stage, the backward after the forward, and the first
    ``2 (pp - s - 1) + (vp - 1) group`` passes are forwards (Megatron-Core's warm-up)."""
    for s in range(pp):
        program = stage_program(s, pp, vp, m, group)
        fwd_at = {(op.micro_batch, op.chunk): i for i, op in enumerate(program) if op.forward}
        bwd_at = {(op.micro_batch, op.chunk): i for i, op in enumerate(program) if not op.forward}
        every = {(b, c) for b in range(m) for c in range(vp)}
        assert set(fwd_at) == set(bwd_at) == every and len(program) == 2 * m * vp
        assert all(bwd_at[key] > fwd_at[key] for key in every)
        warmup = min(2 * (pp - s - 1) + (vp - 1) * group, m * vp)
        first_backward = next(i for i, op in enumerate(program) if not op.forward)
        assert first_backward == (warmup + 1 if warmup < m * vp else warmup)
        forwards = [(op.micro_batch, op.chunk) for op in program if op.forward]
        assert forwards[:group] == [(b, 0) for b in range(group)]
        rest = m % group  # the last group runs its micro-batches through every chunk in turn
        if rest:
            tail = forwards[len(forwards) - rest * vp:]
            assert tail == [(m - rest + b, c) for c in range(vp) for b in range(rest)]
        fwd, mb, chunk = stage_program_arrays(s, pp, vp, m, group)
        assert fwd.tolist() == [op.forward for op in program]
        assert mb.tolist() == [op.micro_batch for op in program]
        assert chunk.tolist() == [op.chunk for op in program]


def _run(par: ParallelSpec):  # type: ignore[no-untyped-def]
    return simulate_batch(MODEL, par, SYSTEM)


def test_a_group_of_all_micro_batches_runs_a_count_pp_does_not_divide() -> None:
    """6 micro-batches on 4 stages: Megatron-LM's schedule cannot run them, a group of 6 can,
    with the interleaved bubble of about (p - 1) / (v m) of the ideal time (Narayanan et al.
    2021, Sec. 2.2.2)."""
    par = ParallelSpec(pp=4, vp=2, global_batch=6)
    with pytest.raises(InputError) as err:
        par.resolve(4)
    assert err.value.key == "parallel.global_batch"
    grouped = _run(replace(par, microbatch_group=6))
    assert grouped.feasible[0]
    ideal = float(grouped.iteration_time_s[0] - grouped.bubble_s[0])
    assert grouped.bubble_s[0] / ideal == pytest.approx(3 / (2 * 6), rel=0.35)
    one_f_one_b = _run(ParallelSpec(pp=4, global_batch=6))  # vp 1: bubble (p - 1) / m
    assert grouped.bubble_s[0] < one_f_one_b.bubble_s[0]


def test_larger_groups_keep_the_bubble_and_hold_more_forwards() -> None:
    """With 8 micro-batches on 4 stages, groups of 4 and 8 idle alike (a group of at least pp
    keeps the pipeline full); the larger group starts more forwards before the first
    backward, so stage 0 holds 2 (p - 1) + (v - 1) g + 1 chunks: 11 against 15."""
    base = ParallelSpec(pp=4, vp=2, global_batch=8)
    four, eight = _run(base), _run(replace(base, microbatch_group=8))
    assert eight.iteration_time_s[0] == pytest.approx(four.iteration_time_s[0], rel=0.01)
    assert four.bubble_s[0] > 0
    acts = [footprint_bytes(MODEL, replace(base, microbatch_group=g).resolve(4), 0)
            ["activations"] for g in (0, 8)]
    assert np.isclose(acts[1] / acts[0], 15 / 11, rtol=1e-9)


def test_a_last_group_of_at_least_pp_runs() -> None:
    """10 micro-batches in groups of 6: a last group of 4 (Megatron-Core accepts a remainder
    of at least pp), feasible, with a smaller bubble than 1F1B's."""
    grouped = _run(ParallelSpec(pp=4, vp=2, global_batch=10, microbatch_group=6))
    assert grouped.feasible[0]
    assert grouped.bubble_s[0] < _run(ParallelSpec(pp=4, global_batch=10)).bubble_s[0]


@pytest.mark.parametrize(("group", "batch", "words"), [
    (2, 8, "integer >= pp=4"),
    (8, 10, "last group of 0 or at least pp=4 (10 mod 8 = 2)"),
    (16, 12, "at most the micro-batches per replica (12)"),
])
def test_bad_groups_name_the_key(group: int, batch: int, words: str) -> None:
    with pytest.raises(InputError) as err:
        ParallelSpec(pp=4, vp=2, global_batch=batch, microbatch_group=group).resolve(4)
    assert err.value.key == "parallel.microbatch_group" and words in str(err.value)


def test_a_group_without_interleaving_is_refused_not_ignored() -> None:
    with pytest.raises(InputError) as err:
        ParallelSpec(pp=4, global_batch=8, microbatch_group=8)
    assert err.value.key == "parallel.microbatch_group" and "vp > 1" in str(err.value)
