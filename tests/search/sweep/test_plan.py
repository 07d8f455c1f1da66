"""Sweep planning on the project's conf/: axis kinds, per-point specs, hashes (search/sweep/plan.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from omegaconf import OmegaConf

from search.config.build import build_specs
from search.run.batch import materialize_systems
from search.sweep.driver import iter_batches, prepare_output
from search.sweep.plan import _sha, format_value
from simcore.errors import InputError

CONF = Path(__file__).resolve().parents[3] / "conf"

AXES = ("system=dgx_a100_80g,dgx_h100_80g", "system.scaleout.bandwidth_GBps=25,100",
        "system.accelerator.hbm_bandwidth_GBps=1500,2039")


def test_hardware_axes_are_replaced_and_equal_a_full_composition_per_point(plan_for):
    plan = plan_for("system.num_gpus=64", "parallel.tp=2", *AXES)
    assert plan.num_points == 8 and len(plan.combos) == 2
    assert plan.hardware == {"system.scaleout.bandwidth_GBps": "scaleout.bandwidth_GBps",
                             "system.accelerator.hbm_bandwidth_GBps":
                                 "accelerator.hbm_bandwidth_GBps"}
    assert plan.columns["system.scaleout.bandwidth_GBps"].dtype == np.float64  # float field
    from search.config.compose import compose_session

    compose = compose_session(CONF)[0]
    seen = 0
    for batch in iter_batches(plan, 3, np.zeros(0, dtype=np.int64)):
        systems, errors = materialize_systems(batch)
        assert errors == [""] * batch.size
        for pid, system in zip(batch.point_ids.tolist(), systems, strict=True):
            point = [f"{k}={format_value(plan.columns[k][pid])}" for k in plan.columns]
            model, parallel, full = build_specs(
                compose(["system.num_gpus=64", "parallel.tp=2", *point]))
            assert (model, parallel, system) == (batch.model, batch.parallel, full)
            seen += 1
    assert seen == 8


def test_structural_system_keys_are_composed_per_value(plan_for):
    plan = plan_for("system.num_gpus=8,16", "system.scaleout.bandwidth_GBps=25,50")
    assert list(plan.hardware) == ["system.scaleout.bandwidth_GBps"]
    assert sorted(c.system.num_gpus for c in plan.combos) == [8, 16]


def test_point_and_sweep_hashes_are_stable_and_distinct(plan_for):
    one = plan_for(*AXES)
    two = plan_for(*AXES)
    assert one.point_hash == two.point_hash and len(set(one.point_hash)) == 8
    assert one.sweep_hash == two.sweep_hash
    assert plan_for(*AXES[:2]).sweep_hash != one.sweep_hash


@pytest.mark.parametrize(("axis", "key", "value", "rule"), [
    ("system.scaleout.bandwidth_GBps=-5,10", "system.scaleout.bandwidth_GBps", -5.0, "> 0"),
    ("system.scaleout.latency_ns=-1,5,-3", "system.scaleout.latency_ns", -3.0, ">= 0"),
    ("system.calibration.hbm_efficiency=0.5,1.5", "system.calibration.hbm_efficiency", 1.5,
     "fraction"),
    ("system.accelerator.hbm_bandwidth_GBps=interval(-10,-1)",
     "system.accelerator.hbm_bandwidth_GBps", None, "> 0"),
])
def test_a_bad_swept_value_fails_before_any_work(plan_for, axis, key, value, rule):
    """Values of a listed leaf are checked as one column; the first bad value (in sorted
    order) gets the spec's own error, as when each value was checked by a copy."""
    with pytest.raises(InputError) as err:
        plan_for(axis, *(("sweep.mode=random", "sweep.num_points=50") if "interval" in axis
                         else ()))
    assert err.value.key == key and rule in err.value.rule
    if value is not None:
        assert err.value.value == value


