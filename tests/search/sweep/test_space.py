"""Sweep expansion from Hydra's override grammar (search/sweep/space.py)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from search.sweep.space import expand_grid, parse_overrides, sample_random, sample_sobol
from simcore.errors import InputError


def _opts(key: str) -> list[str]:
    return ["dgx_a100_80g", "dgx_h100_80g", "mi300x_8"] if key == "system" else []


def test_choice_range_and_glob_expand_to_the_cartesian_product_first_axis_slowest():
    p = parse_overrides(
        ["parallel.tp=1,2,4", "system=glob(dgx_*)", "seed=3"],
        {"system.scaleout.bandwidth_GBps": "range(25,101,25)"}, _opts)
    assert p.fixed == ("seed=3",)
    assert [a.key for a in p.axes] == ["parallel.tp", "system", "system.scaleout.bandwidth_GBps"]
    assert p.axes[1].values == ("dgx_a100_80g", "dgx_h100_80g") and p.axes[1].is_group
    cols = expand_grid(p.axes)
    assert len(cols["parallel.tp"]) == 3 * 2 * 4
    # Hydra's range excludes stop: 25, 50, 75, 100
    assert cols["system.scaleout.bandwidth_GBps"][:4].tolist() == [25, 50, 75, 100]
    assert cols["parallel.tp"][:8].tolist() == [1] * 8 and cols["parallel.tp"][-1] == 4
    rows = set(zip(*(cols[k].tolist() for k in cols), strict=True))
    assert len(rows) == 24


def test_command_line_replaces_a_sweep_file_axis_of_the_same_key():
    p = parse_overrides(["parallel.tp=8"], {"parallel.tp": "1,2", "parallel.pp": "1,2"}, _opts)
    assert p.fixed == ("parallel.tp=8",)
    assert [a.key for a in p.axes] == ["parallel.pp"]


def test_random_mode_is_seeded_and_respects_interval_int_and_log_tags():
    axes = parse_overrides(["a=interval(1,2)", "b=int(interval(3,5))",
                            "c=tag(log,interval(1,1000))", "d=x,y"], {}, _opts).axes
    one = sample_random(axes, 2000, seed=7)
    two = sample_random(axes, 2000, seed=7)
    for key in one:
        assert one[key].tolist() == two[key].tolist()
    assert one["a"].min() >= 1 and one["a"].max() <= 2
    assert set(one["b"].tolist()) == {3, 4, 5}
    # log-uniform on [1, 1000]: about a third of the draws below 10
    assert 0.25 < float(np.mean(one["c"] < 10)) < 0.42
    assert set(one["d"].tolist()) == {"x", "y"}
    assert sample_random(axes, 10, seed=8)["a"].tolist() != one["a"][:10].tolist()


def test_sobol_mode_is_seeded_maps_every_axis_kind_and_covers_evenly():
    """sweep.mode=sobol: the first n points of a scrambled Sobol' sequence, each coordinate
    mapped to its axis; its star discrepancy over 1,024 points is a fraction of independent
    draws' (what the mode is for), and each value of a choice axis gets its share."""
    from scipy.stats import qmc

    axes = parse_overrides(["a=interval(1,2)", "b=int(interval(3,5))",
                            "c=tag(log,interval(1,1000))", "d=x,y,z,w"], {}, _opts).axes
    one, two = sample_sobol(axes, 1024, seed=7), sample_sobol(axes, 1024, seed=7)
    for key in one:
        assert one[key].tolist() == two[key].tolist()
    assert sample_sobol(axes, 8, seed=8)["a"].tolist() != one["a"][:8].tolist()
    assert one["a"].min() >= 1 and one["a"].max() < 2
    assert sorted(set(one["b"].tolist())) == [3, 4, 5] and one["b"].dtype == np.int64
    assert 0.30 < float(np.mean(one["c"] < 10)) < 0.37  # a third of the log range, evenly
    counts = {v: int(np.sum(one["d"] == v)) for v in "xyzw"}
    assert counts == dict.fromkeys("xyzw", 256)  # 1,024 points: exactly a quarter each
    two_d = parse_overrides(["p=interval(0,1)", "q=interval(0,1)"], {}, _opts).axes
    sobol = sample_sobol(two_d, 1024, seed=1)
    rand = sample_random(two_d, 1024, seed=1)
    disc = [qmc.discrepancy(np.column_stack([c["p"], c["q"]]), method="L2-star")
            for c in (sobol, rand)]
    assert disc[0] < 0.25 * disc[1]
    with warnings.catch_warnings():  # a count that is not a power of two: no warning
        warnings.simplefilter("error")
        assert sample_sobol(two_d, 1000, seed=1)["p"].shape == (1000,)


def test_sobol_mode_refuses_a_bad_count_or_more_axes_than_its_dimensions():
    from scipy.stats import qmc

    from search.sweep.space import Axis

    axes = parse_overrides(["p=interval(0,1)"], {}, _opts).axes
    for count in (0, -4, 2.5):
        with pytest.raises(InputError) as err:
            sample_sobol(axes, count, seed=0)  # type: ignore[arg-type]
        assert err.value.key == "sweep.num_points"
    many = [Axis(key=f"a{i}", expr="interval(0,1)", low=0.0, high=1.0)
            for i in range(qmc.Sobol.MAXDIM + 1)]
    with pytest.raises(InputError) as err:
        sample_sobol(many, 8, seed=0)
    assert err.value.key == "sweep.axes" and "sweep.mode=random" in err.value.rule


def test_shuffle_permutes_with_the_seed():
    a = parse_overrides(["x=shuffle(1,2,3,4,5,6,7,8)"], {}, _opts, seed=1).axes[0].values
    b = parse_overrides(["x=shuffle(1,2,3,4,5,6,7,8)"], {}, _opts, seed=1).axes[0].values
    assert a == b and sorted(a) == list(range(1, 9)) and a != tuple(range(1, 9))


@pytest.mark.parametrize(("override", "rule"), [
    ("a=range(1,", "override grammar"),
    ("a=1,1", "repeats"),
    ("a=glob(*)", "config group"),
    ("a=interval(3,1)", "low < high"),
])
def test_bad_axes_name_the_override_and_the_rule(override, rule):
    with pytest.raises(InputError) as err:
        parse_overrides([override], {}, _opts)
    assert override in str(err.value) and rule in str(err.value)


def test_grid_refuses_an_interval_axis():
    axes = parse_overrides(["a=interval(1,2)"], {}, _opts).axes
    with pytest.raises(InputError, match="sweep.mode=random"):
        expand_grid(axes)


@pytest.mark.parametrize("cli", [("parallel.tp=1,2", "parallel.tp=4"), ("parallel.tp=4", "parallel.tp=1,2"),
                                 ("parallel.tp=1,2", "parallel.tp=4,8"),
                                 ("parallel=default,megatron_tp8_pp8", "+parallel=default")])
def test_a_key_given_twice_with_an_axis_is_refused_naming_both(cli):
    key = cli[0].split("=")[0]
    with pytest.raises(InputError, match="given twice") as err:
        parse_overrides(list(cli), {}, _opts)
    assert err.value.key == key and cli[0] in err.value.rule and cli[1] in err.value.rule


def test_repeated_single_values_keep_hydras_last_wins_and_a_deletion_may_precede():
    assert parse_overrides(["parallel.tp=1", "parallel.tp=4"], {}, _opts).fixed == (
        "parallel.tp=1", "parallel.tp=4")
    p = parse_overrides(["~parallel.foo", "+parallel.foo=1,2"], {}, _opts)
    assert [a.key for a in p.axes] == ["parallel.foo"]
