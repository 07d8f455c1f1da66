"""A study builds each trial's specs from the base config's groups as plain dicts (no copy of
the OmegaConf tree) when that is exact: the same specs, or the same infeasibility reason, as
copying the config, setting the trial's keys and building it; interpolated configs and keys
outside the spec groups take the copy path."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

from search.study.driver import prepare_search

CONF = Path(__file__).resolve().parents[3] / "conf"


def _cfg(tmp_path: Path, *overrides: str) -> DictConfig:
    with initialize_config_dir(config_dir=str(CONF), version_base=None):
        return compose("config", overrides=[f"search.output_dir={tmp_path}", *overrides])


def _both(evaluator, items):  # type: ignore[no-untyped-def]
    fast = evaluator._structural((), items)  # (): no config-group choice
    assert evaluator._resolved_with((), items) is not None  # the plain-dict path ran
    evaluator._built.clear()
    saved, evaluator._base_sections = evaluator._base_sections, {(): False}  # the copy path
    slow = evaluator._structural((), items)
    evaluator._built.clear()
    evaluator._base_sections = saved
    return fast, slow


def test_plain_dict_path_builds_what_the_config_copy_builds(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path, "search=gpt3_175b_1024_h100", "stack=megatron_lm")
    ev = prepare_search(cfg).evaluator
    rng = np.random.default_rng(0)
    grid = list(itertools.product((1, 2, 4, 8, 3), (1, 8, 16, 7), (1, 2, 3), (1, 2, 5),
                                  ("none", "selective", "full", "bad"), (0, 1, 3, 4),
                                  (True, False)))
    compared = invalid = 0
    for i in rng.permutation(len(grid))[:120].tolist():
        tp, pp, vp, mb, rc, zero, sp = grid[i]
        items = tuple(sorted({"parallel.tp": tp, "parallel.pp": pp, "parallel.vp": vp,
                              "parallel.micro_batch": mb, "parallel.recompute": rc,
                              "parallel.zero_stage": zero,
                              "parallel.sequence_parallel": sp}.items()))
        fast, slow = _both(ev, items)
        assert fast == slow, items
        compared += 1
        invalid += isinstance(fast, str)
    assert compared == 120 and 0 < invalid < 120  # valid plans and rejected values both seen
    # a key the preset leaves out, a list value, a workload key, an unknown key
    for items in ((("parallel.work_shares", (1.0, 2.0)), ("parallel.work_split", "explicit")),
                  (("workload.num_layers", 48),), (("parallel.not_a_field", 3),),
                  (("stack.kernel_efficiency", 0.9),)):
        fast, slow = _both(ev, items)
        assert fast == slow, items


def test_interpolated_config_and_other_keys_take_the_copy_path(tmp_path: Path) -> None:
    mixed = prepare_search(_cfg(tmp_path, "system=mixed_h100_a100", "workload=gpt_tiny",
                                "parallel.global_batch=16")).evaluator
    assert mixed._resolved_with((), (("parallel.tp", 2),)) is None  # num_gpus: ${pool_gpus:...}
    ev = prepare_search(_cfg(tmp_path, "workload=gpt_tiny", "system.num_gpus=8",
                             "parallel.global_batch=16")).evaluator
    for items in ((("fidelity", "astra"),), (("parallel.tp", "${parallel.pp}"),),
                  (("parallel.tp", np.int64(2)),), (("system.pools.0.count", 4),),
                  (("parallel.tp.x", 2),)):
        assert ev._resolved_with((), items) is None, items
    assert ev._resolved_with((), (("parallel.tp", 2),)) is not None