def test_command_line_axes_replace_the_default_file_unless_it_is_chosen(plan_for):
    default = plan_for()
    axes = OmegaConf.load(CONF / "sweep" / "default.yaml")["axes"]  # values as written
    size = 1
    for value in axes.values():  # the default file's grid: a comma list is an axis
        size *= len(str(value).split(","))
    assert default.num_points == size > 1 and default.base_cfg.system.num_gpus == 64
    cli_only = plan_for("parallel.tp=1,2")
    assert cli_only.num_points == 2 and cli_only.base_cfg.system.num_gpus == 8
    chosen = plan_for("sweep=default", "parallel.tp=1,2")  # file axes, tp replaced
    tp_values = len(str(axes["parallel.tp"]).split(","))
    assert chosen.num_points == 2 * size // tp_values and chosen.base_cfg.system.num_gpus == 64


def test_resume_refuses_a_folder_holding_another_sweep(plan_for, tmp_path):
    first = plan_for("parallel.tp=1,2", f"sweep.output_dir={tmp_path}")
    prepare_output(first, first.base_cfg)
    with pytest.raises(InputError, match="already holds a sweep"):
        prepare_output(first, first.base_cfg)
    other = plan_for("parallel.tp=1,4", f"sweep.output_dir={tmp_path}", "sweep.resume=true")
    with pytest.raises(InputError, match="different sweep"):
        prepare_output(other, other.base_cfg)
    again = plan_for("parallel.tp=1,2", f"sweep.output_dir={tmp_path}", "sweep.resume=true")
    out, manifest = prepare_output(again, again.base_cfg)
    assert out == tmp_path and manifest["num_points"] == 2
    assert OmegaConf.load(tmp_path / "config.yaml").parallel.tp == 1


def test_random_mode_draws_seeded_points_including_structural_axes(plan_for):
    args = ("sweep.mode=random", "sweep.num_points=40", "sweep.seed=3", "parallel.tp=1,2",
            "system.scaleout.bandwidth_GBps=interval(25,400)",
            "system.accelerator.peak_tflops_bf16=int(interval(300,1000))")
    one, two = plan_for(*args), plan_for(*args)
    assert one.num_points == 40 and one.point_hash == two.point_hash
    bw = one.columns["system.scaleout.bandwidth_GBps"]
    assert bw.dtype == np.float64 and bw.min() >= 25 and bw.max() <= 400
    peak = one.columns["system.accelerator.peak_tflops_bf16"]
    assert peak.dtype == np.float64 and np.all(peak == np.round(peak))  # int draws, float field
    assert sorted({c.parallel.tp for c in one.combos}) == [1, 2]
    assert plan_for(*args[:2], "sweep.seed=4", *args[3:]).point_hash != one.point_hash


def test_sobol_mode_plans_the_points_of_its_design(plan_for):
    """sweep.mode=sobol reaches make_plan: the same seed gives the same points, the mode is
    part of the sweep's identity (a random sweep of the same axes is another sweep)."""
    from search.sweep.space import parse_overrides, sample_sobol

    args = ("sweep.num_points=64", "sweep.seed=2", "system.scaleout.bandwidth_GBps=interval(25,400)",
            "system.accelerator.hbm_bandwidth_GBps=interval(1500,3500)")
    one, two = plan_for("sweep.mode=sobol", *args), plan_for("sweep.mode=sobol", *args)
    assert one.num_points == 64 and one.point_hash == two.point_hash
    want = sample_sobol(parse_overrides(list(args[2:]), {}, lambda _: []).axes, 64, 2)
    for key, col in want.items():
        assert one.columns[key].tolist() == col.tolist()
    assert set(one.hardware) == set(want)
    assert plan_for("sweep.mode=random", *args).sweep_hash != one.sweep_hash


def test_fidelity_axis_splits_batches_and_reaches_the_simulator(plan_for):
    """A sweep over ``fidelity`` evaluates each point in the mode it names (not always calibrated)."""
    from search.run.batch import evaluate_batch
    from simcore.api import simulate_batch

    plan = plan_for("system.num_gpus=16", "parallel.tp=2", "parallel.pp=2",
                    "parallel.global_batch=16", "workload=gpt_tiny", "system=dgx_a100_80g",
                    "fidelity=calibrated,astra")
    assert plan.num_points == 2 and len({c.batch_key for c in plan.combos}) == 2
    times = {}
    for batch in iter_batches(plan, 8, np.zeros(0, dtype=np.int64)):
        cols = evaluate_batch(batch)
        assert cols["feasible"].all()
        times[batch.fidelity] = float(cols["iteration_time_s"][0])
        combo = next(c for c in plan.combos if c.fidelity == batch.fidelity)
        direct = simulate_batch(combo.model, combo.parallel, [combo.system], batch.fidelity)
        assert times[batch.fidelity] == float(direct.iteration_time_s[0])
    assert set(times) == {"calibrated", "astra"} and times["astra"] != times["calibrated"]


