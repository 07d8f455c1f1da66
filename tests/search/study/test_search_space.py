"""Search-space grammar (Hydra override grammar -> Optuna distributions) and derived values."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

from search.study.space import (
    DerivedValueError,
    default_parallel_space,
    default_space,
    evaluate_derived,
    parse_distribution,
    parse_space,
)
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


@pytest.mark.parametrize(("expression", "value", "rule"), [
    ("8 / (a - 2)", "'8 / 0'", "division by zero"),
    ("8 % (a - 2)", "'8 % 0'", "division by zero"),
    ("8 * 10 ** (200 * a)", "'10 ** 400'", "result beyond 1e+300 (limit expr_magnitude)"),
    ("8 * 10 ** ((a - 1) * 20000)", "'... ** 20000'", "exponent beyond +-10000 (limit expr_exponent)"),
    ("1e200 * (1e200 * (a - 1) + 1)", "inf", "not a finite number"),
    ("8 + 0 * (3 - 2 * a) ** 0.5", "'6.12e-17+1j'", "not a real number"),
])
def test_an_expression_without_a_value_at_a_sample_raises_a_derived_value_error(
        expression: str, value: str, rule: str) -> None:
    """At a = 2 the expression has no value (the trial fails to build); at a = 1 it has one
    (or an infeasible reason). Before, division by zero and a complex result were infeasible
    reasons, and a result past the limits was reported as '|value| > limit'."""
    with pytest.raises(DerivedValueError) as caught:
        evaluate_derived("parallel.dp", expression, {"a": 2}.__getitem__)
    assert str(caught.value) == f"search.derived.parallel.dp={value}: {rule}"
    evaluate_derived("parallel.dp", expression, {"a": 1}.__getitem__)  # no error


def test_an_expression_wrong_whatever_the_values_is_not_a_derived_value_error() -> None:
    for expression in ("abs(a)", "a + b.c"):
        with pytest.raises(InputError) as caught:
            evaluate_derived("parallel.dp", expression, {"a": 2, "b.c": "x"}.__getitem__)
        assert not isinstance(caught.value, DerivedValueError)


def test_derived_rejects_code_and_clashes() -> None:
    with pytest.raises(InputError):
        evaluate_derived("x", "__import__('os').getcwd()", lambda key: 1)
    with pytest.raises(InputError, match="also searched"):
        parse_space({"parallel.dp": "1,2"}, {"parallel.dp": "system.num_gpus"})



CONF = Path(__file__).resolve().parents[3] / "conf"


def _default_space(workload: str, num_gpus: int) -> dict[str, str]:
    data = yaml.safe_load((CONF / "workload" / f"{workload}.yaml").read_text())
    return default_space(data, num_gpus=num_gpus, gpus_per_node=8, global_batch=2048)


def test_layer_split_is_searched_where_it_can_change_a_plan() -> None:
    """GPT-3: every pp divides 96 and the output layer (0.34 layers) never sets the busiest
    chunk, so the axis would only slow the search; Llama 3 405B: every pp of 4-64 is uneven;
    Llama 3 70B: 80 layers divide, but at pp 16 the output layer (1.06 layers at s 8,192) makes
    the last stage the busiest (5 + 1.06) and balanced (a stage of 6, the last 4) is lighter."""
    assert "parallel.layer_split" not in _default_space("gpt3_175b", 1024)
    for workload in ("llama3_405b", "llama3_70b"):
        space = _default_space(workload, 8192)
        assert space["parallel.layer_split"] == "choice(even,balanced)", workload
    assert "64" in _default_space("llama3_405b", 8192)["parallel.pp"]  # 126 / 64: 1.6% pad
    assert "32" not in _default_space("llama3_70b", 8192)["parallel.pp"]  # 80 / 32: 20% pad
    # the same divisible shape with a negligible output layer: nothing to balance
    args = dict(num_gpus=8192, gpus_per_node=8, num_layers=80, num_heads=64, global_batch=2048)
    assert "parallel.layer_split" not in default_parallel_space(**args, output_layers=0.05)
    assert "parallel.layer_split" in default_parallel_space(**args, output_layers=1.06)
