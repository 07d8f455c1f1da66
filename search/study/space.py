"""Search spaces written in Hydra's override grammar, turned into Optuna distributions.

A search space maps dotted config keys to sweep expressions, exactly as Hydra's sweep overrides
and the (optuna<3) Hydra Optuna sweeper spell them, parsed with Hydra's own ``OverridesParser``:

* ``choice(1,2,4,8)`` or ``1,2,4,8``      -> CategoricalDistribution
* ``interval(100,900)``                   -> FloatDistribution
* ``int(interval(1,64))``, ``int_interval(1,64)`` -> IntDistribution
* ``range(8,129,8)``                      -> IntDistribution with step (FloatDistribution if floats)
* ``tag(log, interval(1,1000))``          -> log-scaled (also ``tag(log, int(interval(...)))``)

Derived values are arithmetic expressions over other config keys, e.g.
``parallel.dp: system.num_gpus / (parallel.tp * parallel.pp * parallel.cp)``; a derived integer
that does not come out whole is reported as a reason, which the study records as an infeasible
(constraint-violating) trial rather than an error. An expression with no value at a sample
(beyond the expression limits, a division by zero, a result that is not a finite real number)
raises :class:`DerivedValueError`: that sample's config cannot be built, and the study tells
its trial FAIL. Expressions are evaluated by a small AST walker over numbers, config keys and
``+ - * / // % **``, ``min``, ``max``: nothing is executed.
"""

from __future__ import annotations

import ast
import math
import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import ChoiceSweep, IntervalSweep, RangeSweep
from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)

from search.config.build import build_model
from simcore.errors import InputError
from simcore.limits import limit
from simcore.specs.layer_split import balanced_split, chunk_layers

__all__ = [
    "DerivedValueError",
    "SearchSpace",
    "default_dp_space",
    "default_parallel_space",
    "default_space",
    "derived_names",
    "evaluate_derived",
    "parse_distribution",
    "parse_space",
]

_INT_INTERVAL = re.compile(r"int_interval\s*\(")
_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
    ast.Pow: lambda a, b: _bounded_pow(a, b),
}
_SYMBOLS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//",
            ast.Mod: "%", ast.Pow: "**"}
_MAX_EXPRESSION_CHARS = 1000
_FUNCS: dict[str, Callable[..., Any]] = {"min": min, "max": max}


class DerivedValueError(InputError):
    """A derived expression that has no value at one sample: a result or exponent beyond the
    expression limits, a division by zero, or a result that is not a finite real number. The
    expression itself is sound (other samples may have a value); ``key`` names the derived
    value, ``value`` the operation or result, ``rule`` why it has no value."""


@dataclass(frozen=True)
class SearchSpace:
    """Distributions to sample (in order) and derived expressions to compute after sampling."""

    distributions: dict[str, BaseDistribution]
    derived: dict[str, str]

    def grid(self) -> dict[str, list[Any]]:
        """The grid for Optuna's GridSampler; every dimension must be discrete."""
        grid: dict[str, list[Any]] = {}
        for key, dist in self.distributions.items():
            if isinstance(dist, CategoricalDistribution):
                grid[key] = list(dist.choices)
            elif isinstance(dist, IntDistribution) and not dist.log:
                grid[key] = list(range(dist.low, dist.high + 1, dist.step))
            else:
                raise InputError(f"search.space.{key}", dist, "grid sampler needs choice/range")
        return grid

    def size(self) -> int | None:
        """Number of grid points, or None when a dimension is continuous."""
        try:
            return math.prod(len(v) for v in self.grid().values())
        except InputError:
            return None


def parse_distribution(key: str, expression: str | int | float | bool) -> BaseDistribution:
    """One sweep expression (see module docstring) -> an Optuna distribution."""
    text = _rewrite_int_interval(str(expression))
    try:
        override = OverridesParser.create().parse_override(f"{key}={text}")
    except Exception as err:  # Hydra raises OverrideParseException with a multi-line message
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise InputError(f"search.space.{key}", expression, f"not a sweep expression: {first}") from None
    value = override.value()
    log = "log" in getattr(value, "tags", set())
    if isinstance(value, ChoiceSweep):
        return CategoricalDistribution([_plain(v) for v in value.list])
    if isinstance(value, IntervalSweep):
        return _interval(key, expression, value, log)
    if isinstance(value, RangeSweep):
        return _range(key, expression, value, log)
    if not override.is_sweep_override():
        return CategoricalDistribution([_plain(value)])
    raise InputError(f"search.space.{key}", expression, "use choice/interval/int_interval/range")