def test_the_terminal_names_the_fixed_keys_and_the_sweep_file_entries_left_out(plan_for):
    file_axes = OmegaConf.load(CONF / "sweep" / "default.yaml")["axes"]
    plan = plan_for("parallel.tp=1,2")
    assert "parallel.tp" not in plan.fixed_values
    assert plan.fixed_values["system.num_gpus"] == str(plan.base_cfg.system.num_gpus)
    assert plan.unused_file_axes == {k: str(v) for k, v in file_axes.items() if k != "parallel.tp"}
    note = plan.fixed_note()
    assert f"system.num_gpus={plan.base_cfg.system.num_gpus}" in note
    assert f"system.num_gpus={file_axes['system.num_gpus']}" in note and "sweep=default" in note
    chosen = plan_for("sweep=default", "parallel.tp=1,2")
    assert chosen.unused_file_axes == {} and "not used" not in chosen.fixed_note()


def test_the_fixed_line_leaves_out_what_a_config_group_axis_sets_and_shows_it_per_choice(plan_for):
    plan = plan_for("system.num_gpus=64", "parallel.global_batch=64",
                    "parallel=megatron_tp8_pp8,default")
    assert "parallel.pp" not in plan.fixed_values and "parallel.tp" not in plan.fixed_values
    assert plan.fixed_values["parallel.global_batch"] == "64"  # set on the command line
    assert plan.per_group_values["parallel.pp"] == {"parallel=megatron_tp8_pp8": "8",
                                                    "parallel=default": "1"}
    note = plan.fixed_note()
    assert "parallel.pp=1" not in note.splitlines()[0]
    assert "parallel=megatron_tp8_pp8: parallel.tp=8, parallel.pp=8" in note
    alike = plan_for("system.num_gpus=64", "parallel.pp=2", "parallel=megatron_tp8_pp8,default")
    assert alike.fixed_values["parallel.pp"] == "2" and "parallel.pp" not in alike.per_group_values


def test_an_unknown_key_added_with_plus_as_an_axis_is_named_unknown_with_the_known_keys(plan_for):
    with pytest.raises(InputError) as err:  # not Hydra's advice to type what was typed
        plan_for("+parallel.foo=1,2")
    assert err.value.key == "parallel.foo" and "unknown key" in err.value.rule
    assert "tp, pp" in err.value.rule and "+parallel.foo" not in err.value.rule


DIMS = ("system.num_gpus=64", "system.gpus_per_node=2",
        "+system.scaleout_dims=[{kind: FullyConnected, size: 8, bandwidth_GBps: 100, latency_ns: "
        "500}, {kind: Switch, size: 4, bandwidth_GBps: 50, latency_ns: 2000}]")


DIMS_A = "[{kind: FullyConnected, size: 8, bandwidth_GBps: 100, latency_ns: 500}, " \
    "{kind: Switch, size: 4, bandwidth_GBps: 50, latency_ns: 2000}]"
DIMS_B = "[{kind: Ring, size: 4, bandwidth_GBps: 25, latency_ns: 700}, " \
    "{kind: Switch, size: 8, bandwidth_GBps: 5, latency_ns: 3000}]"


def test_an_axis_of_dimension_lists_composes_each_point_as_its_value_given_alone(plan_for):
    """Each value of a list-of-dictionaries axis is one whole ``scaleout_dims``; a point's
    column text, written back as an override, composes the same system as the value typed
    alone (it was written back as a quoted string of Python's repr, which no spec takes)."""
    from search.config.compose import compose_session

    compose = compose_session(CONF)[0]
    base = ("system.num_gpus=64", "system.gpus_per_node=2")
    plan = plan_for(*base, f"+system.scaleout_dims={DIMS_A},{DIMS_B}")
    assert plan.num_points == 2 and len(plan.combos) == 2
    for pid, typed in enumerate((DIMS_A, DIMS_B)):
        alone = build_specs(compose([*base, f"+system.scaleout_dims={typed}"]))[2]
        system = plan.combos[int(plan.combo_of[pid])].system
        assert system == alone and len(system.scaleout_dims) == 2
        text = format_value(plan.columns["system.scaleout_dims"][pid])
        assert build_specs(compose([*base, f"+system.scaleout_dims={text}"]))[2] == alone
    kinds = [c.system.scaleout_dims[0].kind for c in plan.combos]
    assert sorted(kinds) == ["FullyConnected", "Ring"]


