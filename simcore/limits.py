"""Limits and bounds of every number and document that enters simsweep (README "Limits and bounds").

One rule table (:data:`LIMITS`) and the checks that apply it. Every number read from a config,
the command line, an ASTRA-sim JSON/YAML file, a Chakra field or an MSCCL XML passes
:func:`check_number` (finite, in range, integral where asked, within the output type); JSON is
read by :func:`load_json` (``NaN``/``Infinity`` rejected, nesting bounded) and YAML by
:func:`load_yaml` (aliases bounded, ``.inf``/``.nan`` rejected). A broken rule is an
:class:`~simcore.errors.InputError` naming the key, the value and the rule.

Resource bounds can be raised per process through the environment (``SIMSWEEP_MAX_<NAME>``, e.g.
``SIMSWEEP_MAX_GRAPH_NODES=5e7``); each default is sized so that the work it admits finishes in
minutes on a 2-core, 24 GiB machine.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any

import yaml

from simcore.errors import InputError

__all__ = [
    "INT64_MAX",
    "LIMITS",
    "UINT64_MAX",
    "check_number",
    "limit",
    "load_json",
    "load_yaml",
]

UINT64_MAX = 2**64 - 1
INT64_MAX = 2**63 - 1

# name -> (default, what it bounds); the README's "Limits and bounds" table lists the same rows.
LIMITS: dict[str, tuple[float, str]] = {
    "time_ns": (float(2**53), "any time in ns (durations, delays, latencies): results are float64 ns and stay exact"),
    "bytes": (float(2**53), "any size in bytes (message, tensor, memory)"),
    "points": (1e7, "design points of a sweep (grid product or random count), computed before expanding"),
    "graph_ranks": (1e5, "simulated ranks (GPUs / NPUs) of one design point or ASTRA-sim network"),
    "graph_layers": (1e4, "layers of one model"),
    "micro_batches": (1e5, "micro-batches per data-parallel replica (global_batch / (dp x micro_batch))"),
    "graph_nodes": (1e7, "nodes of one iteration graph (one rank per pipeline stage: micro-batches x layers x "
                    "ops per layer, plus ends), estimated from the config before the graph is built"),
    "export_nodes": (1e8, "Chakra ET nodes of one export, all ranks together (ranks x nodes of a rank's stage)"),
    "dataset_splits": (1e4, "ASTRA-sim preferred-dataset-splits / active-chunks-per-dimension"),
    "trace_bytes": (4e9, "decompressed bytes of one Chakra ET file (gzip bomb guard)"),
    "yaml_nodes": (1e6, "YAML nodes of one file counted with every alias expanded (alias bomb guard)"),
    "json_depth": (64.0, "nesting depth of one JSON document"),
    "expr_magnitude": (1e300, "magnitude of any value computed by a search.derived expression"),
    "expr_exponent": (1e4, "magnitude of an exponent in a search.derived expression"),
    "ray_connect_s": (60.0, "seconds to wait while connecting to a Ray cluster address"),
}


def limit(name: str) -> float:
    """The bound ``name`` of :data:`LIMITS`, or its override ``SIMSWEEP_MAX_<NAME>``."""
    default = LIMITS[name][0]
    raw = os.environ.get(f"SIMSWEEP_MAX_{name.upper()}")
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise InputError(f"SIMSWEEP_MAX_{name.upper()}", raw, "must be a number") from None
    if not (math.isfinite(value) and value > 0):
        raise InputError(f"SIMSWEEP_MAX_{name.upper()}", raw, "must be a finite number > 0")
    return value


def check_number(
    key: str,
    value: Any,
    *,
    lo: float | None = None,
    hi: float | None = None,
    lo_open: bool = False,
    integer: bool = False,
) -> Any:
    """Return ``value`` if it is a finite (integral) number in ``[lo, hi]``; else raise.

    ``lo_open`` makes the lower bound strict (``> lo``). Booleans are not numbers here.
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InputError(key, value, "must be an integer" if integer else "must be a number")
    if isinstance(value, float) and not math.isfinite(value):
        raise InputError(key, value, "must be a finite number")
    if integer and isinstance(value, float) and not value.is_integer():
        raise InputError(key, value, "must be an integer")
    if lo is not None and (value <= lo if lo_open else value < lo):
        raise InputError(key, value, f"must be {'>' if lo_open else '>='} {_fmt(lo)}")
    if hi is not None and value > hi:
        raise InputError(key, value, f"must be <= {_fmt(hi)}")
    return value


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e16 else f"{x:g}"


