"""Sweep expansion from Hydra's override grammar (search/sweep/space.py)."""

from __future__ import annotations

import numpy as np
import pytest

from search.sweep.space import expand_grid, parse_overrides, sample_random
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