@pytest.mark.parametrize(("value", "text"), [
    ({"kind": "Ring", "size": 4}, "{kind:Ring,size:4}"),
    ([{"a": 1.5}, {"b": [1, 2]}], "[{a:1.5},{b:[1,2]}]"),
    ({"name": "two words"}, "{name:'two words'}"),
])
def test_format_value_writes_lists_and_dictionaries_in_hydra_grammar(value, text):
    assert format_value(value) == text


def test_format_value_refuses_a_dictionary_key_hydra_cannot_take():
    with pytest.raises(InputError, match="plain name"):
        format_value({"two words": 1})


def test_an_axis_index_beyond_the_scaleout_dims_names_the_key_the_index_and_the_count(plan_for):
    with pytest.raises(InputError) as err:
        plan_for(*DIMS, "system.scaleout_dims.2.bandwidth_GBps=5,50")
    assert err.value.key == "system.scaleout_dims.2.bandwidth_GBps"
    assert err.value.rule == "index 2 out of range: system.scaleout_dims has 2 entries (indices 0-1)"


@pytest.mark.parametrize(("axes", "key", "rule", "where"), [
    (("workload=gpt_1b,resnet50", "workload.num_layers=12,24"), "workload.num_layers",
     "workload has no key 'num_layers'; its keys: family, name, depth", "workload=resnet50"),
    (("system=dgx_h100_80g,mixed_h100_a100", "system.num_gpus=64"), "system.pools",
     "pool counts must sum to num_gpus=64", "system=mixed_h100_a100")])
def test_a_bad_combination_names_the_config_group_choice_that_caused_it(plan_for, axes, key, rule,
                                                                       where):
    with pytest.raises(InputError) as err:
        plan_for(*axes)
    assert err.value.key == key and err.value.rule.startswith(rule)
    assert err.value.rule.endswith(f"(with {where})")


@pytest.mark.parametrize("axis", ["workload.num_layers=24,100000", "system.num_gpus=8,1000000"])
def test_an_axis_value_beyond_a_resource_limit_is_refused_before_any_work(plan_for, axis):
    key, values = axis.split("=")
    with pytest.raises(InputError, match=r"\(limit graph_") as err:
        plan_for(axis)
    assert err.value.key == key and err.value.value == int(values.split(",")[1])


def test_point_hashes_follow_their_definition_value_by_value():
    """A point's hash is sha1("<combination config hash>|<repr of each hardware value>")[:16]
    (folders written earlier resume on it), also for values a table of distinct values could
    merge: 0.0 and -0.0, NaN, ints beside floats, strings."""
    import hashlib
    from types import SimpleNamespace

    from search.sweep.plan import _point_hashes

    combos = [SimpleNamespace(config_hash="c0"), SimpleNamespace(config_hash="c1")]
    combo_of = np.array([0, 1, 0, 1, 0, 1])
    floats = np.array([0.0, -0.0, np.nan, 1e-300, 2.5, 0.0])
    ints = np.array([3, 3, -7, 2**40, 0, 3])
    names = np.array(["a", "b|c", "a", "", "é", "a"], dtype=object)
    got = _point_hashes(combos, combo_of, [floats, ints, names])  # type: ignore[arg-type]
    want = [hashlib.sha1(f"c{c}|{f!r}|{i!r}|{s!r}".encode()).hexdigest()[:16]
            for c, f, i, s in zip(combo_of.tolist(), floats.tolist(), ints.tolist(),
                                  names.tolist(), strict=True)]
    assert got == want and len(set(got)) == 6
    zero, minus_zero = (_point_hashes(combos[:1], np.zeros(1, dtype=np.int64),  # type: ignore[arg-type]
                                      [np.array([v])]) for v in (0.0, -0.0))
    assert zero != minus_zero
    alone = _point_hashes(combos, combo_of[:2], [])  # type: ignore[arg-type]
    assert alone == [hashlib.sha1(f"c{c}|".encode()).hexdigest()[:16] for c in (0, 1)]


