"""Search-space grammar (Hydra override grammar -> Optuna distributions) and derived values."""

from __future__ import annotations

import pytest
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

from search.study.space import evaluate_derived, parse_distribution, parse_space
from simcore.errors import InputError


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("choice(1,2,4,8)", CategoricalDistribution([1, 2, 4, 8])),
        ("1,2,4", CategoricalDistribution([1, 2, 4])),
        ("choice(none,selective,full)", CategoricalDistribution(["none", "selective", "full"])),
        ("choice(true,false)", CategoricalDistribution([True, False])),
        ("interval(100,900)", FloatDistribution(100.0, 900.0)),
        ("int(interval(1,64))", IntDistribution(1, 64)),
        ("int_interval(1,64)", IntDistribution(1, 64)),
        ("tag(log, interval(1e-3, 1))", FloatDistribution(1e-3, 1.0, log=True)),
        ("tag(log, int_interval(1, 1024))", IntDistribution(1, 1024, log=True)),
        ("range(8,129,8)", IntDistribution(8, 128, step=8)),
        ("range(0.5,2.0,0.5)", FloatDistribution(0.5, 1.5, step=0.5)),
        ("4", CategoricalDistribution([4])),
    ],
)
def test_expression_to_distribution(expr: str, expected: object) -> None:
    assert parse_distribution("parallel.tp", expr) == expected


@pytest.mark.parametrize("expr", ["interval(5,1)", "choice(1,", "tag(log, interval(0,1))", "range(5,1,1)"])
def test_bad_expression_is_input_error_naming_key(expr: str) -> None:
    with pytest.raises(InputError, match=r"search\.space\.parallel\.tp"):
        parse_distribution("parallel.tp", expr)


def test_nested_and_dotted_keys_flatten_and_grid_size() -> None:
    space = parse_space({"parallel": {"tp": "choice(1,2,4)", "pp": "1,2"},
                         "system.scaleout.bandwidth_GBps": "range(25,101,25)"})
    assert list(space.distributions) == ["parallel.tp", "parallel.pp",
                                         "system.scaleout.bandwidth_GBps"]
    assert space.grid()["system.scaleout.bandwidth_GBps"] == [25, 50, 75, 100]
    assert space.size() == 3 * 2 * 4
    assert parse_space({"a": "interval(0,1)"}).size() is None


def test_derived_dp_whole_or_reason() -> None:
    space = parse_space({"parallel.tp": "choice(1,3)"},
                        {"parallel.dp": "system.num_gpus / (parallel.tp * parallel.pp)"})
    values = {"system.num_gpus": 64, "parallel.pp": 2, "parallel.tp": 4}
    assert evaluate_derived("parallel.dp", space.derived["parallel.dp"], values.__getitem__) == (8, "")
    values["parallel.tp"] = 3
    value, reason = evaluate_derived("parallel.dp", space.derived["parallel.dp"], values.__getitem__)
    assert value is None and "not integral" in reason


def test_derived_rejects_code_and_clashes() -> None:
    with pytest.raises(InputError):
        evaluate_derived("x", "__import__('os').getcwd()", lambda key: 1)
    with pytest.raises(InputError, match="also searched"):
        parse_space({"parallel.dp": "1,2"}, {"parallel.dp": "system.num_gpus"})