def _rewrite_int_interval(text: str) -> str:
    """``int_interval(a,b)`` -> Hydra's ``int(interval(a,b))``."""
    match = _INT_INTERVAL.search(text)
    while match:
        depth, end = 1, match.end()
        while end < len(text) and depth:
            depth += {"(": 1, ")": -1}.get(text[end], 0)
            end += 1
        inner = text[match.end() : end - 1]
        text = f"{text[: match.start()]}int(interval({inner})){text[end:]}"
        match = _INT_INTERVAL.search(text)
    return text


def _plain(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


def _interval(key: str, expression: object, value: IntervalSweep, log: bool) -> BaseDistribution:
    low, high = value.start, value.end
    if low is None or high is None or not low < high:
        raise InputError(f"search.space.{key}", expression, "interval needs low < high")
    if log and low <= 0:
        raise InputError(f"search.space.{key}", expression, "log scale needs low > 0")
    if isinstance(low, int) and isinstance(high, int):
        return IntDistribution(low, high, log=log)
    return FloatDistribution(float(low), float(high), log=log)


def _range(key: str, expression: object, value: RangeSweep, log: bool) -> BaseDistribution:
    start, stop, step = value.start, value.stop, value.step
    if start is None or stop is None or step is None or step <= 0 or not start < stop:
        raise InputError(f"search.space.{key}", expression, "range needs start < stop, step > 0")
    if all(isinstance(v, int) for v in (start, stop, step)):
        last = start + (stop - 1 - start) // step * step  # Hydra's range excludes stop
        if log:
            raise InputError(f"search.space.{key}", expression, "log range: use a log interval")
        return IntDistribution(int(start), int(last), step=int(step))
    n = math.floor((stop - start) / step - 1e-12)
    return FloatDistribution(float(start), float(start + n * step), step=float(step))


def _flatten(node: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in node.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(_flatten(value, dotted + "."))
        else:
            flat[dotted] = value
    return flat


def parse_space(space: Mapping[str, Any], derived: Mapping[str, Any] | None = None) -> SearchSpace:
    """``search.space`` (nested or dotted keys) and ``search.derived`` -> a :class:`SearchSpace`."""
    flat_derived = {k: str(v) for k, v in _flatten(derived or {}).items()}
    distributions = {k: parse_distribution(k, v) for k, v in _flatten(space).items()}
    for key, expr in flat_derived.items():
        if key in distributions:
            raise InputError(f"search.derived.{key}", expr, "key is also searched")
        _parse_expression(key, expr)
    return SearchSpace(distributions, flat_derived)


def _parse_expression(key: str, expression: str) -> ast.expr:
    if len(expression) > _MAX_EXPRESSION_CHARS:
        raise InputError(f"search.derived.{key}", expression[:40] + "...",
                         f"longer than {_MAX_EXPRESSION_CHARS} characters")
    try:
        return ast.parse(expression, mode="eval").body
    except SyntaxError as err:
        raise InputError(f"search.derived.{key}", expression, f"not an expression: {err.msg}") from None
    except (RecursionError, MemoryError):
        raise InputError(f"search.derived.{key}", expression[:40], "nested too deeply") from None


def derived_names(expression: str) -> list[str]:
    """The config keys a derived expression reads (``system.num_gpus``), in order, once each;
    function names (``min``) are not keys."""
    names: list[str] = []

    def walk(node: ast.AST) -> None:
        if isinstance(node, ast.Name | ast.Attribute):
            try:
                name = _dotted(node)
            except InputError:
                return  # not a plain dotted key: the evaluator refuses it
            if name not in names:
                names.append(name)
            return
        if isinstance(node, ast.Call):
            for arg in node.args:
                walk(arg)
            return
        for child in ast.iter_child_nodes(node):
            walk(child)
    walk(_parse_expression("", expression))
    return names


def _bounded_pow(base: Any, exponent: Any) -> Any:
    """``base ** exponent`` when |exponent| <= expr_exponent and the result's magnitude stays
    within expr_magnitude (checked with logarithms before computing: ``9**9**9`` never runs)."""
    max_exp, max_mag = limit("expr_exponent"), limit("expr_magnitude")
    if abs(exponent) > max_exp:
        raise DerivedValueError("search.derived", f"... ** {exponent}", f"exponent beyond +-{max_exp:g} (limit expr_exponent)")
    if base not in (0, 1, -1) and exponent > 0 and exponent * math.log10(abs(base)) > math.log10(max_mag):
        raise DerivedValueError("search.derived", f"{base} ** {exponent}", f"result beyond {max_mag:g} (limit expr_magnitude)")
    return operator.pow(base, exponent)


def _bounded(value: Any) -> Any:
    """``value``, a finite real number within expr_magnitude; else :class:`DerivedValueError`."""
    if isinstance(value, complex):  # a negative base to a fractional power
        raise DerivedValueError("search.derived", f"{value:.3g}", "not a real number")
    if isinstance(value, float) and not math.isfinite(value):
        raise DerivedValueError("search.derived", value, "not a finite number")
    if isinstance(value, int | float) and abs(value) > limit("expr_magnitude"):
        raise DerivedValueError("search.derived", _magnitude(value), f"result beyond "
                                f"{limit('expr_magnitude'):g} (limit expr_magnitude)")
    return value


def _magnitude(value: int | float) -> str:
    """A short text of a huge ``value`` (``~1e+301``), even past a float's range."""
    return f"{'-' if value < 0 else ''}~1e+{int(math.log10(abs(value)))}"


def _apply(node: ast.BinOp, left: Any, right: Any) -> Any:
    """``left <op> right`` of a BinOp ``node``, bounded; an operation with no value (division
    by zero, a float overflow) raises :class:`DerivedValueError` naming it."""
    symbol = _SYMBOLS[type(node.op)]
    try:
        return _bounded(_BINOPS[type(node.op)](left, right))
    except ZeroDivisionError:
        raise DerivedValueError("search.derived", f"{left} {symbol} {right}",
                                "division by zero") from None
    except OverflowError:
        raise DerivedValueError("search.derived", f"{left} {symbol} {right}",
                                "overflows a float") from None


def evaluate_derived(
    key: str, expression: str, lookup: Callable[[str], Any]
) -> tuple[int | float | None, str]:
    """Evaluate a derived expression; returns (value, "") or (None, reason) when invalid.

    Integral results of a division come back as ``int``; a non-integral result of an expression
    involving ``/`` is invalid (reason ``"<key> not integral: <value>"``) because every derived
    quantity here (dp, node counts) is a count. An expression with no value at these key values
    raises :class:`DerivedValueError` (see the module docstring); one that is wrong whatever
    the values (an unknown function, a non-numeric key, too deep) raises :class:`InputError`.
    """
    node = _parse_expression(key, expression)
    try:
        value = _bounded(_eval(node, lookup))
    except RecursionError:
        raise InputError(f"search.derived.{key}", expression[:60], "nests too deeply") from None
    except DerivedValueError as err:
        raise DerivedValueError(f"search.derived.{key}", err.value, err.rule) from None
    except InputError as err:
        if err.key != "search.derived":
            raise
        raise InputError(f"search.derived.{key}", err.value, err.rule) from None
    if isinstance(value, float):
        if abs(value - round(value)) > 1e-9:
            return None, f"{key} not integral: {value:g}"
        value = int(round(value))
    if isinstance(value, int) and value <= 0:
        return None, f"{key} not positive: {value}"
    return value, ""


def _eval(node: ast.AST, lookup: Callable[[str], Any]) -> Any:
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        return _apply(node, _eval(node.left, lookup), _eval(node.right, lookup))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_eval(node.operand, lookup)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCS:
        if not node.args or node.keywords:
            raise InputError("search.derived", ast.unparse(node), "min/max need positional arguments")
        return _FUNCS[node.func.id](*(_eval(a, lookup) for a in node.args))
    if isinstance(node, ast.Name | ast.Attribute):
        value = lookup(_dotted(node))
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise InputError(_dotted(node), value, "derived expressions need numeric keys")
        return value
    raise InputError("search.derived", ast.unparse(node), "only numbers, keys, + - * / // % **")


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    raise InputError("search.derived", ast.unparse(node), "not a config key")


def _choice(values: list[Any]) -> str:
    return "choice(" + ",".join(str(v).lower() if isinstance(v, bool) else str(v)
                                for v in values) + ")"


#: an uneven pipeline split joins the default space when the layers it would need to divide
#: evenly (pp * ceil(L / pp) - L) are at most this share of the layers
_PP_PADDING_MAX = 0.1


def _split_matters(num_layers: int, pp: list[int], output_layers: float) -> bool:
    """Whether ``parallel.layer_split`` can change a plan of these pp (vp 1 or 2): some pp
    splits the layers unevenly, or the balanced split lowers the busiest chunk's work (the
    output layer's counted on the last chunk) below the even split's."""
    def busiest(split: tuple[int, ...]) -> float:
        return max(*split[:-1], split[-1] + output_layers) if len(split) > 1 else 0.0

    for p in pp:
        if num_layers % p:
            return True
        for chunks in (p, 2 * p):
            if p > 1 and num_layers >= chunks and busiest(balanced_split(
                    num_layers, chunks, output_layers)) < busiest(chunk_layers(num_layers, chunks)):
                return True
    return False


def default_parallel_space(
    *, num_gpus: int, gpus_per_node: int, num_layers: int, num_heads: int, global_batch: int,
    num_experts: int = 1, output_layers: float = 0.0,
) -> dict[str, str]:
    """The parallelization of a workload on a system, as sweep expressions.

    tp: powers of two up to the node size that divide the heads (TP stays inside a node, as
    Megatron-LM recommends: Narayanan et al. 2021 §3.3); pp: divisors of the GPU count up to
    64 and the layer count that divide the layers, or split them unevenly with at most 10% of
    padding (``pp * ceil(L / pp) <= 1.1 L``: the busiest stage's extra layers are a small
    part; Llama 3 405B's 126 layers divide by no power of two above 2, and Meta ran it at pp
    16); the layer split ``even`` / ``balanced`` (:mod:`simcore.specs.layer_split`) where it
    can change a plan: an uneven pp, or a balanced split whose busiest chunk is lighter, the
    output layer's work (``output_layers``, in layers) counted on the last chunk;
    micro-batch 1/2/4/8 (up to the global batch); interleaving 1/2; sequence parallelism;
    recompute none/selective/full; ZeRO 0/1; ep for MoE models. dp is derived
    (num_gpus / (tp*pp*cp)); combinations that do not divide are infeasible trials.
    """
    tp = [t for t in (1, 2, 4, 8, 16) if t <= gpus_per_node and num_heads % t == 0]
    pp = [p for p in range(1, min(num_layers, 64) + 1)
          if num_gpus % p == 0 and p * -(-num_layers // p) <= (1 + _PP_PADDING_MAX) * num_layers]
    micro = [m for m in (1, 2, 4, 8) if m <= global_batch]
    space = {
        "parallel.tp": _choice(tp),
        "parallel.pp": _choice(pp),
        "parallel.micro_batch": _choice(micro),
        "parallel.vp": _choice([1, 2]),
        "parallel.sequence_parallel": _choice([True, False]),
        "parallel.recompute": _choice(["none", "selective", "full"]),
        "parallel.zero_stage": _choice([0, 1]),
    }
    if _split_matters(num_layers, pp, output_layers):
        space["parallel.layer_split"] = _choice(["even", "balanced"])
    if num_experts > 1:
        space["parallel.ep"] = _choice([e for e in (1, 2, 4, 8, 16, 32, 64)
                                        if num_experts % e == 0])
    return space


def default_dp_space(*, family: str, num_gpus: int, global_batch: int, num_tables: int = 1,
                     dp: int | None = None) -> dict[str, str]:
    """The search space of a data-parallel family (``resnet``, ``gnmt``, ``dlrm``, ``traced``).

    These families have no tensor or pipeline split to search (their ``check`` refuses
    tp/pp/cp > 1), so the space is what their iteration time depends on:

    * ``parallel.micro_batch``: the batch per device per step, powers of two dividing the
      replica's share ``global_batch / dp`` (the rest is gradient accumulation); to search the
      batch per device with the global batch following it, add
      ``search.derived.parallel.global_batch: system.num_gpus * parallel.micro_batch``;
    * ``workload.bucket_mb``: the DDP gradient bucket (PyTorch's ``bucket_cap_mb``, default 25):
      small buckets start reducing earlier in the backward, large ones pay fewer latencies;
    * ``dlrm``: ``parallel.ep``, the table placement: tables whole on the ranks of groups of
      ``ep`` (``ep = dp``: every rank holds ``num_tables / dp`` tables, the all-to-all spans all
      ranks; smaller ``ep`` replicates each shard ``dp / ep`` times); powers of two dividing dp
      up to ``num_tables``;
    * ``traced``: the micro-batch is the traced batch, so ZeRO stage and DP overlap instead.
    """
    dp = dp or num_gpus
    share = global_batch // dp if global_batch % dp == 0 else global_batch
    micro = [m for m in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512) if m <= share and share % m == 0]
    if family == "traced":
        return {"parallel.zero_stage": _choice([0, 1, 2, 3]),
                "parallel.dp_overlap": _choice([True, False])}
    space = {"parallel.micro_batch": _choice(micro[-6:] or [1]),
             "workload.bucket_mb": _choice([1, 5, 25, 100])}
    if family == "dlrm":
        ep = [e for e in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
              if e <= dp and dp % e == 0 and e <= num_tables]
        space["parallel.ep"] = _choice(ep or [1])
    return space


def default_space(workload: Mapping[str, Any], *, num_gpus: int, gpus_per_node: int,
                  global_batch: int) -> dict[str, str]:
    """The default space of ``workload`` (its config mapping) by ``workload.family``:
    :func:`default_parallel_space` for the transformer, :func:`default_dp_space` otherwise."""
    family = str(workload.get("family") or "transformer")
    if family == "transformer":
        model = build_model({"workload": dict(workload)})
        return default_parallel_space(
            num_gpus=num_gpus, gpus_per_node=gpus_per_node, num_layers=model.num_layers,
            num_heads=model.num_heads, global_batch=global_batch,
            num_experts=model.num_experts, output_layers=model.output_layer_equivalents())
    return default_dp_space(family=family, num_gpus=num_gpus, global_batch=global_batch,
                            num_tables=int(workload.get("num_tables") or 1))