def test_point_hashes_are_the_same_whatever_the_chunk(monkeypatch):
    """Hashes are made a chunk of points at a time; chunks of 4 over 6 points (the last one
    short) give the hashes of one chunk."""
    from types import SimpleNamespace

    import search.sweep.plan as plan_module

    combos = [SimpleNamespace(config_hash="c0"), SimpleNamespace(config_hash="c1")]
    combo_of = np.array([0, 1, 0, 1, 0, 1])
    cols = [np.array([0.0, -0.0, np.nan, 1e-300, 2.5, 0.0]), np.array([3, 3, -7, 2**40, 0, 3])]
    whole = plan_module._point_hashes(combos, combo_of, cols)  # type: ignore[arg-type]
    monkeypatch.setattr(plan_module, "_HASH_CHUNK", 4)
    assert plan_module._point_hashes(combos, combo_of, cols) == whole  # type: ignore[arg-type]
    assert plan_module._point_hashes(combos, combo_of, []) == [  # type: ignore[arg-type]
        plan_module._point_hashes(combos, combo_of[i:i + 1], [])[0] for i in range(6)]


def test_structural_combinations_equal_a_full_composition_each():
    """Combinations are composed once per config group choice and their plain values applied
    to a copy (search.config.compose.with_value_overrides): each equals Hydra's composition of
    all its overrides, config and built specs alike."""
    from search.config.compose import compose_session
    from search.sweep.plan import make_plan

    compose, options = compose_session(CONF)
    calls = []

    def counted(overrides):
        calls.append(tuple(overrides))
        return compose(overrides)

    plan = make_plan(counted, options, ["sweep.progress=false", "system.num_gpus=64",
                                        "workload=gpt_1b,gpt_tiny", "parallel.tp=1,2",
                                        "parallel.micro_batch=1,4", "parallel.recompute=none,full"])
    assert len(plan.combos) == 16
    assert len(calls) <= 4  # the fixed overrides (and the sweep file's), one per workload
    _check_against_full_compositions(plan, compose)
    calls.clear()  # one workload: every combination from the base's plain spec groups
    plan = make_plan(counted, options, ["sweep.progress=false", "system.num_gpus=64",
                                        "parallel.tp=1,2", "parallel.micro_batch=1,4",
                                        "parallel.recompute=none,full"])
    assert len(plan.combos) == 8 and len(calls) <= 2
    assert all(c.cfg is None for c in plan.combos)  # none was composed
    _check_against_full_compositions(plan, compose)


def _check_against_full_compositions(plan, compose):
    """Each combination equals Hydra's composition of all its overrides: the config (when the
    combination kept one), the built specs, and the hashes points and batches are keyed by."""
    from search.sweep.plan import _sim_config_hash, _structure

    for combo in plan.combos:
        full = compose(combo.overrides)
        if combo.cfg is not None:
            assert OmegaConf.to_yaml(combo.cfg) == OmegaConf.to_yaml(full)
            assert (OmegaConf.to_yaml(combo.cfg, resolve=True)
                    == OmegaConf.to_yaml(full, resolve=True))
        model, parallel, system = build_specs(full)
        assert (combo.model, combo.parallel, combo.system) == (model, parallel, system)
        assert combo.fidelity == str(full.get("fidelity", "calibrated"))
        assert combo.config_hash == _sim_config_hash(full, combo.fidelity)
        key = _structure(model, parallel, system)
        assert combo.batch_key == _sha(f"{model!r}|{parallel!r}|{key}|{combo.fidelity}")


def test_a_structural_value_the_schema_refuses_names_its_key(plan_for):
    with pytest.raises(InputError, match="parallel.tp"):
        plan_for("parallel.tp=2,abc")
    with pytest.raises(InputError, match="parallel.no_such_key"):
        plan_for("parallel.no_such_key=1,2")