def _depth_ok(data: Any, max_depth: int) -> bool:
    stack = [(data, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict | list):
            if depth > max_depth:
                return False
            children = node.values() if isinstance(node, dict) else node
            stack.extend((c, depth + 1) for c in children if isinstance(c, dict | list))
    return True


def _first_nonfinite(data: Any) -> tuple[str, float] | None:
    stack: list[tuple[str, Any]] = [("", data)]
    while stack:
        where, node = stack.pop()
        if isinstance(node, float) and not math.isfinite(node):
            return where, node
        if isinstance(node, dict):
            stack.extend((f"{where}.{k}" if where else str(k), v) for k, v in node.items())
        elif isinstance(node, list):
            stack.extend((f"{where}[{i}]", v) for i, v in enumerate(node))
    return None


def decode_utf8(raw: bytes, source: str) -> str:
    """``raw`` as UTF-8 text, or an InputError naming ``source`` and the first bad byte (a UTF-16
    file, say: JSON and YAML inputs are UTF-8)."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise InputError(source, f"byte {err.start}: 0x{raw[err.start:err.start + 1].hex()}",
                         "must be UTF-8 text (save it as UTF-8, not UTF-16 or a legacy code page)") from None


def load_json(text: str, source: str) -> Any:
    """Parse JSON text: ``NaN``/``Infinity`` and nesting deeper than ``json_depth`` are errors."""
    max_depth = int(limit("json_depth"))
    try:
        data = json.loads(text)
    except RecursionError:
        raise InputError(source, f"{len(text)} chars", f"nested deeper than {max_depth} levels") from None
    except json.JSONDecodeError as err:
        raise InputError(source, text[:20], f"not valid JSON ({err.msg} at line {err.lineno})") from None
    if not _depth_ok(data, max_depth):
        raise InputError(source, f"{len(text)} chars", f"nested deeper than {max_depth} levels")
    bad = _first_nonfinite(data)
    if bad is not None:
        raise InputError(f"{source}:{bad[0]}", bad[1], "must be a finite number (no NaN/Infinity)")
    return data


def _expanded_nodes(root: Any, cap: float) -> float:
    """Nodes of a composed YAML graph with every alias expanded (shared subtrees counted per use)."""
    sizes: dict[int, float] = {}
    order: list[Any] = []
    stack = [(root, False)]
    while stack:  # post-order without recursion; a cycle (recursive alias) counts as over the cap
        node, done = stack.pop()
        if id(node) in sizes:
            continue
        children = _children(node)
        if done:
            sizes[id(node)] = 1.0 + sum(sizes.get(id(c), cap + 1) for c in children)
            continue
        order.append(node)
        stack.append((node, True))
        stack.extend((c, False) for c in children if id(c) not in sizes)
        if len(order) > cap:
            return cap + 1
    return sizes[id(root)]


def _children(node: Any) -> list[Any]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [x for pair in node.value for x in pair]
    return []


def load_yaml(text: str, source: str) -> Any:
    """Parse YAML safely: at most ``yaml_nodes`` nodes with aliases expanded, no ``.inf``/``.nan``."""
    loader = yaml.SafeLoader(text)
    cap = limit("yaml_nodes")
    try:
        node = loader.get_single_node()
        if node is not None and _expanded_nodes(node, cap) > cap:
            raise InputError(source, "aliases", f"expands to more than {_fmt(cap)} YAML nodes (alias bomb guard)")
        data = None if node is None else loader.construct_document(node)
    except RecursionError:
        raise InputError(source, f"{len(text)} chars", "nested too deeply") from None
    except yaml.YAMLError as err:
        raise InputError(source, "", f"not valid YAML: {str(err).splitlines()[0]}") from None
    finally:
        loader.dispose()
    max_depth = int(limit("json_depth"))
    if not _depth_ok(data, max_depth):
        raise InputError(source, f"{len(text)} chars", f"nested deeper than {max_depth} levels")
    bad = _first_nonfinite(data)
    if bad is not None:
        raise InputError(f"{source}:{bad[0]}", bad[1], "must be a finite number")
    return data