@pytest.mark.parametrize(("axis", "key", "value"), [
    ("parallel.tp=2,abc", "parallel.tp", "abc"),
    ("parallel.tp=2,4.5", "parallel.tp", 4.5),
    ("parallel.tp=abc,2", "parallel.tp", "abc"),
    ("system.scaleout.bandwidth_GBps=25,fast", "system.scaleout.bandwidth_GBps", "fast"),
    ("system.scaleout.bandwidth_GBps=25,true", "system.scaleout.bandwidth_GBps", True),
    ("parallel.sequence_parallel=true,maybe", "parallel.sequence_parallel", "maybe"),
])
def test_an_axis_of_mixed_kinds_names_the_offending_value(plan_for, axis, key, value):
    """The values of such an axis share one column type (text, floats); the error names the
    value as written, not its converted first value ('2', 2.0, 'True')."""
    with pytest.raises(InputError) as err:
        plan_for(axis)
    assert err.value.key == key
    assert err.value.value == value and type(err.value.value) is type(value)
    assert f"{key}={value!r}: " in str(err.value)


def test_a_scaleout_axis_beside_scaleout_dims_is_refused(plan_for):
    """With scale-out dims the scale-out fabric is their fold: a swept value there would be
    replaced in a full composition but kept by the batch, so the sweep refuses it."""
    dims = ("+system.scaleout_dims=[{kind:Ring,size:2,bandwidth_GBps:100,latency_ns:500},"
            "{kind:Switch,size:4,bandwidth_GBps:50,latency_ns:1000}]")
    with pytest.raises(InputError, match="system.scaleout.bandwidth_GBps=.*scaleout_dims"):
        plan_for("system.num_gpus=64", dims, "system.scaleout.bandwidth_GBps=25,400")
    plan = plan_for("system.num_gpus=64", dims, "system.accelerator.hbm_bandwidth_GBps=1500,2039")
    assert plan.num_points == 2 and plan.combos[0].system.scaleout.bandwidth_GBps == 150


def test_a_listed_leaf_never_changes_the_structure_key():
    """make_plan treats an axis on a leaf listed in FIELD_RANGES (on a system without pools)
    as a hardware axis without computing the structure key per value: that holds only while
    the key ignores those leaves. Each listed leaf set to another valid value keeps the key."""
    from dataclasses import replace

    from simcore.api import structure_key
    from simcore.specs.parallel import ParallelSpec
    from simcore.specs.system import FIELD_RANGES, SystemSpec
    from simcore.workloads.transformer.spec import ModelSpec

    model, par = ModelSpec(name="m", num_layers=4), ParallelSpec(tp=2, pp=2, global_batch=16)
    base = SystemSpec(num_gpus=16)
    key = structure_key(model, par, base)
    checked = 0
    for head in ("accelerator", "scaleup", "scaleout", "calibration"):
        sub = getattr(base, head)
        for name, (low, _, high, _) in FIELD_RANGES[type(sub)].items():
            value = 0.5 * (low + high) if high < float("inf") else low + 1.5
            system = replace(base, **{head: replace(sub, **{name: value})})
            assert getattr(getattr(system, head), name) == value != getattr(sub, name)
            assert structure_key(model, par, system) == key, (head, name)
            checked += 1
    assert checked == sum(len(FIELD_RANGES[type(getattr(base, h))])
                          for h in ("accelerator", "scaleup", "scaleout", "calibration")) > 30


def test_a_sweep_counts_its_points_on_piece_costed_overlap_plans(plan_for):
    axes = ("system.scaleout.bandwidth_GBps=range(25,401,25)",
            "system.scaleup.bandwidth_GBps=range(150,901,50)")
    both = plan_for("system.num_gpus=64", "parallel.tp=2", "parallel.cp=1,2",
                    "parallel.tp_comm_overlap=true,false", *axes)  # 4 plans x 256 points
    assert both.piece_overlap_points() == 768  # all but no overlap at cp 1
    blocks = plan_for("system.num_gpus=64", "parallel.tp=2", "parallel.cp=1,2",
                      "parallel.tp_comm_overlap=true,false", "parallel.overlap_blocks=true", *axes)
    assert blocks.piece_overlap_points() == 0
    assert plan_for("system.num_gpus=64", "parallel.tp=2", *axes).piece_overlap_points() == 0
